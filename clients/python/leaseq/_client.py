"""The two clients of the REST API: ``AsyncClient`` for the worker, ``Client`` for scripts.

Both have every endpoint of ``leaseq._endpoints``, with the same parameters
and answers, and the retries of ``leaseq._wire``. Each call becomes one
``httpx.Request`` (``leaseq._wire.request_of``), and its ``httpx.Response`` is
read whole. They differ only in how it travels and how they sleep: the async
client hands it to its transport, by default ``AioHttpTransport``
(``leaseq._transport``: a worker sends one request per lead, and httpx's own
async transport costs it more than twice the CPU), and sleeps with
``asyncio.sleep``; the blocking one sends it through an ``httpx.Client`` and
sleeps with ``time.sleep``. The worker needs many calls in flight at once
(async); a script, a notebook or a sync web handler wants an answer now. A
transport given to either (tests give theirs) gets every request as the
default one would.
"""

from __future__ import annotations

import asyncio
import time
from types import TracebackType
from typing import Self, TypeVar

import httpx

from leaseq._endpoints import Endpoints
from leaseq._wire import Call, Exchange, Outcome, request_of, steps

_T = TypeVar("_T")


class AsyncClient(Endpoints[httpx.AsyncBaseTransport]):
    """The leaseq REST API over HTTP. Use ``async with AsyncClient(url) as client``.

    Every method is awaited, and raises as ``leaseq._endpoints`` says.
    """

    _transport: httpx.AsyncBaseTransport

    def _connect(self, transport: httpx.AsyncBaseTransport | None) -> None:
        if transport is None:
            from leaseq._transport import AioHttpTransport  # aiohttp's import: 0.1 s

            transport = AioHttpTransport()
        self._transport = transport

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
        await self._transport.aclose()

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
        request = request_of(call, self.url, self._headers)
        try:
            response = await self._transport.handle_async_request(request)
            try:
                await response.aread()
            finally:
                await response.aclose()
        except httpx.TransportError as exc:
            return exc
        return response


class Client(Endpoints[httpx.BaseTransport]):
    """The leaseq REST API over HTTP, blocking. Use ``with Client(url) as client``.

    The methods, parameters and answers of ``AsyncClient``, without ``await``:
    for scripts, notebooks and synchronous handlers.
    """

    _http: httpx.Client

    def _connect(self, transport: httpx.BaseTransport | None) -> None:
        self._http = httpx.Client(transport=transport)

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
            return self._http.send(request_of(call, self.url, self._headers))
        except httpx.TransportError as exc:
            return exc
