"""The two clients of the REST API: ``AsyncClient`` for the worker, ``Client`` for scripts.

Both have every endpoint of ``leaseq._endpoints``, with the same parameters
and answers, and the retries of ``leaseq._wire``. They differ only in the
transport: an ``httpx.AsyncClient`` and ``asyncio.sleep``, or an
``httpx.Client`` and ``time.sleep``. The worker needs many calls in flight at
once (async); a script, a notebook or a sync web handler wants an answer now.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Any, Self, TypeVar

import httpx

from leaseq._endpoints import Endpoints
from leaseq._wire import Call, Exchange, Outcome, steps

_T = TypeVar("_T")


class AsyncClient(Endpoints[httpx.AsyncBaseTransport]):
    """The leaseq REST API over HTTP. Use ``async with AsyncClient(url) as client``.

    Every method is awaited, and raises as ``leaseq._endpoints`` says.
    """

    _http: httpx.AsyncClient

    def _connect(
        self, transport: httpx.AsyncBaseTransport | None, **options: Any
    ) -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=transport, **options)

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _run(self, exchange: Exchange[_T]) -> _T:
        """Take the steps of ``exchange``: each call sent, each wait slept."""
        plan = steps(exchange, self.url, self.retry_policy, self.timeout_s)
        outcome: Outcome = None
        while True:
            try:
                step = plan.send(outcome)
            except StopIteration as done:
                result: _T = done.value
                return result
            if isinstance(step, Call):
                outcome = await self._send(step)
            else:
                await asyncio.sleep(step)
                outcome = None

    async def _send(self, call: Call) -> httpx.Response | httpx.TransportError:
        try:
            return await self._http.request(
                call.method, call.path, json=call.body, headers=call.headers, timeout=call.timeout_s
            )
        except httpx.TransportError as exc:
            return exc


class Client(Endpoints[httpx.BaseTransport]):
    """The leaseq REST API over HTTP, blocking. Use ``with Client(url) as client``.

    The methods, parameters and answers of ``AsyncClient``, without ``await``:
    for scripts, notebooks and synchronous handlers.
    """

    _http: httpx.Client

    def _connect(self, transport: httpx.BaseTransport | None, **options: Any) -> httpx.Client:
        return httpx.Client(transport=transport, **options)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _run(self, exchange: Exchange[_T]) -> _T:
        """Take the steps of ``exchange``: each call sent, each wait slept."""
        plan = steps(exchange, self.url, self.retry_policy, self.timeout_s)
        outcome: Outcome = None
        while True:
            try:
                step = plan.send(outcome)
            except StopIteration as done:
                result: _T = done.value
                return result
            if isinstance(step, Call):
                outcome = self._send(step)
            else:
                time.sleep(step)
                outcome = None

    def _send(self, call: Call) -> httpx.Response | httpx.TransportError:
        try:
            return self._http.request(
                call.method, call.path, json=call.body, headers=call.headers, timeout=call.timeout_s
            )
        except httpx.TransportError as exc:
            return exc
