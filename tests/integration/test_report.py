"""The ledger's audit (app.domain.report): what a healthy history gives, and what a broken one
shows."""

from __future__ import annotations

from dataclasses import asdict

import pytest

from app.domain.queue import Queue
from app.domain.report import OwnerReport, Report, report
from app.store.pool import Database
from leaseq.errors import Conflict, InvalidInput
from leaseq.model import NewLead
from tests.support import T0, at, leasing_of


async def test_a_healthy_history(queue: Queue) -> None:
    [a, b, c] = (await queue.push("s", [NewLead({"i": i}) for i in range(3)], now=T0)).ids
    first = await leasing_of(queue).lease_next("s", "w1", max=3, ttl_s=10, now=at(1))
    by_id = {lease.lead.id: lease for lease in first}
    await queue.complete(a, by_id[a].token, now=at(2))
    await queue.release(b, by_id[b].token, now=at(3))
    await queue.sweep("s", now=at(20))  # c expired at 11
    again = await leasing_of(queue).lease_next("s", "w2", max=2, ttl_s=10, now=at(21))
    for lease in again:
        await queue.complete(lease.lead.id, lease.token, status="cached", now=at(22))
    with pytest.raises(Conflict):  # already cached: refused, nothing written
        await queue.cancel(c, now=at(23))
    assert {lease.lead.id for lease in again} == {b, c}

    found = await report(queue, "s")

    assert found == Report(
        leads=3,
        pushed=3,
        leases=5,
        completed=3,
        completions=3,
        double_completions=0,
        overlapping_leases=0,
        wasted_attempts=2,  # b released, c expired
        expired=1,
        released=1,
        attempts_per_lead={1: 1, 2: 2},  # a once; b and c twice
        owners=[
            OwnerReport("w1", leases=3, completions=1, wasted=2),
            OwnerReport("w2", leases=2, completions=2, wasted=0),
        ],
    )
    assert not found.breached


async def test_an_unknown_session_is_all_zero(queue: Queue) -> None:
    assert await report(queue, "nobody") == Report()
    with pytest.raises(InvalidInput):
        await report(queue, "not a session")


async def _event(
    db: Database,
    lead_id: int,
    event: str,
    attempt: int,
    at_s: float,
    expires_s: float | None = None,
) -> None:
    await db.rows(
        "INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, "
        "expires_at) VALUES "
        "(%(lead_id)s, 'bad', %(event)s, 'x', %(attempt)s, 'w', %(at)s, %(expires)s)",
        {
            "lead_id": lead_id,
            "event": event,
            "attempt": attempt,
            "at": at(at_s),
            "expires": None if expires_s is None else at(expires_s),
        },
    )


async def test_a_broken_history_shows_its_faults(queue: Queue, db: Database) -> None:
    """A ledger written by a queue that broke its promises (rows inserted by hand)."""
    # Lead 1: attempt 2 leased at 5, while attempt 1 was valid until 10.
    await _event(db, 1, "leased", 1, 0, expires_s=10)
    await _event(db, 1, "leased", 2, 5, expires_s=15)
    await _event(db, 1, "expired", 1, 20, expires_s=10)
    # Lead 2: completed twice.
    await _event(db, 2, "leased", 1, 0, expires_s=10)
    await _event(db, 2, "completed", 1, 1)
    await _event(db, 2, "completed", 1, 2)
    # Lead 3: healthy — released, leased again after, completed.
    await _event(db, 3, "leased", 1, 0, expires_s=10)
    await _event(db, 3, "released", 1, 1)
    await _event(db, 3, "leased", 2, 2, expires_s=12)
    await _event(db, 3, "completed", 2, 3)
    # Lead 4: leased again with no end of the first lease recorded at all.
    await _event(db, 4, "leased", 1, 0, expires_s=10)
    await _event(db, 4, "leased", 2, 30, expires_s=40)

    found = await report(queue, "bad")

    assert asdict(found) == asdict(
        Report(
            leads=4,
            leases=7,
            completed=2,
            completions=3,
            double_completions=1,
            overlapping_leases=2,
            wasted_attempts=2,  # lead 1's expired first lease, lead 3's released one
            expired=1,
            released=1,
            attempts_per_lead={1: 1, 2: 3},
            owners=[OwnerReport("w", leases=7, completions=3, wasted=2)],
        )
    )
    assert found.breached


async def test_a_dead_letter_replay_is_not_a_double_completion(queue: Queue) -> None:
    """Failed, retried by an operator, completed again: docs/contract.md#invariant-4 allows it."""
    [lead] = (await queue.push("s", [NewLead({})], now=T0)).ids
    [first] = await leasing_of(queue).lease_next("s", "w1", ttl_s=10, now=at(1))
    await queue.complete(lead, first.token, status="failed", error="boom", now=at(2))
    await queue.retry(lead, now=at(3))
    [second] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(4))
    await queue.complete(lead, second.token, now=at(5))

    found = await report(queue, "s")

    assert (found.completed, found.completions, found.double_completions) == (1, 2, 0)
    assert (found.retried, found.overlapping_leases, found.wasted_attempts) == (1, 0, 0)
