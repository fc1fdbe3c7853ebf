"""Slow and hostile clients cannot hold a real ``leaseq serve`` (``app.api.http_connections``).

2,100 connections that sent a head and then trickled their bodies once held
every live request at 503 for as long as they trickled, and a 1 MiB head was
read whole: the head limit reached h11 only, and the service runs on httptools.
"""

from __future__ import annotations

import concurrent.futures
import selectors
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from app.config import MAX_HEAD_BYTES
from tests.support.http_wire import (
    closed_by_peer,
    connect,
    head,
    padded_head,
    read_answer,
    trickle_until_answered,
)
from tests.support.serving import (
    Service,
    Services,
    long_polls_waiting,
    open_files,
    waiting_lease,
)

pytestmark = pytest.mark.service

# The module's shared `service` (tests/conftest.py): bounds small enough to wait out.
SERVE_ENV = {"LEASEQ_HEAD_TIMEOUT_S": "1", "LEASEQ_BODY_TIMEOUT_S": "1"}

TRICKLERS = 2000
# Each a POST /lease and a GET /healthz on a connection of its own, kept open (idle) after:
# so each needs a place, and takes a trickling one's.
LIVE_ROUNDS = 20


# -- the head's size ----------------------------------------------------------


def test_a_head_of_the_limit_is_served(service: Service) -> None:
    with connect(service.port) as sock:
        sock.sendall(padded_head(MAX_HEAD_BYTES))
        assert read_answer(sock).status == 200


@pytest.mark.parametrize("size", [MAX_HEAD_BYTES + 1, 1024 * 1024], ids=["limit+1", "1MiB"])
def test_a_head_over_the_limit_answers_431_and_closes(service: Service, size: int) -> None:
    with connect(service.port) as sock:
        sock.sendall(padded_head(size))
        answer = read_answer(sock)
        assert answer.status == 431
        problem = answer.problem()
        assert problem["code"] == "payload_too_large"
        assert str(MAX_HEAD_BYTES) in problem["detail"]
        assert closed_by_peer(sock)
    assert httpx.get(f"{service.url}/healthz").status_code == 200


# -- the time to read a head and a body ---------------------------------------


def timed_out(sock: socket.socket, byte: bytes, detail: str) -> None:
    """Sending ``byte`` after ``byte`` gets 408 ``unavailable`` saying ``detail``, then a close."""
    answer = trickle_until_answered(sock, byte)
    assert answer.status == 408
    problem = answer.problem()
    assert (problem["code"], problem["detail"]) == ("unavailable", detail)
    assert closed_by_peer(sock)


@pytest.mark.parametrize("kept_alive", [False, True], ids=["fresh", "kept-alive"])
def test_a_head_arriving_too_slowly_answers_408_and_closes(
    service: Service, kept_alive: bool
) -> None:
    with connect(service.port) as sock:
        if kept_alive:  # the clock of the next head starts after this answer
            sock.sendall(head("GET", "/healthz"))
            assert read_answer(sock).status == 200
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        timed_out(sock, b"s", "the request head did not arrive within 1 s")


def test_a_body_arriving_too_slowly_answers_408_and_closes_but_a_long_poll_is_kept(
    service: Service,
) -> None:
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # Its body complete, a long poll waiting for work longer than the body timeout.
        waiting = waiting_lease(pool, service, "slow-body-idle", wait_s=2)
        with connect(service.port) as sock:
            sock.sendall(head("POST", "/sessions/slow-body/leads", length=1000) + b'{"leads": [')
            timed_out(sock, b" ", "the request body did not arrive within 1 s")
        long_poll = waiting.result(timeout=20)
    assert long_poll.status_code == 200 and long_poll.json() == {"leases": []}
    stats = httpx.get(f"{service.url}/sessions/slow-body/stats").json()
    assert stats["queued"] == 0


def test_a_whole_lease_whose_body_then_stalls_is_not_carried_out(service: Service) -> None:
    """A body that is already a whole lease request, promised longer and then trickled: the
    timeout ends it cut short, and the front door runs nothing (no lead leased, no attempt)."""
    pushed = httpx.post(
        f"{service.url}/sessions/slow-lease/leads", json={"leads": [{"payload": {}}]}
    )
    assert pushed.status_code == 201
    whole = b'{"session": "slow-lease", "owner": "stalled"}'
    with connect(service.port) as sock:
        sock.sendall(head("POST", "/lease", length=len(whole) + 100) + whole)
        timed_out(sock, b" ", "the request body did not arrive within 1 s")
    stats = httpx.get(f"{service.url}/sessions/slow-lease/stats").json()
    assert (stats["queued"], stats["leased"]) == (1, 0)
    lead = httpx.get(f"{service.url}/leads/{pushed.json()['ids'][0]}").json()
    assert (lead["status"], lead["attempts"], lead["owner"]) == ("queued", 0, None)


# -- thousands of trickling connections ---------------------------------------


class Tricklers:
    """Connections that sent a head and send their body a byte at a time (in a thread of
    their own, until ``stop``), and what the service sent each before it closed it."""

    def __init__(self, service: Service, n: int) -> None:
        self.selector = selectors.DefaultSelector()
        self.open: set[socket.socket] = set()
        self.closed: dict[socket.socket, bytes] = {}
        self.received: dict[socket.socket, bytes] = {}
        request = head("POST", "/lease", length=100_000) + b"{"
        for _ in range(n):
            sock = connect(service.port)
            sock.sendall(request)
            sock.setblocking(False)
            self.selector.register(sock, selectors.EVENT_READ)
            self.open.add(sock)
            self.received[sock] = b""
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self) -> None:
        while not self.stopping.wait(0.2):
            for key, _ in self.selector.select(0):
                sock = key.fileobj
                assert isinstance(sock, socket.socket)
                try:
                    data = sock.recv(65536)
                except BlockingIOError:
                    continue
                except ConnectionResetError:
                    data = b""
                if data:
                    self.received[sock] += data
                else:
                    self._close(sock)
            for sock in list(self.open):
                try:
                    sock.send(b" ")
                except BlockingIOError:
                    pass
                except OSError:  # reset or a broken pipe: the service closed it
                    self._close(sock)

    def _close(self, sock: socket.socket) -> None:
        if sock in self.open:
            self.selector.unregister(sock)
            self.open.discard(sock)
            self.closed[sock] = self.received[sock]

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join(timeout=10)
        for sock in [*self.open, *self.closed]:
            sock.close()
        self.selector.close()


@pytest.fixture
def roomy_service(services: Services, database_url: str) -> Iterator[Service]:
    """A service with room for the tricklers' files (it inherits this process's limit)."""
    wanted = TRICKLERS + 1000
    with open_files(wanted):
        started = services.start("--sweep-interval", "3600", database_url=database_url)
        assert started.open_file_limit() >= wanted
        yield started


def test_live_requests_are_answered_while_2000_connections_trickle_their_bodies(
    roomy_service: Service,
) -> None:
    url = roomy_service.url
    pushed = httpx.post(
        f"{url}/sessions/s/leads",
        json={"leads": [{"payload": {"i": i}} for i in range(LIVE_ROUNDS)]},
    )
    assert pushed.status_code == 201
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # A long poll in progress (its body complete, waiting for work): never dropped.
        waiting = waiting_lease(pool, roomy_service, "later", wait_s=30)
        long_polls_waiting(roomy_service, 1)
        tricklers = Tricklers(roomy_service, TRICKLERS)
        clients: list[httpx.Client] = []
        try:
            live = []
            for _ in range(LIVE_ROUNDS):
                clients.append(http := httpx.Client(base_url=url, timeout=15))
                live.append(http.post("/lease", json={"session": "s", "owner": "w"}))
                live.append(http.get("/healthz"))
            woken = httpx.post(f"{url}/sessions/later/leads", json={"leads": [{"payload": {}}]})
            long_poll = waiting.result(timeout=60)
            again = [http.get("/healthz") for http in clients]  # the idle ones were kept
            deadline = time.monotonic() + 20
            while len(tricklers.closed) < LIVE_ROUNDS and time.monotonic() < deadline:
                time.sleep(0.05)
            still_open = len(tricklers.open)
            dropped = dict(tricklers.closed)
        finally:
            tricklers.stop()
            for http in clients:
                http.close()
    assert [answer.status_code for answer in live] == [200] * len(live), [
        answer.text for answer in live if answer.status_code != 200
    ]
    assert all(len(answer.json()["leases"]) == 1 for answer in live[::2])
    assert [answer.status_code for answer in again] == [200] * LIVE_ROUNDS
    assert woken.status_code == 201
    assert long_poll.status_code == 200
    [held] = long_poll.json()["leases"]
    assert held["lead"]["id"] == woken.json()["ids"][0]
    # Each live connection took the place of a trickling one, which was closed.
    assert len(dropped) >= LIVE_ROUNDS
    assert still_open > 0
    for received in dropped.values():  # a 503 when it could be read before the close
        assert received == b"" or received.startswith(b"HTTP/1.1 503 "), received[:200]
        assert received == b"" or b'"code":"unavailable"' in received
