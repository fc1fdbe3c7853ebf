"""Idle sockets cannot starve live requests (``app.api.http_connections``), on a real
``leaseq serve``.

2,100 idle connections used to fill uvicorn's connection limit, after which
every live request got 503 at once.
"""

from __future__ import annotations

import concurrent.futures
import socket
from collections.abc import Iterator

import httpx
import pytest

from tests.support.serving import (
    Service,
    Services,
    long_polls_waiting,
    open_files,
    waiting_lease,
)

pytestmark = pytest.mark.service

IDLE = 2000


@pytest.fixture
def many_files() -> Iterator[None]:
    """Room for the idle sockets in this process (and the service it starts, which inherits)."""
    with open_files(IDLE + 1000):
        yield


@pytest.fixture
def service(services: Services, database_url: str, many_files: None) -> Service:
    return services.start("--sweep-interval", "3600", database_url=database_url)


def open_idle(service: Service, n: int) -> list[socket.socket]:
    host, port = service.url.removeprefix("http://").split(":")
    sockets = []
    for _ in range(n):
        sockets.append(socket.create_connection((host, int(port)), timeout=5))
    return sockets


def test_a_live_request_is_answered_past_2000_idle_sockets(service: Service) -> None:
    with httpx.Client(base_url=service.url, timeout=15) as http:
        pushed = http.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
        assert pushed.status_code == 201
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # A long poll in progress: busy, so never closed to make room.
        waiting = waiting_lease(pool, service, "empty", wait_s=4)
        long_polls_waiting(service, 1)
        idle = open_idle(service, IDLE)
        try:
            # The live requests are answered (the client's timeout is their deadline).
            with httpx.Client(base_url=service.url, timeout=15) as http:
                live = http.get("/sessions/s/stats")
                pushed = http.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
            long_poll = waiting.result(timeout=20)
        finally:
            for sock in idle:
                sock.close()
    assert live.status_code == 200, live.text
    assert live.json()["queued"] == 1
    assert pushed.status_code == 201
    assert long_poll.status_code == 200 and long_poll.json() == {"leases": []}
