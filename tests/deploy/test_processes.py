"""Several API processes on one database behave as one service.

Three ``leaseq serve`` processes on one database, the third with
``--workers 2``: leases taken through all of them never overlap, a lease
taken through one is renewed, completed or swept through another, a long poll
held by one is woken by a push through another (NOTIFY goes through
PostgreSQL), every process reports the same counts, and a session's cap
holds across all of them. Nothing the service needs for correctness lives in
a process.
"""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import psycopg
import pytest

from app.store.pool import libpq_url
from tests.support.scrapes import samples, value
from tests.support.serving import Service, Services

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


def test_sixteen_leasers_through_every_process_never_exceed_a_cap(
    fleet: list[Service], database_url: str
) -> None:
    """A session capped at 5, leased by 16 threads through three processes (four uvicorn
    workers), alone and across sessions: a sampler of the database and the ledger both say
    it never held more than 5."""
    a, _, _ = fleet
    cap = 5
    push(a, "capped", 120)
    push(a, "free", 120)
    put = httpx.put(f"{a.url}/sessions/capped/settings", json={"max_leased": cap}, timeout=30)
    assert put.status_code == 200, put.text
    stop = threading.Event()
    sampled: list[int] = []

    def sampler() -> None:
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            while not stop.is_set():
                [(n,)] = conn.execute(
                    "SELECT count(*) FROM leads WHERE session = 'capped' AND status = 'leased'"
                ).fetchall()
                sampled.append(int(n))

    def leaser(n: int) -> list[str]:
        order = itertools.cycle([fleet[n % 3], fleet[(n + 1) % 3], fleet[(n + 2) % 3]])
        scope = {"session": "capped"} if n % 2 else {"sessions": ["capped", "free"]}
        sessions = []
        while True:
            body = {"owner": f"w{n}", "max": 1 + n % 3, "ttl_s": 60, **scope}
            got = post(next(order), "/lease", body).json()["leases"]
            if not got:
                left = get(a, "/stats").json()["sessions"]
                if all(left[s]["pending"] == 0 for s in ("capped", "free")):
                    return sessions
                time.sleep(0.005)  # held back by the cap: skipped, so try again
                continue
            time.sleep(0.005)  # the work
            items = [{"lead_id": g["lead"]["id"], "token": g["token"]} for g in got]
            done = post(next(order), "/complete/batch", {"items": items}).json()["results"]
            assert all(r["ok"] for r in done)
            sessions += [g["lead"]["session"] for g in got]

    watching = threading.Thread(target=sampler)
    watching.start()
    try:
        with ThreadPoolExecutor(16) as pool:
            taken = list(pool.map(leaser, range(16), timeout=180))
    finally:
        stop.set()
        watching.join(30)
    leased = [session for mine in taken for session in mine]
    assert leased.count("capped") == 120 and leased.count("free") == 120
    assert max(sampled) <= cap, max(sampled)
    assert cap in sampled  # it was reached, not only respected

    # The ledger, in the order of the database clock: a lease after the lock, an end at its
    # statement's start; at one instant, ends first.
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT at, CASE event WHEN 'leased' THEN 1 ELSE -1 END FROM lead_events "
            "WHERE session = 'capped' AND event IN ('leased', 'completed') ORDER BY at, 2"
        ).fetchall()
    running = most = 0
    for _, change in rows:
        running += change
        most = max(most, running)
    assert running == 0 and most <= cap, most
    report = get(a, "/sessions/capped/report").json()
    assert report["double_completions"] == 0 and report["overlapping_leases"] == 0
