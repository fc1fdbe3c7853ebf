"""Several API processes on one database behave as one service.

Three ``leaseq serve`` processes on one database, the third with
``--workers 2``: leases taken through all of them never overlap, a lease
taken through one is renewed, completed or swept through another, a long poll
held by one is woken by a push through another (NOTIFY goes through
PostgreSQL), and every process reports the same counts. Nothing the service
needs for correctness lives in a process.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.api.test_metrics import samples, value
from tests.serving import Service, Services

pytestmark = pytest.mark.service

QUIET = {"LEASEQ_SWEEP_INTERVAL_S": "3600"}  # the tests sweep by hand


@pytest.fixture
def fleet(services: Services, database_url: str) -> Iterator[list[Service]]:
    """A and B, one process each (A's slow poll off: only a NOTIFY wakes its waiters), and C
    with two worker processes, all on one database."""
    slow_poll = {**QUIET, "LEASEQ_POLL_INTERVAL_S": "60"}
    a = services.start(database_url=database_url, env=slow_poll, ready=False)
    b = services.start(database_url=database_url, env=QUIET, ready=False)
    c = services.start("--workers", "2", database_url=database_url, env=QUIET, ready=False)
    for service in (a, b, c):  # started together, so they boot side by side
        service.wait_ready()
    yield [a, b, c]


def post(service: Service, path: str, body: object) -> httpx.Response:
    # A new connection per request, so those to C spread over its two processes.
    return httpx.post(f"{service.url}{path}", json=body, timeout=30)


def get(service: Service, path: str) -> httpx.Response:
    return httpx.get(f"{service.url}{path}", timeout=30)


def push(service: Service, session: str, n: int) -> list[int]:
    answer = post(service, f"/sessions/{session}/leads", {"leads": [{"payload": {}}] * n})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


def test_leases_through_every_process_never_overlap(fleet: list[Service]) -> None:
    a, b, _ = fleet
    ids = push(a, "s", 60) + push(b, "s", 60)
    seen: list[int] = []
    lock = threading.Lock()

    def worker(n: int) -> None:
        # Lease through one process, renew through the next, complete through the third.
        order = itertools.cycle([fleet[n % 3], fleet[(n + 1) % 3], fleet[(n + 2) % 3]])
        while True:
            got = post(next(order), "/lease", {"session": "s", "owner": f"w{n}", "max": 3}).json()
            if not got["leases"]:
                return
            with lock:
                seen.extend(lease["lead"]["id"] for lease in got["leases"])
            renew = [{"lead_id": g["lead"]["id"], "token": g["token"]} for g in got["leases"]]
            assert all(
                r["ok"]
                for r in post(next(order), "/renew/batch", {"items": renew}).json()["results"]
            )
            done = post(next(order), "/complete/batch", {"items": renew}).json()["results"]
            assert all(r["ok"] for r in done)

    with ThreadPoolExecutor(9) as pool:
        list(pool.map(worker, range(9), timeout=120))

    assert sorted(seen) == sorted(ids)  # every lead leased exactly once, across processes
    for service in fleet:
        assert get(service, "/sessions/s/stats").json()["done"] == len(ids)
        counts = samples(get(service, "/metrics").text)
        assert value(counts, "leaseq_leads", session="s", status="done") == len(ids)
    report = get(b, "/sessions/s/report").json()
    assert report["completions"] == len(ids)
    assert report["double_completions"] == 0 and report["overlapping_leases"] == 0
    # C's two processes count their leases together (prometheus multiprocess mode); with
    # A's and B's they add up to every lease taken.
    leases = sum(value(samples(get(s, "/metrics").text), "leaseq_leases_total") for s in fleet)
    assert leases == len(ids)


def test_a_waiter_on_one_process_wakes_on_a_push_through_another(fleet: list[Service]) -> None:
    a, b, _ = fleet
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(post, a, "/lease", {"session": "s", "owner": "w", "wait_s": 20})
        deadline = time.monotonic() + 10
        while value(samples(get(a, "/metrics").text), "leaseq_long_poll_waiters") < 1:
            assert time.monotonic() < deadline, "the lease request never waited"
            time.sleep(0.02)
        [pushed] = push(b, "s", 1)
        # A's slow poll is 60 s, beyond wait_s: only B's NOTIFY can have woken it.
        [lease] = waiting.result(timeout=15).json()["leases"]
    assert lease["lead"]["id"] == pushed


def test_a_sweep_through_one_process_recovers_a_lease_taken_through_another(
    fleet: list[Service],
) -> None:
    a, b, c = fleet
    [lead] = push(a, "s", 1)
    [lease] = post(c, "/lease", {"session": "s", "owner": "gone", "ttl_s": 1}).json()["leases"]
    time.sleep(1.2)  # the lease runs out on the database clock
    assert post(b, "/sweep", {"session": "s"}).json() == {"requeued": 1, "failed": 0}
    late = post(c, "/complete", {"lead_id": lead, "token": lease["token"]})
    assert late.status_code == 409 and late.json()["code"] == "lease_lost"
    [again] = post(a, "/lease", {"session": "s", "owner": "w"}).json()["leases"]
    assert again["lead"]["id"] == lead and again["attempt"] == 2
    assert post(b, "/complete", {"lead_id": lead, "token": again["token"]}).status_code == 200
    answers = [get(service, "/stats").json() for service in fleet]
    assert answers[0] == answers[1] == answers[2]
    assert answers[0]["total"]["done"] == 1
