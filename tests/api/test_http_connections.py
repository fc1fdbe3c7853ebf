"""``app.api.http_connections`` under uvicorn, on real sockets, with an app that records what it
sees.

What the app is told of a body cut short, and which connection goes first when
the process is full; the bounds against a real ``leaseq serve`` are
tests/api/test_slow_clients.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn

from app.api import http_connections
from tests.support.http_wire import closed_by_peer, connect, head, read_answer
from tests.support.serving import free_port

BODY_TIMEOUT_S = 0.5


class Recorder:
    """An ASGI app that reads each body to its end (or a disconnect), records the messages,
    and answers 200; ``/wait`` first waits for ``release`` (a long poll)."""

    def __init__(self) -> None:
        self.seen: dict[str, list[dict[str, Any]]] = {}
        self.release = threading.Event()

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        messages = []
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request" or not message.get("more_body"):
                break
        self.seen[scope["path"]] = messages
        if scope["path"] == "/wait":
            await asyncio.to_thread(self.release.wait, 10)
        await send(
            {"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]}
        )
        await send({"type": "http.response.body", "body": b"ok"})

    def wait_for(self, path: str) -> list[dict[str, Any]]:
        deadline = time.monotonic() + 10
        while path not in self.seen:
            assert time.monotonic() < deadline, f"the app never saw {path}"
            time.sleep(0.01)
        return self.seen[path]


@pytest.fixture
def recorder(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    monkeypatch.setattr(http_connections, "read_bounds", lambda: (10.0, BODY_TIMEOUT_S))
    monkeypatch.setattr(http_connections, "STALLED_READ_S", 0.1)
    return Recorder()


def serving(app: Recorder, limit: int | None = None) -> Iterator[int]:
    """uvicorn with ``HttpConnection`` in a thread of its own; its port."""
    port = free_port()
    config = uvicorn.Config(
        app,
        host="127.0.0.1",
        port=port,
        http=http_connections.HttpConnection,
        ws="none",
        lifespan="off",
        log_level="warning",
        limit_concurrency=limit,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.01)
    try:
        yield port
    finally:
        app.release.set()
        server.should_exit = True
        thread.join(10)


@pytest.fixture
def port(recorder: Recorder) -> Iterator[int]:
    yield from serving(recorder)


@pytest.fixture
def full_at_4(recorder: Recorder) -> Iterator[int]:
    yield from serving(recorder, limit=4)


def test_a_body_timed_out_reaches_the_app_as_a_disconnect_before_its_end(
    recorder: Recorder, port: int
) -> None:
    with connect(port) as sock:
        # A whole JSON document, but the head promised more: not the body's end.
        sock.sendall(head("POST", "/upload", length=100) + b'{"a": 1}')
        answer = read_answer(sock)
        assert answer.status == 408
        assert answer.problem()["code"] == "unavailable"
        assert closed_by_peer(sock)
    messages = recorder.wait_for("/upload")
    assert messages[-1] == {"type": "http.disconnect"}
    assert all(message.get("more_body") for message in messages[:-1])
    assert b"".join(message.get("body", b"") for message in messages[:-1]) == b'{"a": 1}'


def test_when_full_a_stalled_body_goes_first_then_the_longest_idle_never_a_long_poll(
    recorder: Recorder, full_at_4: int
) -> None:
    port = full_at_4
    long_poll = connect(port)
    long_poll.sendall(head("POST", "/wait", length=2) + b"{}")
    recorder.wait_for("/wait")
    idle = connect(port)  # kept alive after its answer
    idle.sendall(head("GET", "/idle"))
    assert read_answer(idle).status == 200
    stalled = connect(port)
    stalled.sendall(head("POST", "/stalled", length=10) + b"{")
    time.sleep(0.3)  # past STALLED_READ_S
    fresh = [connect(port)]  # the fourth: one has to go
    dropped = read_answer(stalled)
    assert dropped.status == 503 and dropped.headers["retry-after"] == "1"
    assert dropped.problem()["code"] == "unavailable"
    assert closed_by_peer(stalled)
    assert recorder.wait_for("/stalled")[-1] == {"type": "http.disconnect"}
    fresh.append(connect(port))  # full again: the longest idle goes, silently
    assert closed_by_peer(idle)
    fresh.append(connect(port))  # and again: the older of the fresh idle ones
    assert closed_by_peer(fresh[0])
    recorder.release.set()
    assert read_answer(long_poll).status == 200
    for sock in fresh[1:]:
        sock.sendall(head("GET", "/still"))
        assert read_answer(sock).status == 200
    for sock in [long_poll, idle, stalled, *fresh]:
        sock.close()
