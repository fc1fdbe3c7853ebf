"""The lead_events ledger: one row per transition, written with it; none when switched off."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.errors import Conflict, LeaseLost
from leaseq.model import CompleteItem, NewLead, RenewItem
from tests.support import T0, at, events, fetch, leads, leasing_of


def _event(
    event: str,
    status: str,
    attempt: int,
    owner: str | None,
    when: datetime,
    expires_at: datetime | None = None,
) -> dict[str, Any]:
    return {
        "event": event,
        "status": status,
        "attempt": attempt,
        "owner": owner,
        "at": when,
        "expires_at": expires_at,
    }


async def _history(db: Database, lead_id: int) -> list[dict[str, Any]]:
    rows = await events(db, lead_id)
    for found in rows:
        assert found.pop("lead_id") == lead_id
        assert found.pop("session") == "s"
    return rows


async def test_every_transition_writes_its_event(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", leads(1, max_attempts=3), now=T0)).ids
    [first] = await leasing_of(queue).lease_next("s", "w1", ttl_s=10, now=at(1))
    await queue.renew(lead_id, first.token, 20, now=at(2))  # not a transition: no event
    await queue.release(lead_id, first.token, now=at(3))
    [second] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(4))
    await queue.sweep("s", now=at(14))
    [third] = await leasing_of(queue).lease_next("s", "w3", ttl_s=10, now=at(15))
    await queue.complete(lead_id, third.token, "done", {"ok": True}, now=at(16))

    assert await _history(queue.db, lead_id) == [
        _event("pushed", "queued", 0, None, T0),
        _event("leased", "leased", 1, "w1", at(1), at(11)),
        _event("released", "queued", 1, "w1", at(3)),
        _event("leased", "leased", 2, "w2", at(4), at(14)),
        _event("expired", "queued", 2, "w2", at(14), at(14)),
        _event("leased", "leased", 3, "w3", at(15), at(25)),
        _event("completed", "done", 3, "w3", at(16)),
    ]
    assert second.attempt == 2


async def test_cancel_retry_and_failure_by_sweep_write_their_events(queue: Queue) -> None:
    [cancelled, dead] = (await queue.push("s", leads(2, max_attempts=1), now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=at(1))
    assert lease.lead.id == cancelled
    await queue.cancel(cancelled, now=at(2))
    await queue.retry(cancelled, now=at(3))
    [dead_lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=at(1))
    assert dead_lease.lead.id == dead
    await queue.sweep_all(now=at(11))

    assert await _history(queue.db, cancelled) == [
        _event("pushed", "queued", 0, None, T0),
        _event("leased", "leased", 1, "w", at(1), at(11)),
        _event("cancelled", "failed", 1, "w", at(2)),
        _event("retried", "queued", 1, "w", at(3)),
    ]
    assert await _history(queue.db, dead) == [
        _event("pushed", "queued", 0, None, T0),
        _event("leased", "leased", 1, "w", at(1), at(11)),
        _event("expired", "failed", 1, "w", at(11), at(11)),
    ]


@pytest.mark.parametrize("status", ["done", "failed", "cached"])
async def test_completed_event_carries_the_final_status(queue: Queue, status: str) -> None:
    await queue.push("s", leads(2), now=T0)
    a, b = await leasing_of(queue).lease_next("s", "w", max=2, now=T0)
    await queue.complete(a.lead.id, a.token, status, now=at(1))
    await queue.complete_many([CompleteItem(b.lead.id, b.token, status)], now=at(1))
    for lease in (a, b):
        assert (await _history(queue.db, lease.lead.id))[-1] == _event(
            "completed", status, 1, "w", at(1)
        )


async def test_refused_operations_write_nothing(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", [NewLead({}, key="k")], now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    await queue.complete(lead_id, lease.token, now=at(1))
    before = await events(queue.db)

    await queue.push("s", [NewLead({}, key="k")], now=at(2))  # a duplicate is not pushed
    for refused in (
        queue.renew(lead_id, lease.token, now=at(2)),
        queue.complete(lead_id, lease.token, "cached", now=at(2)),
        queue.release(lead_id, lease.token, now=at(2)),
        queue.cancel(lead_id, now=at(2)),
        queue.retry(lead_id, now=at(2)),
    ):
        with pytest.raises((LeaseLost, Conflict)):
            await refused
    await queue.renew_many([RenewItem(lead_id, lease.token)], now=at(2))
    await queue.complete_many([CompleteItem(lead_id, lease.token)], now=at(2))
    await queue.complete(lead_id, lease.token, now=at(2))  # a retried completion: answered again
    await queue.sweep_all(now=at(100))
    assert await leasing_of(queue).lease_next("s", "w", now=at(100)) == []

    assert await events(queue.db) == before


async def test_batches_write_one_event_per_lead(queue: Queue) -> None:
    pushed = await queue.push("s", leads(50), now=T0)
    leased = await leasing_of(queue).lease_next("s", "w", max=50, ttl_s=10, now=at(1))
    await queue.complete_many([CompleteItem(x.lead.id, x.token) for x in leased[:20]], now=at(2))
    await queue.sweep("s", now=at(11))
    rows = await fetch(
        queue.db, "SELECT event, count(*) AS n FROM lead_events GROUP BY event ORDER BY event"
    )
    assert {r["event"]: r["n"] for r in rows} == {
        "pushed": 50,
        "leased": 50,
        "completed": 20,
        "expired": 30,
    }
    pushed_rows = await fetch(
        queue.db, "SELECT lead_id FROM lead_events WHERE event = 'pushed' ORDER BY id"
    )
    assert [r["lead_id"] for r in pushed_rows] == pushed.ids


async def test_ledger_off_writes_no_events(db: Database) -> None:
    queue = Queue(db, ledger=False)
    ids = (await queue.push("s", leads(4, max_attempts=2), now=T0)).ids
    a, b, c = await leasing_of(queue).lease_next("s", "w", max=3, ttl_s=10, now=T0)
    await queue.renew(a.lead.id, a.token, 10, now=at(1))
    await queue.complete(a.lead.id, a.token, now=at(2))
    await queue.complete_many([CompleteItem(b.lead.id, b.token, "cached")], now=at(2))
    await queue.release(c.lead.id, c.token, now=at(2))
    [d] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=at(3))
    assert (await queue.sweep("s", now=at(13))).failed == 1
    await queue.retry(d.lead.id, now=at(14))
    await queue.cancel(ids[3], now=at(14))
    await queue.sweep_all(now=at(15))

    # Every transition happened ...
    statuses = {lead_id: (await queue.get(lead_id)).status for lead_id in ids}
    assert sorted(statuses.values()) == ["cached", "done", "failed", "queued"]
    # ... and the ledger stayed empty.
    assert await events(queue.db) == []
