"""Keys at their cap (app.store.statements.parking): the ready leads of a full key are parked
out of the lease's way, and each way a lease of the key ends brings back what it frees.

The cap itself is tested in test_concurrency_keys.py; here, that a lease walks over a full
key's backlog once, not at every lease, and that no key is left with room and its leads all
parked: one by one for every way a lease ends, then under load.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Callable

import psycopg
import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database, libpq_url
from leaseq.model import CompleteItem, Lease, NewLead, SessionSettings
from tests.support import T0, at, fetch, lease_from

PARKED = "status = 'queued' AND parked"


async def _parked(db: Database, key: str | None = None) -> int:
    rows = await fetch(
        db,
        f"SELECT count(*) AS n FROM leads WHERE {PARKED} "
        "AND (%(key)s::text IS NULL OR concurrency_key = %(key)s)",
        key=key,
    )
    return int(rows[0]["n"])


async def _frees(db: Database) -> list[tuple[str, str, int]]:
    rows = await fetch(
        db,
        "SELECT session, concurrency_key AS key, sum(n) AS n FROM lead_key_frees "
        "GROUP BY session, concurrency_key ORDER BY 1, 2",
    )
    return [(row["session"], row["key"], int(row["n"])) for row in rows]


async def test_a_full_keys_backlog_is_parked_once_and_comes_back_as_the_key_frees_room(
    queue: Queue, db: Database
) -> None:
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    hot = [NewLead({"n": n}, priority=9, concurrency_key="hot") for n in range(50)]
    await queue.push("s", [*hot, NewLead({}, concurrency_key="cold"), NewLead({})], now=T0)
    [first] = (await lease_from(queue, "s", "w", now=T0)).leases
    assert first.lead.payload == {"n": 0}
    # the next lease parks the hot key's backlog before it leases the other leads
    rest = (await lease_from(queue, "s", "w", max=5, now=at(1))).leases
    assert sorted(str(lease.lead.concurrency_key) for lease in rest) == ["None", "cold"]
    assert await _parked(db, "hot") == 49
    lead = await queue.get(hot_id := first.lead.id + 1)
    assert lead.status == "queued"  # parked is still queued to every reader
    assert (await lease_from(queue, "s", "w", max=5, now=at(2))).leases == []
    # its end writes a free; the next lease brings back the best parked lead and takes it
    await queue.complete_many([CompleteItem(first.lead.id, first.token)], now=at(3))
    assert await _frees(db) == [("s", "hot", 1)]
    [again] = (await lease_from(queue, "s", "w", max=5, now=at(4))).leases
    assert again.lead.id == hot_id and again.lead.payload == {"n": 1}
    assert await _parked(db, "hot") == 48
    assert await _frees(db) == []  # seen, so forgotten


async def test_a_lead_brought_back_keeps_its_time_and_leases_in_its_order(
    queue: Queue, db: Database
) -> None:
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    pushed = await queue.push(
        "s", [NewLead({"n": n}, concurrency_key="k") for n in range(3)], now=T0
    )
    [first] = (await lease_from(queue, "s", "w", now=at(1))).leases
    assert (await lease_from(queue, "s", "w", now=at(2))).leases == []
    assert await _parked(db) == 2
    await queue.complete_many([CompleteItem(first.lead.id, first.token)], now=at(3))
    [second] = (await lease_from(queue, "s", "w", now=at(4))).leases
    assert second.lead.id == pushed.ids[1]
    third = await queue.get(pushed.ids[2])
    assert third.status == "queued" and third.available_at.year == 9999  # parked, as blocked
    await queue.release(second.lead.id, second.token, now=at(5))
    leased = (await lease_from(queue, "s", "w", now=at(6))).leases
    assert [lease.lead.id for lease in leased] == [pushed.ids[1]]  # released, first again
    await queue.complete_many([CompleteItem(leased[0].lead.id, leased[0].token)], now=at(7))
    [last] = (await lease_from(queue, "s", "w", now=at(8))).leases
    assert last.lead.id == pushed.ids[2] and last.lead.available_at == T0  # its time, kept


async def test_a_lease_never_waits_for_a_free_being_written(
    queue: Queue, db: Database, database_url: str
) -> None:
    """A statement that ends leases of several keys writes their frees in key order, and the
    look under the session's lock reads them in any: it skips a free being written (its
    next look takes it), so the two never wait on each other."""
    await queue.put_settings("s", SessionSettings(max_leased_per_key=2), now=T0)
    await queue.push("s", [NewLead({}, concurrency_key="k") for _ in range(4)], now=T0)
    first, second = (await lease_from(queue, "s", "w", max=2, now=at(1))).leases
    end = "UPDATE leads SET status = 'done', lease_expires_at = NULL WHERE id = %s"
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as ending:
        await ending.execute(end, (first.lead.id,))
        await ending.commit()  # its free, seen by the next look
        await ending.execute(end, (second.lead.id,))  # the same free, being written
        taken = await asyncio.wait_for(lease_from(queue, "s", "w", max=2, now=at(2)), 5)
        assert len(taken.leases) == 1  # the second lease still counts as held
        await ending.commit()
    assert await _frees(db) == [("s", "k", 2)]  # left for the next look, grown
    assert len((await lease_from(queue, "s", "w", max=2, now=at(3))).leases) == 1
    assert await _frees(db) == []


async def test_a_key_that_freed_room_gives_its_session_work_in_the_fleets_view(
    queue: Queue,
) -> None:
    """The fleet leases only sessions it sees work in (``Queue.available``): a session whose
    leads are all parked has none until a key frees room, then its parked lead counts."""
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    await queue.push("s", [NewLead({}, concurrency_key="k") for _ in range(3)], now=T0)
    [held] = (await lease_from(queue, "s", "w", now=at(1))).leases
    assert (await lease_from(queue, "s", "w", now=at(1))).leases == []
    assert "s" not in await queue.available(now=at(2))
    assert (await queue.stats("s")).oldest_available_age_s is None
    await queue.complete_many([CompleteItem(held.lead.id, held.token)], now=at(3))
    assert await queue.available(now=at(4)) == {"s": 4.0}  # parked since T0, pushed then
    assert (await queue.stats("s")).oldest_available_age_s is not None
    assert len((await lease_from(queue, "s", "w", now=at(5))).leases) == 1


Ending = Callable[[Queue, Lease], Awaitable[object]]


async def _complete(queue: Queue, lease: Lease) -> object:
    return await queue.complete_many([CompleteItem(lease.lead.id, lease.token)], now=at(2))


async def _fail(queue: Queue, lease: Lease) -> object:
    item = CompleteItem(lease.lead.id, lease.token, status="failed", error="x")
    return await queue.complete_many([item], now=at(2))


async def _release(queue: Queue, lease: Lease) -> object:
    return await queue.release(lease.lead.id, lease.token, now=at(2))


async def _throttle(queue: Queue, lease: Lease) -> object:
    return await queue.release(lease.lead.id, lease.token, throttle_s=1, now=at(2))


async def _expire(queue: Queue, lease: Lease) -> object:
    return await queue.sweep("s", now=at(100))


async def _cancel(queue: Queue, lease: Lease) -> object:
    return await queue.cancel(lease.lead.id, now=at(2))


async def _hang(queue: Queue, lease: Lease) -> object:
    """Past the maximum runtime: the lease expired at its end, the sweep ends it."""
    return await queue.sweep("s", now=at(100))


async def test_a_lease_that_ends_while_its_key_is_parked_brings_the_key_back(
    queue: Queue, db: Database, database_url: str
) -> None:
    """The gap a park could leave: a lease of the key ends in a transaction that commits
    after the parking lease took its snapshot (so it parks, counting the key full) and before
    the next lease. The end's free commits with it, and the next lease brings the key back."""
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    await queue.push("s", [NewLead({}, concurrency_key="k") for _ in range(3)], now=T0)
    [held] = (await lease_from(queue, "s", "w", now=at(1))).leases
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as ending:
        await ending.execute(
            "UPDATE leads SET status = 'done', lease_expires_at = NULL WHERE id = %s",
            (held.lead.id,),
        )  # not committed yet: every lease below still counts the key full
        assert (await lease_from(queue, "s", "w", now=at(2))).leases == []
        assert await _parked(db) == 2
        await ending.commit()
    assert await _frees(db) == [("s", "k", 1)]
    [taken] = (await lease_from(queue, "s", "w", now=at(3))).leases
    assert taken.lead.concurrency_key == "k" and taken.lead.id != held.lead.id


@pytest.mark.parametrize(
    "end",
    [_complete, _fail, _release, _throttle, _expire, _cancel, _hang],
    ids=lambda f: f.__name__,
)
async def test_every_way_a_keyed_lease_ends_brings_its_key_back(
    queue: Queue, db: Database, end: Ending
) -> None:
    settings = SessionSettings(max_leased_per_key=1, max_runtime_s=5)
    await queue.put_settings("s", settings, now=T0)
    await queue.push("s", [NewLead({}, concurrency_key="k") for _ in range(3)], now=T0)
    [held] = (await lease_from(queue, "s", "w", ttl_s=30, now=at(1))).leases
    assert (await lease_from(queue, "s", "w", now=at(1))).leases == []
    assert await _parked(db) == 2
    await end(queue, held)
    taken = (await lease_from(queue, "s", "w", ttl_s=30, now=at(200))).leases
    assert len(taken) == 1 and taken[0].lead.concurrency_key == "k"


async def test_a_change_of_settings_brings_back_every_parked_lead(
    queue: Queue, db: Database
) -> None:
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    await queue.push("s", [NewLead({}, concurrency_key="k") for _ in range(5)], now=T0)
    assert len((await lease_from(queue, "s", "w", now=at(1))).leases) == 1
    assert (await lease_from(queue, "s", "w", now=at(1))).leases == []
    assert await _parked(db) == 4
    await queue.put_settings("s", SessionSettings(max_leased_per_key=3), now=at(2))
    assert await _parked(db) == 0
    assert len((await lease_from(queue, "s", "w", max=5, now=at(3))).leases) == 2
    await queue.put_settings("s", SessionSettings(), now=at(4))  # no cap: nothing parks
    assert len((await lease_from(queue, "s", "w", max=5, now=at(5))).leases) == 2
    assert await _parked(db) == 0


async def test_a_session_without_a_cap_parks_nothing_and_its_frees_are_forgotten(
    queue: Queue, db: Database
) -> None:
    await queue.put_settings("capped", SessionSettings(max_leased_per_key=1), now=T0)
    for session in ("plain", "capped"):
        await queue.push(session, [NewLead({}, concurrency_key="k") for _ in range(3)], now=T0)
    plain = (await lease_from(queue, "plain", "w", max=3, now=at(1))).leases
    assert len(plain) == 3  # no cap: every lead of the key at once
    [capped] = (await lease_from(queue, "capped", "w", now=at(1))).leases
    await queue.complete_many(
        [CompleteItem(lease.lead.id, lease.token) for lease in [*plain, capped]], now=at(2)
    )
    assert await _frees(db) == [("capped", "k", 1), ("plain", "k", 3)]
    await queue.forget_frees()
    assert await _frees(db) == [("capped", "k", 1)]  # the capped session's lease reads it


async def test_no_key_keeps_room_with_its_leads_parked_under_load(
    queue: Queue, db: Database, database_url: str, settings: Settings
) -> None:
    """Sixteen workers through two pools lease, complete and release leads of keys at cap 1,
    the hot keys first in leasing order, so parks and frees cross all the time. Every lead
    ends done, and nothing is left parked or held."""
    keys, per_key = 12, 15
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1))
    pushed = [
        NewLead({}, priority=keys - k, concurrency_key=f"k{k}")
        for k in range(keys)
        for _ in range(per_key)
    ]
    await queue.push("s", pushed)
    rng = random.Random(7)

    async def work(one: Queue, owner: str) -> None:
        idle = 0
        while idle < 5:
            leases = (await lease_from(one, "s", owner, max=2, ttl_s=60)).leases
            if not leases:
                idle += 1
                await asyncio.sleep(0.02)
                continue
            idle = 0
            for lease in leases:
                if lease.lead.attempts == 1 and rng.random() < 0.3:  # once at most
                    await one.release(lease.lead.id, lease.token)
                else:
                    await one.complete_many([CompleteItem(lease.lead.id, lease.token)])

    async with Database.from_settings(settings, database_url) as other_db:
        queues = [queue, Queue(other_db)]
        await asyncio.gather(*(work(queues[i % 2], f"w{i}") for i in range(16)))
    rows = await fetch(db, "SELECT status, count(*) AS n FROM leads GROUP BY status")
    assert {row["status"]: row["n"] for row in rows} == {"done": keys * per_key}
    assert await _parked(db) == 0
