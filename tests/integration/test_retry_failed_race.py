"""``Queue.retry_failed`` racing workers that lease, complete and fail leads of the same session.

Each call requeues every lead that was failed when it began, each exactly once, even when a
lead it requeued is leased and failed again before its last batch; it touches no lead that
is not failed and no other session; the ledger stays a valid history of every lead. Workers
and the replay each have a connection of their own, so the database sees them at once.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from app.domain.queue import Queue
from app.domain.report import report
from app.store.pool import Database
from app.store.schema import EVENTS
from tests.integration.test_concurrency import queues, within_deadline
from tests.support import fetch, leads, leasing_of

SESSION = "dead-letters"
OTHER = "bystander"
WORKERS = 3
ROUNDS = 3
BATCH = 7  # many statements per call, so workers act between them

# What each event requires of the lead's status before it (None: the lead did not exist).
BEFORE = {
    "pushed": {None},
    "leased": {"queued"},
    "completed": {"leased"},
    "released": {"leased"},
    "expired": {"leased"},
    "cancelled": {"queued", "leased"},
    "retried": {"failed"},
    "failed": {"queued"},  # a blocked lead, failed because a lead it waits on failed
}
assert set(BEFORE) == set(EVENTS)


async def retried_per_lead(db: Database) -> Counter[int]:
    rows = await fetch(
        db,
        "SELECT lead_id, count(*) AS n FROM lead_events "
        "WHERE session = %(session)s AND event = 'retried' GROUP BY lead_id",
        session=SESSION,
    )
    return Counter({int(r["lead_id"]): int(r["n"]) for r in rows})


async def failed_now(db: Database) -> set[int]:
    rows = await fetch(
        db, "SELECT id FROM leads WHERE session = %(s)s AND status = 'failed'", s=SESSION
    )
    return {int(r["id"]) for r in rows}


async def work(queue: Queue, name: str, stop: asyncio.Event) -> int:
    """Lease and finish leads until told to stop: even ids fail, odd ones are done."""
    finished = 0
    while not stop.is_set():
        held = await leasing_of(queue).lease_next(SESSION, name, max=5, ttl_s=60)
        for lease in held:
            status: Any = "failed" if lease.lead.id % 2 == 0 else "done"
            await queue.complete(lease.lead.id, lease.token, status)
            finished += 1
        await asyncio.sleep(0 if held else 0.005)
    return finished


async def replay(queue: Queue, db: Database, stop: asyncio.Event) -> list[int]:
    """ROUNDS calls of retry_failed, each checked against the failed leads before it."""
    answers = []
    try:
        for _ in range(ROUNDS):
            before = await retried_per_lead(db)
            failed = await failed_now(db)  # only a retry takes a lead out of failed
            requeued = await queue.retry_failed(SESSION, batch=BATCH)
            after = await retried_per_lead(db)
            delta = after - before
            assert all(n == 1 for n in delta.values()), delta  # none twice in one call
            assert failed <= set(delta), failed - set(delta)  # every one failed before it
            assert sum(delta.values()) == requeued
            answers.append(requeued)
            await asyncio.sleep(0.05)  # let the workers fail some of them again
    finally:
        stop.set()
    return answers


async def test_retry_failed_requeues_each_failed_lead_once_while_workers_run(
    queue: Queue, db: Database, database_url: str
) -> None:
    ids = (await queue.push(SESSION, leads(300, max_attempts=10_000))).ids
    other = (await queue.push(OTHER, leads(10))).ids
    for lease in await leasing_of(queue).lease_next(SESSION, "setup", max=100):
        await queue.complete(lease.lead.id, lease.token, "failed", error="first")
    for lease in await leasing_of(queue).lease_next(OTHER, "setup", max=5):
        await queue.complete(lease.lead.id, lease.token, "failed", error="theirs")

    stop = asyncio.Event()
    async with queues(database_url, WORKERS + 1) as [replayer, *workers]:
        answers, *finished = await within_deadline(
            replay(replayer, db, stop),
            *(work(w, f"w{i}", stop) for i, w in enumerate(workers)),
        )
    assert answers[0] >= 100 and sum(finished) > 0, (answers, finished)

    # The other session is as it was: its failed leads failed, none retried.
    theirs = await fetch(
        db, "SELECT status, count(*) AS n FROM leads WHERE session = %(s)s GROUP BY status", s=OTHER
    )
    assert {r["status"]: r["n"] for r in theirs} == {"failed": 5, "queued": 5}
    assert not await fetch(
        db, "SELECT FROM lead_events WHERE session = %(s)s AND event = 'retried'", s=OTHER
    )
    assert len(other) == 10

    # Every lead's ledger is a valid history that ends in its status now.
    events = await fetch(
        db,
        "SELECT lead_id, event, status FROM lead_events WHERE session = %(s)s ORDER BY id",
        s=SESSION,
    )
    state: dict[int, str | None] = dict.fromkeys(ids)
    for e in events:
        assert state[e["lead_id"]] in BEFORE[e["event"]], (e, state[e["lead_id"]])
        state[e["lead_id"]] = e["status"]
    rows = await fetch(db, "SELECT id, status FROM leads WHERE session = %(s)s", s=SESSION)
    assert {r["id"]: r["status"] for r in rows} == state
    audit = await report(queue, SESSION)
    assert (audit.double_completions, audit.overlapping_leases) == (0, 0)
    assert audit.retried == sum(answers)
