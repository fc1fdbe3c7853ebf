"""A TCP proxy in front of PostgreSQL that a test cuts and restores: an outage on demand."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from sqlalchemy.engine import make_url


class Proxy:
    """Forwards 127.0.0.1:<port> to the target; ``stop`` cuts every connection, refuses new ones."""

    def __init__(self, target_host: str, target_port: int) -> None:
        """A host starting with / is a Unix socket folder (the embedded PostgreSQL's)."""
        self.target = (target_host, target_port)
        self.port = 0
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._writers: set[asyncio.StreamWriter] = set()

    async def start(self) -> None:
        """Listen (again, on the same port once it has one)."""
        self._server = await asyncio.start_server(self._accept, "127.0.0.1", self.port)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Refuse new connections and cut the open ones."""
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for writer in list(self._writers):
            await _close(writer)
        self._writers.clear()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self._writers.add(writer)
        upstream_writer: asyncio.StreamWriter | None = None
        try:
            host, port = self.target
            if host.startswith("/"):
                upstream_reader, upstream_writer = await asyncio.open_unix_connection(
                    f"{host}/.s.PGSQL.{port}"
                )
            else:
                upstream_reader, upstream_writer = await asyncio.open_connection(host, port)
            self._writers.add(upstream_writer)
            await asyncio.gather(_pipe(reader, upstream_writer), _pipe(upstream_reader, writer))
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for each in (writer, upstream_writer):
                if each is not None:
                    await _close(each)
                    self._writers.discard(each)
            self._tasks.discard(task)


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    finally:
        await _close(writer)


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(OSError, asyncio.CancelledError):
        await writer.wait_closed()


@asynccontextmanager
async def proxied(database_url: str) -> AsyncIterator[tuple[Proxy, str]]:
    """A running proxy in front of ``database_url``'s server, and the URL through it."""
    url = make_url(database_url)
    socket_folder = url.query.get("host")  # the embedded PostgreSQL listens on a Unix socket
    host = socket_folder if isinstance(socket_folder, str) else (url.host or "127.0.0.1")
    port = url.port or int(str(url.query.get("port", 5432)))  # a socket's port: in the query
    proxy = Proxy(host, port)
    await proxy.start()
    through = (
        url.difference_update_query(["host", "port"])  # the embedded server's socket folder
        .set(host="127.0.0.1", port=proxy.port)
        .render_as_string(hide_password=False)
    )
    try:
        yield proxy, through
    finally:
        await proxy.stop()
