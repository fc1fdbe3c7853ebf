"""The async client's transport (``leaseq._transport``) against a real socket: what it sends,
what it gives back, and each way a connection fails, as the ``httpx.TransportError`` the
client retries."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import httpx
import pytest

from leaseq import AsyncClient
from leaseq._transport import AioHttpTransport
from leaseq._wire import NO_RETRY

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(answer: Answer) -> AsyncIterator[tuple[str, list[int]]]:
    """A TCP server on 127.0.0.1 that runs ``answer`` per connection; its URL, and the
    number of connections it took so far (a list of one)."""
    accepted = [0]

    async def connection(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted[0] += 1
        try:
            await answer(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}", accepted
    finally:
        server.close()
        await server.wait_closed()


async def read_request(reader: asyncio.StreamReader) -> tuple[bytes, dict[bytes, bytes], bytes]:
    """One request: its request line, its headers (names lowercase) and its body."""
    line = await reader.readline()
    headers: dict[bytes, bytes] = {}
    while (header := await reader.readline()) not in (b"\r\n", b""):
        name, _, value = header.partition(b":")
        headers[name.strip().lower()] = value.strip()
    body = await reader.readexactly(int(headers.get(b"content-length", b"0")))
    return line.strip(), headers, body


def response(status: int, body: bytes, *extra: bytes) -> bytes:
    head = [b"HTTP/1.1 %d X" % status, b"Content-Length: %d" % len(body), *extra]
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def request(url: str, **extensions: float) -> httpx.Request:
    body = {"lead_id": 7, "token": "t\u00e9", "next": {"session": "s"}}
    timeout = {"timeout": dict.fromkeys(("connect", "read", "write", "pool"), 5.0) | extensions}
    return httpx.Request(
        "POST",
        url + "/complete?x=1",
        json=body,
        headers={"Idempotency-Key": "k-1"},
        extensions=timeout,
    )


async def test_a_request_goes_out_as_httpx_built_it_and_its_answer_comes_back_whole() -> None:
    seen: list[tuple[bytes, dict[bytes, bytes], bytes]] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while not reader.at_eof():
            try:
                seen.append(await read_request(reader))
            except asyncio.IncompleteReadError:
                return
            writer.write(response(409, b'{"code":"lease_lost"}', b"Retry-After: 3"))
            await writer.drain()

    async with serving(answer) as (url, accepted):
        transport = AioHttpTransport()
        try:
            sent = request(url)
            first = await transport.handle_async_request(sent)
            second = await transport.handle_async_request(request(url))
        finally:
            await transport.aclose()
    assert (first.status_code, first.json(), first.headers["retry-after"]) == (
        409,
        {"code": "lease_lost"},
        "3",
    )
    assert second.status_code == 409
    assert accepted == [1]  # the connection was kept alive for the second request
    line, headers, body = seen[0]
    assert line == b"POST /complete?x=1 HTTP/1.1"
    assert body == sent.content and json.loads(body)["token"] == "t\u00e9"
    assert headers[b"content-type"] == b"application/json"
    assert headers[b"idempotency-key"] == b"k-1"
    assert headers[b"host"] == url.removeprefix("http://").encode()


async def test_a_chunked_answer_is_read_whole() -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'5\r\n{"a":\r\n2\r\n1}\r\n0\r\n\r\n'
        )
        await writer.drain()

    async with serving(answer) as (url, _):
        transport = AioHttpTransport()
        try:
            answered = await transport.handle_async_request(request(url))
        finally:
            await transport.aclose()
    assert answered.json() == {"a": 1}


async def test_a_refused_connection_is_a_connect_error() -> None:
    async with serving(lambda reader, writer: asyncio.sleep(0)) as (url, _):
        pass  # closed: nothing listens on its port any more
    transport = AioHttpTransport()
    try:
        with pytest.raises(httpx.ConnectError):
            await transport.handle_async_request(request(url))
    finally:
        await transport.aclose()


async def test_a_connection_closed_before_the_answer_is_a_transport_error() -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)  # the request arrived whole: its answer is lost

    async with serving(hang_up) as (url, _):
        transport = AioHttpTransport()
        try:
            with pytest.raises(httpx.TransportError) as raised:
                await transport.handle_async_request(request(url))
        finally:
            await transport.aclose()
    assert not isinstance(raised.value, httpx.ConnectError)


async def test_an_answer_cut_short_is_a_transport_error() -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b'HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{"lead')
        await writer.drain()

    async with serving(cut) as (url, _):
        transport = AioHttpTransport()
        try:
            with pytest.raises(httpx.TransportError):
                await transport.handle_async_request(request(url))
        finally:
            await transport.aclose()


async def test_an_answer_later_than_the_read_timeout_is_a_read_timeout() -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await asyncio.sleep(5)

    async with serving(silent) as (url, _):
        transport = AioHttpTransport()
        try:
            with pytest.raises(httpx.ReadTimeout):
                await transport.handle_async_request(request(url, read=0.2))
        finally:
            await transport.aclose()


async def test_the_client_retries_an_answer_lost_on_its_default_transport() -> None:
    """The first connection hangs up after the request; the retry, on a new one, is answered."""

    async def lose_the_first(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        if accepted[0] == 1:
            return
        writer.write(response(200, b'{"requeued": 0, "failed": 0}'))
        await writer.drain()

    async with serving(lose_the_first) as (url, accepted), AsyncClient(url) as client:
        swept = await client.sweep("s")
    assert (swept.requeued, swept.failed, accepted[0]) == (0, 0, 2)


async def test_without_retries_a_lost_answer_is_unavailable_naming_the_url() -> None:
    from leaseq.errors import Unavailable

    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)

    async with serving(hang_up) as (url, _), AsyncClient(url, retry_policy=NO_RETRY) as client:
        with pytest.raises(Unavailable, match=url):
            await client.sweep("s")


async def test_the_environments_proxy_carries_the_request_and_no_proxy_bypasses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As httpx's clients honour HTTP_PROXY and NO_PROXY, so does the default transport."""
    lines: list[bytes] = []

    async def proxy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        line, _, _ = await read_request(reader)
        lines.append(line)
        writer.write(response(200, b"{}"))
        await writer.drain()

    async with serving(proxy) as (proxy_url, _), serving(proxy) as (direct_url, _):
        monkeypatch.setenv("HTTP_PROXY", proxy_url)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        transport = AioHttpTransport()
        try:
            through = await transport.handle_async_request(request("http://leaseq.test"))
            bypassed = await transport.handle_async_request(request(direct_url))
        finally:
            await transport.aclose()
    assert (through.status_code, bypassed.status_code) == (200, 200)
    assert lines == [
        b"POST http://leaseq.test/complete?x=1 HTTP/1.1",
        b"POST /complete?x=1 HTTP/1.1",
    ]
