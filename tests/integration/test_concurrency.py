"""Many connections at once: every lead handed out exactly once, no deadlock, no double verdict.

Each worker has a pool of its own (one connection), so the database sees
truly concurrent sessions. Every test has a hard timeout, so a hang fails.
"""

from __future__ import annotations

import asyncio
import random
import threading
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta
from typing import Any, TypeVar

import psycopg
import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database, libpq_url
from leaseq.model import CompleteItem, Counts, NewLead, RenewItem, SweepResult
from tests.support import T0, TICK, at, fetch, leads, leasing_of

WORKERS = 16
LEADS = 2000
DEADLINE_S = 60.0

ZERO = timedelta(0)

T = TypeVar("T")


@asynccontextmanager
async def queues(database_url: str, n: int, **options: Any) -> AsyncIterator[list[Queue]]:
    """``n`` queues, each on a pool of its own with a single connection."""
    settings = Settings(statement_timeout_ms=30_000)
    pools = [Database.from_settings(settings, database_url, pool_size=1) for _ in range(n)]
    try:
        yield [Queue(db, **options) for db in pools]
    finally:
        for db in pools:
            await db.close()


async def within_deadline(*calls: Awaitable[T]) -> list[T]:
    """Run concurrently; a hang fails the test instead of blocking it."""
    return await asyncio.wait_for(asyncio.gather(*calls), DEADLINE_S)


async def push_all(queue: Queue, session: str, n: int, **fields: Any) -> list[int]:
    ids: list[int] = []
    for start in range(0, n, 1000):
        batch = [NewLead({"i": i}, **fields) for i in range(start, min(n, start + 1000))]
        ids += (await queue.push(session, batch, now=T0)).ids
    return ids


async def drain(queue: Queue, owner: str, max_: int) -> list[int]:
    """Lease until the session answers empty; returns the ids leased."""
    seen: list[int] = []
    while batch := await leasing_of(queue).lease_next("s", owner, max=max_, ttl_s=600, now=at(1)):
        assert len(batch) <= max_  # the CTE runs once (PostgreSQL bug #15715)
        seen += [lease.lead.id for lease in batch]
        await asyncio.sleep(0)
    return seen


# -- leasing under contention ----------------------------------------------------


@pytest.mark.timeout(120)
@pytest.mark.parametrize("max_", [1, 10, 100])
async def test_concurrent_lease_hands_each_lead_out_once(
    queue: Queue, database_url: str, max_: int
) -> None:
    pushed = await push_all(queue, "s", LEADS)
    async with queues(database_url, WORKERS) as workers:
        per_worker = await within_deadline(
            *(drain(q, f"w{i}", max_) for i, q in enumerate(workers))
        )
    seen = [lead_id for ids in per_worker for lead_id in ids]
    assert sorted(seen) == sorted(pushed)
    assert len(set(seen)) == len(seen) == LEADS
    assert sum(1 for ids in per_worker if ids) > 1  # the work really was shared
    assert await queue.stats("s") == Counts(leased=LEADS)

    # The ledger agrees: one lease per lead, attempt 1, by the worker that got it.
    owner_of = {lead_id: f"w{i}" for i, ids in enumerate(per_worker) for lead_id in ids}
    rows = await fetch(
        queue.db, "SELECT lead_id, attempt, owner FROM lead_events WHERE event = 'leased'"
    )
    assert len(rows) == LEADS
    assert {r["lead_id"]: r["owner"] for r in rows} == owner_of
    assert {r["attempt"] for r in rows} == {1}


@pytest.mark.timeout(120)
async def test_lease_and_complete_from_threads(queue: Queue, database_url: str) -> None:
    """Threads with event loops and pools of their own lease and complete every lead once."""
    pushed = await push_all(queue, "s", LEADS)
    done: list[list[int]] = [[] for _ in range(WORKERS)]
    errors: list[BaseException] = []

    async def work(i: int) -> None:
        async with queues(database_url, 1) as [q]:
            while batch := await leasing_of(q).lease_next(
                "s", f"t{i}", max=25, ttl_s=600, now=at(1)
            ):
                items = [CompleteItem(x.lead.id, x.token, result={"by": i}) for x in batch]
                answers = await q.complete_many(items, now=at(2))
                assert all(a.ok for a in answers)
                done[i] += [a.lead_id for a in answers]

    def run(i: int) -> None:
        try:
            asyncio.run(asyncio.wait_for(work(i), DEADLINE_S))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(WORKERS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        await asyncio.to_thread(thread.join, DEADLINE_S + 10)
    assert not any(thread.is_alive() for thread in threads)
    assert errors == []
    seen = [lead_id for ids in done for lead_id in ids]
    assert sorted(seen) == sorted(pushed)
    assert await queue.stats("s") == Counts(done=LEADS)
    [counted] = await fetch(
        queue.db,
        "SELECT count(*) AS n, count(DISTINCT lead_id) AS leads FROM lead_events "
        "WHERE event = 'completed'",
    )
    assert counted == {"n": LEADS, "leads": LEADS}


@pytest.mark.timeout(120)
async def test_producers_and_consumers_at_once(queue: Queue, database_url: str) -> None:
    """Pushing while 16 workers lease: nothing lost, nothing handed out twice."""
    producers, per_producer, batch = 4, 500, 50
    finished = asyncio.Event()

    async def produce(q: Queue, p: int) -> list[int]:
        ids: list[int] = []
        for start in range(0, per_producer, batch):
            new = [NewLead({"p": p, "i": i}) for i in range(start, start + batch)]
            ids += (await q.push("s", new, now=T0)).ids
            await asyncio.sleep(0)
        return ids

    async def consume(q: Queue, c: int) -> list[int]:
        seen: list[int] = []
        while True:
            # Empty after every push committed means the rest is being leased by others.
            pushed_all = finished.is_set()
            got = await leasing_of(q).lease_next(
                "s", f"c{c}", max=random.choice([1, 10, 100]), now=at(1)
            )
            seen += [lease.lead.id for lease in got]
            if not got:
                if pushed_all:
                    return seen
                await asyncio.sleep(0.001)

    async def all_producers(qs: list[Queue]) -> list[list[int]]:
        try:
            return await asyncio.gather(*(produce(q, p) for p, q in enumerate(qs)))
        finally:
            finished.set()

    async with queues(database_url, producers + WORKERS) as qs:
        pushed, *consumed = await within_deadline(
            all_producers(qs[:producers]),
            *(consume(q, c) for c, q in enumerate(qs[producers:])),
        )
    all_pushed = sorted(i for ids in pushed for i in ids)
    seen = [lead_id for ids in consumed for lead_id in ids]
    assert len(all_pushed) == producers * per_producer
    assert sorted(seen) == all_pushed
    assert await queue.stats("s") == Counts(leased=len(all_pushed))


@pytest.mark.timeout(120)
async def test_concurrent_pushes_of_the_same_keys_agree(queue: Queue, database_url: str) -> None:
    """Producers racing to push the same keys, in different orders, get the same ids."""
    keys = [f"k{i}" for i in range(200)]

    async def push(q: Queue) -> dict[str, int]:
        mine = random.sample(keys, len(keys))
        result = await q.push("s", [NewLead({"k": k}, key=k) for k in mine], now=T0)
        return dict(zip(mine, result.ids, strict=True))

    async with queues(database_url, WORKERS) as qs:
        answers = await within_deadline(*(push(q) for q in qs))
    assert all(answer == answers[0] for answer in answers)
    assert len(set(answers[0].values())) == len(keys)
    assert await queue.stats("s") == Counts(queued=len(keys))


@pytest.mark.timeout(60)
async def test_crossed_key_orders_do_not_deadlock(queue: Queue, database_url: str) -> None:
    """Two pushes holding each other's keys would deadlock without a common lock order.

    A third transaction holds key "m" uncommitted, so both pushes stop there having
    inserted their first key ("a" for one, "b" for the other), each still to insert
    the other's.
    """
    async with queues(database_url, 2) as (one, two):
        with psycopg.connect(libpq_url(database_url)) as holder:
            holder.execute("INSERT INTO leads (session, key) VALUES ('s', 'm')")
            first = asyncio.create_task(
                one.push("s", [NewLead({}, key=k) for k in ("a", "m", "b")], now=T0)
            )
            second = asyncio.create_task(
                two.push("s", [NewLead({}, key=k) for k in ("b", "m", "a")], now=T0)
            )
            await wait_for_lock_waiters(queue.db, 2)
            holder.rollback()
        a1, m1, b1 = (await asyncio.wait_for(first, DEADLINE_S)).ids
        b2, m2, a2 = (await asyncio.wait_for(second, DEADLINE_S)).ids
    assert (a1, m1, b1) == (a2, m2, b2)
    assert len({a1, m1, b1}) == 3
    assert await queue.stats("s") == Counts(queued=3)


async def wait_for_lock_waiters(db: Database, n: int) -> None:
    """Until ``n`` other sessions of this database wait on a lock."""
    query = (
        "SELECT count(*) AS n FROM pg_stat_activity "
        "WHERE datname = current_database() AND wait_event_type = 'Lock'"
    )
    for _ in range(500):
        [found] = await fetch(db, query)
        if found["n"] >= n:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(f"fewer than {n} sessions came to wait on a lock")


# -- the race that bit River (#1302): completion against sweep at expiry ------------


ROUNDS = 300
LEADS_PER_ROUND = 4


Finish = Callable[[Queue, int, str, datetime], Awaitable[bool]]


async def _race_round(
    pusher: Queue,
    racers: list[Queue],
    sweeper: Queue,
    session: str,
    finish: Finish,
    sweep_all: bool,
) -> tuple[set[int], set[int], SweepResult]:
    """Lease leads expiring at at(10) and race ``finish`` on each against one sweep.

    Returns the leads ``finish`` won, the leads it could win (its instant was
    before the expiry), and what the sweep counted.
    """
    await pusher.push(session, leads(LEADS_PER_ROUND), now=T0)
    leased = await leasing_of(pusher).lease_next(
        session, "w", max=LEADS_PER_ROUND, ttl_s=10, now=T0
    )
    assert [lease.expires_at for lease in leased] == [at(10)] * LEADS_PER_ROUND
    # Each finish runs just before, or at, the expiry; the sweep at or just after it.
    instants = [at(10) - random.choice([TICK, ZERO]) for _ in leased]
    sweep_now = at(10) + random.choice([ZERO, TICK])
    sweep = sweeper.sweep_all(now=sweep_now) if sweep_all else sweeper.sweep(session, now=sweep_now)
    calls: list[Awaitable[Any]] = [
        finish(q, lease.lead.id, lease.token, t)
        for q, lease, t in zip(racers, leased, instants, strict=True)
    ]
    calls.append(sweep)
    order = random.sample(range(len(calls)), len(calls))  # who is sent first varies
    answers = dict(zip(order, await within_deadline(*(calls[i] for i in order)), strict=True))
    *won, swept = (answers[i] for i in range(len(calls)))
    return (
        {lease.lead.id for lease, ok in zip(leased, won, strict=True) if ok},
        {lease.lead.id for lease, t in zip(leased, instants, strict=True) if t < at(10)},
        swept,
    )


async def _complete(q: Queue, lead_id: int, token: str, now: datetime) -> bool:
    answers = await q.complete_many([CompleteItem(lead_id, token, result={"ok": 1})], now=now)
    return answers[0].ok


async def _renew(q: Queue, lead_id: int, token: str, now: datetime) -> bool:
    [answer] = await q.renew_many([RenewItem(lead_id, token, 60)], now=now)
    return answer.ok


async def _ledger_by_lead(db: Database) -> dict[int, list[str]]:
    rows = await fetch(
        db,
        "SELECT lead_id, array_agg(event ORDER BY id) AS events FROM lead_events GROUP BY lead_id",
    )
    return {r["lead_id"]: r["events"] for r in rows}


@pytest.mark.timeout(180)
async def test_complete_against_sweep_at_expiry_has_one_winner(
    queue: Queue, database_url: str
) -> None:
    completed_ids: set[int] = set()
    swept_ids: set[int] = set()
    lost_a_real_race = 0  # the completion could have won, but the sweep came first
    async with queues(database_url, LEADS_PER_ROUND + 1) as qs:
        completers, sweeper = qs[:-1], qs[-1]
        for r in range(ROUNDS):
            session = f"race-{r}"
            won, could_win, swept = await _race_round(
                queue, completers, sweeper, session, _complete, sweep_all=r % 2 == 1
            )
            ids = {
                row["id"]
                for row in await fetch(
                    queue.db, "SELECT id FROM leads WHERE session = %(s)s", s=session
                )
            }
            # Exactly one winner per lead: completed XOR requeued by the sweep.
            assert won <= could_win
            assert swept == SweepResult(requeued=len(ids - won), failed=0)
            assert await queue.stats(session) == Counts(queued=len(ids - won), done=len(won))
            completed_ids |= won
            swept_ids |= ids - won
            lost_a_real_race += len(could_win - won)

    assert completed_ids  # both sides won real races over the rounds
    assert lost_a_real_race
    ledger = await _ledger_by_lead(queue.db)
    assert len(ledger) == ROUNDS * LEADS_PER_ROUND
    for lead_id, history in ledger.items():
        if lead_id in completed_ids:
            assert history == ["pushed", "leased", "completed"], lead_id
        else:
            assert lead_id in swept_ids
            assert history == ["pushed", "leased", "expired"], lead_id
    statuses = await fetch(queue.db, "SELECT status, count(*) AS n FROM leads GROUP BY status")
    assert Counter({r["status"]: r["n"] for r in statuses}) == Counter(
        done=len(completed_ids), queued=len(swept_ids)
    )


@pytest.mark.timeout(120)
async def test_renew_against_sweep_at_expiry_has_one_winner(
    queue: Queue, database_url: str
) -> None:
    renewed_total = swept_total = 0
    async with queues(database_url, LEADS_PER_ROUND + 1) as qs:
        renewers, sweeper = qs[:-1], qs[-1]
        for r in range(ROUNDS // 3):
            session = f"renew-{r}"
            won, could_win, swept = await _race_round(
                queue, renewers, sweeper, session, _renew, sweep_all=False
            )
            assert won <= could_win
            assert swept.requeued == LEADS_PER_ROUND - len(won)
            rows = await fetch(
                queue.db,
                "SELECT id, status, lease_expires_at FROM leads WHERE session = %(s)s",
                s=session,
            )
            for found in rows:
                if found["id"] in won:
                    assert found["status"] == "leased"
                    assert found["lease_expires_at"] == at(70) - TICK
                else:
                    assert (found["status"], found["lease_expires_at"]) == ("queued", None)
            renewed_total += len(won)
            swept_total += swept.requeued
    assert renewed_total and swept_total
