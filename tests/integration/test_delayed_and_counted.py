"""Delayed leads wait apart from ready ones (``leads.scheduled``), and ``lead_counts`` always
equals the table, however many connections change it at once (revision 0004)."""

from __future__ import annotations

import asyncio
import contextlib
import random

from app.config import Settings
from app.domain.queue import Queue
from app.store import statements
from app.store.pool import Database
from leaseq.errors import Conflict, LeaseLost, NotFound
from leaseq.model import Counts, NewLead
from tests.support import at, leasing_of


async def true_counts(db: Database) -> dict[str, dict[str, int]]:
    rows = await db.rows("SELECT session, status, count(*) AS n FROM leads GROUP BY 1, 2")
    found: dict[str, dict[str, int]] = {}
    for row in rows:
        found.setdefault(row["session"], {})[row["status"]] = int(row["n"])
    return found


async def kept_counts(queue: Queue) -> dict[str, dict[str, int]]:
    every = await queue.stats_all()
    return {
        name: {s: n for s, n in vars_of(counts).items() if n}
        for name, counts in every.sessions.items()
    }


def vars_of(counts: Counts) -> dict[str, int]:
    return {s: getattr(counts, s) for s in ("queued", "leased", "done", "failed", "cached")}


async def test_a_lease_steps_over_no_delayed_lead(queue: Queue, db: Database) -> None:
    for _ in range(2):
        await queue.push("s", [NewLead({}, priority=5, delay_s=60)] * 1000, now=at(0))
    [ready] = (await queue.push("s", [NewLead({"ready": True})], now=at(0))).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", now=at(1))
    assert lease.lead.id == ready
    # The lease read one ready row: the delayed ones are not in leads_ready at all.
    [row] = await db.rows(
        "SELECT count(*) AS n FROM leads WHERE session = 's' AND status = 'queued' "
        "AND NOT scheduled"
    )
    assert row["n"] == 0


async def test_due_leads_lease_by_priority_once_due(queue: Queue) -> None:
    low = (await queue.push("s", [NewLead({"low": 1}, priority=1)], now=at(0))).ids
    high = (await queue.push("s", [NewLead({"h": 1}, priority=9, delay_s=10)], now=at(0))).ids
    late = (await queue.push("s", [NewLead({"l": 1}, priority=9, delay_s=100)], now=at(0))).ids
    assert [
        x.lead.id for x in await leasing_of(queue).lease_next("s", "w", max=3, now=at(5))
    ] == low
    [due] = await leasing_of(queue).lease_next("s", "w", max=3, now=at(11))
    assert due.lead.id == high[0]  # due: leased at once, ahead of nothing else
    assert await leasing_of(queue).lease_next("s", "w", now=at(50)) == []
    assert [x.lead.id for x in await leasing_of(queue).lease_next("s", "w", now=at(101))] == late


async def test_promotion_makes_due_leads_ready(queue: Queue, db: Database) -> None:
    await queue.push("a", [NewLead({}, delay_s=5)] * 3, now=at(0))
    await queue.push("b", [NewLead({}, delay_s=50)] * 2, now=at(0))
    assert await queue.promote(now=at(6)) == 3
    [row] = await db.rows("SELECT count(*) FILTER (WHERE scheduled) AS n FROM leads")
    assert row["n"] == 2
    assert await queue.promote(now=at(6)) == 0


async def test_a_delayed_release_waits_apart_and_comes_back(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", [NewLead({})], now=at(0))).ids
    [held] = await leasing_of(queue).lease_next("s", "w", now=at(1))
    released = await queue.release(lead_id, held.token, delay_s=30, now=at(2))
    assert released.status == "queued"
    assert await leasing_of(queue).lease_next("s", "w", now=at(10)) == []
    [again] = await leasing_of(queue).lease_next("s", "w", now=at(33))
    assert (again.lead.id, again.attempt) == (lead_id, 2)


async def test_counts_follow_every_change_under_concurrency(queue: Queue, db: Database) -> None:
    """Eight connections push, lease, complete, release, cancel, retry, sweep and prune at
    once; the kept counts then equal count(*) of the table."""
    rng = random.Random(7)

    async def worker(w: int) -> None:
        for round_ in range(15):
            session = f"s{rng.randrange(3)}"
            await queue.push(session, [NewLead({"w": w, "r": round_})] * rng.randint(1, 5))
            leases = await leasing_of(queue).lease_next(
                session, f"w{w}", max=3, ttl_s=rng.choice([0.2, 60])
            )
            for lease in leases:
                pick = rng.random()
                with contextlib.suppress(LeaseLost, Conflict, NotFound):  # swept, or pruned
                    if pick < 0.5:
                        await queue.complete(lease.lead.id, lease.token, "done")
                    elif pick < 0.7:
                        delay = rng.choice([0, 0.1])
                        await queue.release(lease.lead.id, lease.token, delay_s=delay)
                    elif pick < 0.8:
                        await queue.cancel(lease.lead.id)
                        await queue.retry(lease.lead.id)
            if round_ % 5 == 4:
                await queue.sweep_all()
                await queue.promote()
                await queue.prune(0.0)
                await queue.fold_counts()

    await asyncio.wait_for(asyncio.gather(*(worker(w) for w in range(8))), 60)
    assert await kept_counts(queue) == await true_counts(db)
    for name, counts in (await true_counts(db)).items():
        assert vars_of(await queue.stats(name)) == {
            s: counts.get(s, 0) for s in ("queued", "leased", "done", "failed", "cached")
        }


async def test_folding_keeps_one_row_per_count_and_none_at_zero(
    queue: Queue, db: Database, database_url: str
) -> None:
    """Counts written by many backends fold into one row each; a pruned session leaves none."""

    async def push_from_a_connection_of_its_own(session: str) -> None:
        async with Database.from_settings(Settings(), database_url, pool_size=1) as other:
            await Queue(other).push(session, [NewLead({})] * 2)

    await asyncio.gather(*(push_from_a_connection_of_its_own("s") for _ in range(6)))
    leases = await leasing_of(queue).lease_next("s", "w", max=3)
    for lease in leases:
        await queue.complete(lease.lead.id, lease.token)
    await queue.push("gone", [NewLead({})])
    [gone] = await leasing_of(queue).lease_next("gone", "w")
    await queue.complete(gone.lead.id, gone.token)
    await queue.prune(0.0, "gone")
    before = await kept_counts(queue)

    await queue.fold_counts()
    assert await kept_counts(queue) == before == await true_counts(db)
    rows = await db.rows("SELECT session, status, slot, n FROM lead_counts ORDER BY 1, 2")
    assert [(r["session"], r["status"], r["slot"], r["n"]) for r in rows] == [
        ("s", "done", 0, 3),
        ("s", "queued", 0, 9),
    ]


async def test_the_dashboard_reads_no_lead_but_the_oldest_per_session(db: Database) -> None:
    oldest = statements.oldest_available(now=None)
    plan = "\n".join(
        r["QUERY PLAN"] for r in await db.rows(f"EXPLAIN {oldest.text}", oldest.params)
    )
    assert "leads_ready_age" in plan and "leads_scheduled_due" in plan, plan
    assert "Seq Scan on leads" not in plan, plan
    plan = "\n".join(
        r["QUERY PLAN"] for r in await db.rows(f"EXPLAIN {statements.stats_all().text}")
    )
    assert " leads " not in plan, plan
