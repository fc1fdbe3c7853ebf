"""The clients' conformance set (docs/clients/conformance.md), for every language's worker.

Each scenario runs against a fresh database and a fresh ``leaseq serve``, with the
language's own ``Worker`` at its defaults (its conformance program), and checks what the
ledger and the events say: every lead done exactly once, no lease overlapping another, a
handler stopped before its lease could end, one answer per key, nothing lost to a
``kill -9``, a bounded request rate through an outage, and leads given back on SIGTERM.
Waits are polls whose deadline is their only failure.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from datetime import datetime
from typing import Any

import httpx
import psycopg
import pytest

from app.store.pool import libpq_url
from tests.clients.harness import Fleet, proxied
from tests.support.lossy_proxy import Exchange, FirstOf, unavailable
from tests.support.serving import Service, until

# Minutes, not seconds: CI runs them (--run-slow), and so does `-m slow`.
pytestmark = [pytest.mark.service, pytest.mark.slow]

SESSION = "conformance"
DRAIN_S = 120.0  # the deadline of a drain: its only failure
OUTAGE_S = 10.0
MAX_OUTAGE_RATE = 5.0  # requests a second per worker process while every answer is a 503


def push(service: Service, leads: list[dict[str, Any]]) -> list[int]:
    answer = httpx.post(
        f"{service.url}/sessions/{SESSION}/leads", json={"leads": leads}, timeout=30
    )
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


def stats(service: Service) -> dict[str, Any]:
    answer = httpx.get(f"{service.url}/sessions/{SESSION}/stats", timeout=10)
    assert answer.status_code == 200, answer.text
    counts: dict[str, Any] = answer.json()
    return counts


def report(service: Service) -> dict[str, Any]:
    answer = httpx.get(f"{service.url}/sessions/{SESSION}/report", timeout=30)
    assert answer.status_code == 200, answer.text
    audit: dict[str, Any] = answer.json()
    return audit


def done(service: Service, n: int) -> None:
    """Until the session's stats show ``n`` leads done."""
    until(lambda: stats(service)["done"] == n, DRAIN_S, f"{n} leads done")


def rows(database_url: str, query: str, *params: Any) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(database_url)) as conn:
        return conn.execute(query, params).fetchall()


def ledger(database_url: str, lead_id: int) -> list[tuple[str, str | None, datetime]]:
    """One lead's ledger: each event, its owner and time (the database's clock)."""
    found = rows(
        database_url,
        "SELECT event, owner, at FROM lead_events WHERE lead_id = %s ORDER BY id",
        lead_id,
    )
    return [(event, owner, at) for event, owner, at in found]


def once_each(service: Service, fleet: Fleet, ids: list[int]) -> None:
    """Every lead done exactly once: by the ledger's audit and by the workers' events."""
    audit = report(service)
    assert audit["double_completions"] == 0, audit
    assert audit["overlapping_leases"] == 0, audit
    assert audit["completed"] == len(ids), audit
    finished = Counter(event["lead"] for event in fleet.events("finished"))
    assert sorted(finished) == sorted(ids)


def ms(at: datetime) -> float:
    return at.timestamp() * 1000


def test_drain(language: str, fleet: Fleet, service: Service, database_url: str) -> None:
    """300 leads, 3 worker processes of 4 slots: each lead done once, with this language's
    result, and every worker exits 0 on SIGTERM."""
    ids = push(service, [{"payload": {"i": i}} for i in range(300)])
    for _ in range(3):
        fleet.start(service.url, SESSION, concurrency=4)
    done(service, len(ids))
    assert fleet.stop_all() == [0, 0, 0]
    once_each(service, fleet, ids)
    assert Counter(e["lead"] for e in fleet.events("finished")).most_common(1)[0][1] == 1
    results = rows(database_url, "SELECT id, status, result FROM leads WHERE session = %s", SESSION)
    assert {(i, s, r["by"]) for i, s, r in results} == {(i, "done", language) for i in ids}
    assert all(r["lead"] == i for i, _, r in results)
    assert len(fleet.events("stopped")) == 3


def test_stalled_heartbeat(fleet: Fleet, service: Service, database_url: str) -> None:
    """Renewals held unanswered: the handler is aborted before its lease ends on the
    service; the lead is leased again once it has, and a healthy worker finishes it."""
    holding = threading.Event()

    async def hold_renewals(method: str, path: str) -> bytes | None:
        if holding.is_set() and path.startswith("/renew"):
            await asyncio.Event().wait()  # never answered: the proxy closes it at the end
        return None

    [lead] = push(service, [{"payload": {"ms": 12_000}}])  # three times the ttl
    with proxied(service.port, intercept=hold_renewals) as proxy:
        stalled = fleet.start(proxy.url, SESSION, concurrency=1, ttl_s=4)
        [start] = until(lambda: stalled.events("start"), 30, "the lead to start")

        def renewed() -> bool:  # a third of the ttl apart: past the first lease's end
            seen = list(proxy.proxy.seen)
            return sum(e.path.startswith("/renew") and e.status == 200 for e in seen) >= 4

        until(renewed, 30, "four renewals answered")
        holding.set()
        [aborted] = until(lambda: stalled.events("aborted"), 30, "the handler to be aborted")
        [(status, expires_at)] = rows(
            database_url, "SELECT status, lease_expires_at FROM leads WHERE id = %s", lead
        )
        stalled.terminate()
        assert stalled.wait() == 0
    assert aborted["lead"] == lead
    assert aborted["t"] - start["t"] > 4000  # renewals kept it past its first lease's ttl
    # Aborted while its lease was still valid: no renewal got through since the hold, so
    # the row's expiry is the lease's end.
    assert status == "leased"
    assert aborted["t"] < ms(expires_at)
    healthy = fleet.start(service.url, SESSION, concurrency=1, ttl_s=30)
    done(service, 1)
    assert fleet.stop_all() == [0, 0]
    events = ledger(database_url, lead)
    leases = [(owner, at) for event, owner, at in events if event == "leased"]
    assert len(leases) >= 2
    assert all(ms(at) > aborted["t"] for _, at in leases[1:])  # only after the abort
    assert [owner for event, owner, _ in events if event == "completed"] == [healthy.owner]
    assert [e["owner"] for e in fleet.events("finished")] == [healthy.owner]
    assert report(service)["overlapping_leases"] == 0


def completion_with_next(exchange: Exchange) -> bool:
    return exchange.path.startswith("/complete") and b'"next"' in exchange.request


def test_one_key_one_answer(fleet: Fleet, service: Service) -> None:
    """The first answer of a completion with ``next`` is lost: the retry repeats its
    ``Idempotency-Key`` and gets the same leases, so none is stranded."""
    ids = push(service, [{"payload": {"i": i}} for i in range(40)])
    drop = FirstOf(completion=completion_with_next)
    with proxied(service.port, drop) as proxy:
        fleet.start(proxy.url, SESSION, concurrency=2, ttl_s=30)
        done(service, len(ids))
        assert fleet.stop_all() == [0]
        seen = list(proxy.proxy.seen)
        [dropped] = proxy.proxy.dropped
    key = dropped.header("Idempotency-Key")
    assert key
    repeats = [e for e in seen if e.header("Idempotency-Key") == key]
    assert len(repeats) >= 2 and repeats[0] is dropped
    assert {e.request for e in repeats} == {dropped.request}
    assert {e.status for e in repeats} == {200}
    leased = [
        [(x["lead"]["id"], x["token"]) for x in json.loads(e.answer)["leases"]] for e in repeats
    ]
    assert leased[0] and all(each == leased[0] for each in leased)
    audit = report(service)
    assert audit["expired"] == 0 and audit["wasted_attempts"] == 0, audit
    once_each(service, fleet, ids)


def test_kill_9(fleet: Fleet, service: Service, database_url: str) -> None:
    """A worker killed with SIGKILL mid-lead: its leads come back once their leases end,
    and the others finish everything; nothing is lost or done twice."""
    ids = push(service, [{"payload": {"i": i}} for i in range(60)])
    victim = fleet.start(service.url, SESSION, concurrency=2, ttl_s=3, handler_ms=400)

    def mid_lead() -> bool:
        started = {e["lead"] for e in victim.events("start")}
        return bool(started - {e["lead"] for e in victim.events("finished")})

    until(mid_lead, 30, "the victim to be mid-lead")
    victim.kill()
    held = [
        lead
        for (lead,) in rows(
            database_url,
            "SELECT id FROM leads WHERE session = %s AND status = 'leased' AND owner = %s",
            SESSION,
            victim.owner,
        )
    ]
    assert held
    for _ in range(2):
        fleet.start(service.url, SESSION, concurrency=2, ttl_s=3, handler_ms=20)
    done(service, len(ids))
    assert fleet.stop_all()[1:] == [0, 0]
    audit = report(service)
    assert audit["double_completions"] == 0 and audit["overlapping_leases"] == 0, audit
    assert audit["completed"] == len(ids)
    for lead in held:
        events = [event for event, _, _ in ledger(database_url, lead)]
        assert events[-1] == "completed" and "expired" in events, events


def test_outage(fleet: Fleet, service: Service) -> None:
    """Every answer a 503 (``Retry-After: 1``) for 10 s: the worker's requests stay a few a
    second, and it drains the rest afterwards without a restart."""
    outage = Outage()
    ids = push(service, [{"payload": {"i": i}} for i in range(200)])
    with proxied(service.port, intercept=outage) as proxy:
        worker = fleet.start(proxy.url, SESSION, concurrency=2, ttl_s=30, handler_ms=20)
        until(lambda: stats(service)["done"] >= 20, 60, "the worker to be working")
        outage.start(OUTAGE_S)
        until(outage.over, OUTAGE_S + 30, "the outage to end")
        assert worker.running()
        done(service, len(ids))
        assert fleet.stop_all() == [0]
    rate = len(outage.requests) / OUTAGE_S
    assert outage.requests, "no request reached the proxy during the outage"
    assert rate <= MAX_OUTAGE_RATE, (rate, Counter(path for _, path in outage.requests))
    once_each(service, fleet, ids)


class Outage:
    """Answers every request with a 503 while it lasts, and counts them."""

    def __init__(self) -> None:
        self.until = 0.0
        self.requests: list[tuple[float, str]] = []

    def start(self, seconds: float) -> None:
        self.until = time.monotonic() + seconds

    def over(self) -> bool:
        return time.monotonic() >= self.until

    async def __call__(self, method: str, path: str) -> bytes | None:
        if self.over():
            return None
        self.requests.append((time.monotonic(), path))
        return unavailable(retry_after_s=1)


def test_sigterm_gives_back(fleet: Fleet, service: Service, database_url: str) -> None:
    """SIGTERM to a worker holding long leads: within its grace it stops them and releases
    them, so they are queued again at once, not after their ttl; it exits 0."""
    ids = push(service, [{"payload": {"ms": 600_000}} for _ in range(4)])
    worker = fleet.start(service.url, SESSION, concurrency=4, ttl_s=300, grace_s=1)
    until(lambda: len(worker.events("start")) == 4, 30, "4 leads to start")
    worker.terminate()
    assert worker.wait() == 0
    counts = stats(service)
    assert (counts["queued"], counts["leased"]) == (4, 0), counts
    assert sorted(e["lead"] for e in worker.events("aborted")) == sorted(ids)
    assert worker.events("stopped")
    released = rows(
        database_url,
        "SELECT lead_id FROM lead_events WHERE session = %s AND event = 'released'",
        SESSION,
    )
    assert sorted(lead for (lead,) in released) == sorted(ids)
