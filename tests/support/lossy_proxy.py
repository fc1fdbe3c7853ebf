"""An HTTP/1.1 proxy in front of ``leaseq serve`` that loses answers on purpose.

Each request goes to the service and its whole answer comes back to the
proxy; then ``drop`` decides: relayed, or the client's connection is closed
without a byte of it, so the request took effect and the client never
heard. That is the lost answer a client's retry must not turn into a second
effect. Only what leaseq's API answers is understood: messages with a
Content-Length (no chunked bodies).

Before a request is forwarded, ``intercept`` (when given) may hold it (a
service that hangs: it never reaches the service, and its connection waits
until the proxy closes) or answer it itself (an outage: ``unavailable``
gives a 503 problem with ``Retry-After``) instead of the service.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Exchange:
    """One request and the answer the service gave it."""

    method: str
    path: str
    request: bytes
    status: int
    answer: bytes
    head: bytes = b""  # the request line and headers

    def header(self, name: str) -> str | None:
        """A request header's value (the first of that name), or None."""
        for line in self.head.split(b"\r\n")[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == name.lower().encode():
                return value.strip().decode()
        return None


Drop = Callable[[Exchange], bool]
# Called with a request's method and path before it is forwarded: awaits as long as the
# request is to be held, and returns a whole answer to send instead of the service's, or None.
Intercept = Callable[[str, str], Awaitable[bytes | None]]


def never(exchange: Exchange) -> bool:
    """Drops nothing."""
    return False


def unavailable(retry_after_s: int = 1) -> bytes:
    """A whole 503 ``unavailable`` answer (problem+json, ``Retry-After``), as the service's."""
    body = json.dumps(
        {
            "type": "urn:leaseq:problem:unavailable",
            "title": "Service unavailable",
            "status": 503,
            "detail": "the proxy in front of the service says so",
            "code": "unavailable",
        }
    ).encode()
    head = (
        "HTTP/1.1 503 Service Unavailable\r\n"
        "content-type: application/problem+json\r\n"
        f"retry-after: {retry_after_s}\r\n"
        f"content-length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _message(reader: asyncio.StreamReader) -> tuple[bytes, bytes] | None:
    """One HTTP message: its head and its body; None at the end of the connection."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
        assert name.strip().lower() != b"transfer-encoding", "chunked bodies are not relayed"
    return head, await reader.readexactly(length)


class LossyProxy:
    """Listens on 127.0.0.1:``port``, forwards to ``target_port``; ``dropped``: what it lost."""

    def __init__(
        self, target_port: int, drop: Drop = never, *, intercept: Intercept | None = None
    ) -> None:
        self.target_port = target_port
        self.drop = drop
        self.intercept = intercept
        self.port = 0
        self.seen: list[Exchange] = []
        self.dropped: list[Exchange] = []
        self._server: asyncio.Server | None = None
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def __aenter__(self) -> LossyProxy:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._connections):  # held requests among them
                task.cancel()
            await asyncio.gather(*self._connections, return_exceptions=True)
            await self._server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._relay(reader, writer)
        finally:
            self._connections.discard(task)

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_writer: asyncio.StreamWriter | None = None
        try:
            up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.target_port)
            while (request := await _message(reader)) is not None:
                if self.intercept is not None:
                    method, path, _ = request[0].split(b" ", 2)
                    canned = await self.intercept(method.decode(), path.decode())
                    if canned is not None:
                        writer.write(canned)
                        await writer.drain()
                        continue
                up_writer.write(b"".join(request))
                await up_writer.drain()
                answer = await _message(up_reader)
                if answer is None:
                    return
                method, path, _ = request[0].split(b" ", 2)
                status = int(answer[0].split(b" ", 2)[1])
                exchange = Exchange(
                    method.decode(), path.decode(), request[1], status, answer[1], request[0]
                )
                self.seen.append(exchange)
                if self.drop(exchange):
                    self.dropped.append(exchange)
                    return  # the connection closes, the answer unsent
                writer.write(b"".join(answer))
                await writer.drain()
        except (OSError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            # Both are closed before either is awaited: a cancellation that lands while
            # the first closes (the proxy leaving as an answer is dropped) must not leave
            # the second open for the garbage collector to find after the loop is gone.
            ends = [each for each in (writer, up_writer) if each is not None]
            for each in ends:
                each.close()
            for each in ends:
                with contextlib.suppress(OSError, asyncio.CancelledError):
                    await each.wait_closed()


class FirstOf:
    """Drops the first answer each of ``rules`` picks out (a rule: Exchange → bool)."""

    def __init__(self, **rules: Callable[[Exchange], bool]) -> None:
        self.rules = dict(rules)
        self.fired: set[str] = set()

    def __call__(self, exchange: Exchange) -> bool:
        for name, rule in self.rules.items():
            if name not in self.fired and exchange.status < 300 and rule(exchange):
                self.fired.add(name)
                return True
        return False
