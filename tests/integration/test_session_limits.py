"""A session's settings (weight, cap, rate), checkpoints, and the age of the oldest available lead.

Time is the injected database clock (``now=``): the rate is judged on it, and
no test sleeps.
"""

from __future__ import annotations

import asyncio
import logging
import math
from datetime import timedelta

import pytest

from app.config import Settings
from app.domain import overview
from app.domain.queue import Queue
from app.leasing.fleet import Fleet
from app.store import statements
from app.store.pool import Database
from leaseq.errors import InvalidInput, LeaseLost
from leaseq.limits import (
    MAX_BURST,
    MAX_RATE_PER_S,
    MAX_WEIGHT,
    MIN_RATE_PER_S,
    MIN_WEIGHT,
)
from leaseq.model import NewLead, RenewItem, SessionSettings
from tests.support import T0, across, at, leads, lease_from, leasing_of


async def held(queue: Queue, session: str) -> int:
    return (await queue.stats(session)).leased


# -- settings ----------------------------------------------------------------------


async def test_settings_default_until_set_and_a_put_replaces_them_all(queue: Queue) -> None:
    assert await queue.settings("s") == SessionSettings(1.0, None, None, None)
    full = SessionSettings(weight=3, max_leased=10, rate_per_s=5, burst=8)
    assert await queue.put_settings("s", full) == full
    assert await queue.settings("s") == full
    assert await queue.put_settings("s", SessionSettings(weight=2)) == SessionSettings(weight=2)
    assert await queue.settings_all() == {"s": SessionSettings(weight=2)}


@pytest.mark.parametrize(
    "bad",
    [
        SessionSettings(weight=0),
        SessionSettings(weight=-1),
        SessionSettings(weight=float("nan")),
        SessionSettings(weight=float("inf")),
        SessionSettings(weight=2e6),
        SessionSettings(max_leased=-1),
        SessionSettings(max_leased=2**31),
        SessionSettings(max_leased=True),  # type: ignore[arg-type]
        SessionSettings(rate_per_s=0),
        SessionSettings(rate_per_s=float("nan")),
        SessionSettings(rate_per_s=1, burst=0),
        SessionSettings(burst=3),
        # Beyond the ranges the bucket's arithmetic carries (leaseq.limits).
        SessionSettings(weight=MIN_WEIGHT / 2),
        SessionSettings(weight=5e-324),
        SessionSettings(weight=math.nextafter(MAX_WEIGHT, math.inf)),
        SessionSettings(rate_per_s=MIN_RATE_PER_S / 2),
        SessionSettings(rate_per_s=5e-324),
        SessionSettings(rate_per_s=math.nextafter(MAX_RATE_PER_S, math.inf)),
        SessionSettings(rate_per_s=float("inf")),
        SessionSettings(rate_per_s=1, burst=MAX_BURST + 1),
        SessionSettings(rate_per_s=1, burst=2**31 - 1),
    ],
)
async def test_bad_settings_are_refused_and_nothing_changes(
    queue: Queue, bad: SessionSettings
) -> None:
    kept = SessionSettings(weight=2, max_leased=4, rate_per_s=10, burst=10)
    await queue.put_settings("s", kept)
    with pytest.raises(InvalidInput):
        await queue.put_settings("s", bad)
    assert await queue.settings("s") == kept
    with pytest.raises(InvalidInput):
        await queue.put_settings("bad name", SessionSettings())


# -- the cap -----------------------------------------------------------------------


async def test_a_cap_bounds_the_leads_leased_at_once(queue: Queue) -> None:
    await queue.push("s", leads(10))
    await queue.put_settings("s", SessionSettings(max_leased=3))
    first = await leasing_of(queue).lease_next("s", "w", max=10, now=T0)
    assert len(first) == 3 and await held(queue, "s") == 3
    blocked = await lease_from(queue, "s", "w", max=10, now=T0)
    assert blocked.leases == [] and blocked.capped
    await queue.complete(first[0].lead.id, first[0].token, now=T0)
    [again] = await leasing_of(queue).lease_next("s", "w", max=10, now=T0)  # one place freed
    assert again.lead.id not in {x.lead.id for x in first}
    await queue.put_settings("s", SessionSettings(max_leased=0))  # held back entirely
    await queue.release(again.lead.id, again.token, now=T0)
    assert await leasing_of(queue).lease_next("s", "w", now=T0) == []
    await queue.put_settings("s", SessionSettings())  # the cap lifted: one statement again
    assert len(await leasing_of(queue).lease_next("s", "w", max=10, now=T0)) == 7  # the queued rest


async def test_an_expired_lease_counts_against_the_cap_until_it_is_swept(queue: Queue) -> None:
    await queue.push("s", leads(3))
    await queue.put_settings("s", SessionSettings(max_leased=1))
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    assert await leasing_of(queue).lease_next("s", "w", now=at(11)) == []  # expired, not yet swept
    await queue.sweep("s", now=at(11))
    [after] = await leasing_of(queue).lease_next("s", "w", now=at(11))
    assert after.lead.id == lease.lead.id and after.attempt == 2


async def test_concurrent_leasers_never_exceed_the_cap(database_url: str) -> None:
    """16 leasers, each with a connection of its own, lease and complete for a while; a
    sampler reads the session's leased leads all along: never above the cap."""
    settings = Settings(statement_timeout_ms=30_000)
    async with Database.from_settings(settings, database_url, pool_size=20) as db:
        queue = Queue(db)
        await queue.push("capped", leads(400))
        await queue.put_settings("capped", SessionSettings(max_leased=5))
        done = asyncio.Event()
        seen: list[int] = []

        async def sampler() -> None:
            while not done.is_set():
                [row] = await db.rows(
                    "SELECT count(*) AS n FROM leads WHERE session = 'capped' AND status = 'leased'"
                )
                seen.append(int(row["n"]))

        async def leaser(n: int) -> list[int]:
            taken: list[int] = []
            while True:
                leases = await leasing_of(queue).lease_next("capped", f"w{n}", max=1 + n % 3)
                if not leases:
                    if (await queue.stats("capped")).queued == 0:
                        return taken
                    await asyncio.sleep(0.001)  # held back by the cap: try again
                    continue
                taken += [lease.lead.id for lease in leases]
                await asyncio.sleep(0.002)
                for lease in leases:
                    await queue.complete(lease.lead.id, lease.token)

        async with asyncio.timeout(120):
            watching = asyncio.ensure_future(sampler())
            taken = await asyncio.gather(*(leaser(n) for n in range(16)))
            done.set()
            await watching
    assert max(seen) <= 5, max(seen)
    assert 5 in seen  # the cap was reached, not only respected
    every = [lead for mine in taken for lead in mine]
    assert len(every) == len(set(every)) == 400


async def test_a_capped_lease_sent_again_with_its_key_gets_the_same_leases(queue: Queue) -> None:
    await queue.push("s", leads(10))
    await queue.put_settings("s", SessionSettings(max_leased=3))
    first = await leasing_of(queue).lease_next("s", "w", max=5, idempotency_key="k", now=T0)
    again = await leasing_of(queue).lease_next("s", "w", max=5, idempotency_key="k", now=T0)
    assert len(first) == 3 and [x.token for x in again] == [x.token for x in first]
    assert await held(queue, "s") == 3  # the retry took nothing more


# -- the rate ----------------------------------------------------------------------


async def test_the_rate_is_a_token_bucket_on_the_database_clock(queue: Queue) -> None:
    await queue.push("s", leads(50))
    await queue.put_settings("s", SessionSettings(rate_per_s=2, burst=3))

    async def lease(seconds: float, asked: int = 10) -> int:
        got = await lease_from(queue, "s", "w", max=asked, ttl_s=600, now=at(seconds))
        return len(got.leases)

    assert await lease(0) == 3  # a full bucket: the burst
    assert await lease(0) == 0
    nothing = await lease_from(queue, "s", "w", max=1, now=at(0.1))
    assert nothing.leases == [] and nothing.next_token_s == pytest.approx(0.4)
    assert await lease(0.6) == 1  # 2/s: 1.2 tokens by now
    assert await lease(0.9) == 0  # 0.2 + 0.6
    assert await lease(3.0) == 3  # 5 tokens' time: the bucket holds its burst, 3
    assert await lease(100) == 3  # a long quiet time is still one burst, never more
    assert await lease(100.4) == 0
    assert await lease(101.2) == 2  # 0.8 + 1.6 tokens


async def test_the_default_burst_is_one_seconds_worth(queue: Queue) -> None:
    await queue.push("s", leads(20))
    await queue.put_settings("s", SessionSettings(rate_per_s=4))
    assert len(await leasing_of(queue).lease_next("s", "w", max=10, now=T0)) == 4
    await queue.put_settings("s", SessionSettings(rate_per_s=0.2))  # a rate kept: its level too
    assert await leasing_of(queue).lease_next("s", "w", max=10, now=at(1)) == []  # 0.2 tokens came
    assert (
        len(await leasing_of(queue).lease_next("s", "w", max=10, now=at(6))) == 1
    )  # a burst of one


async def test_cap_and_rate_together(queue: Queue) -> None:
    await queue.push("s", leads(20))
    await queue.put_settings("s", SessionSettings(max_leased=2, rate_per_s=10, burst=10))
    first = await leasing_of(queue).lease_next("s", "w", max=10, now=T0)
    assert len(first) == 2  # the cap binds before the bucket
    for lease in first:
        await queue.complete(lease.lead.id, lease.token, now=T0)
    assert (
        len(await leasing_of(queue).lease_next("s", "w", max=10, now=T0)) == 2
    )  # 8 tokens left: cap


async def test_a_session_without_limits_leases_in_one_statement(db: Database) -> None:
    """No settings row, or one with a weight only: the lease statement leases and never takes
    the settings' lock (the limited path would)."""
    queue = Queue(db)
    await queue.push("free", leads(3))
    await queue.put_settings("weighted", SessionSettings(weight=5))
    await queue.push("weighted", leads(3))
    params = {"max": 2, "ttl_s": 60.0, "owner": "w", "now": T0, "tokens": ["a", "b"]}
    for session in ("free", "weighted"):
        rows = await db.rows(statements.lease_next(**params, session=session, ledger=True))
        assert [row["limited"] for row in rows] == [False, False]
    await queue.put_settings("limited", SessionSettings(max_leased=1))
    await queue.push("limited", leads(3))
    [row] = await db.rows(statements.lease_next(**params, session="limited", ledger=True))
    assert row["limited"] and row["id"] is None  # it took nothing: the caller locks and leases
    assert (await queue.stats("limited")).leased == 0


# -- checkpoints ---------------------------------------------------------------------


async def test_a_checkpoint_survives_expiry_sweep_re_lease_and_release(queue: Queue) -> None:
    await queue.push("s", [NewLead({"pages": 100})])
    [first] = await leasing_of(queue).lease_next("s", "w1", ttl_s=10, now=T0)
    assert first.lead.checkpoint is None
    await queue.renew(first.lead.id, first.token, 10, checkpoint={"page": 40}, now=at(1))
    await queue.renew(first.lead.id, first.token, 10, now=at(2))  # without one: it stays
    assert (await queue.get(first.lead.id)).checkpoint == {"page": 40}

    # The holder vanishes: its lease expires, the sweep takes it back, the next holder resumes.
    assert (await queue.sweep("s", now=at(20))).requeued == 1
    assert (await queue.get(first.lead.id)).checkpoint == {"page": 40}
    [second] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(20))
    assert (second.lead.id, second.attempt) == (first.lead.id, 2)
    assert second.lead.checkpoint == {"page": 40}
    with pytest.raises(LeaseLost):  # the old holder cannot write one any more
        await queue.renew(first.lead.id, first.token, checkpoint={"page": 99}, now=at(21))

    # A release keeps it too; a new one replaces it.
    await queue.renew(second.lead.id, second.token, checkpoint=[70, "of", 100], now=at(21))
    released = await queue.release(second.lead.id, second.token, now=at(22))
    assert released.checkpoint == [70, "of", 100]
    [third] = await leasing_of(queue).lease_next("s", "w3", now=at(22))
    assert third.lead.checkpoint == [70, "of", 100]
    done = await queue.complete(third.lead.id, third.token, result={"pages": 100}, now=at(23))
    assert done.checkpoint == [70, "of", 100]


async def test_a_bad_checkpoint_is_refused_before_anything_is_written(queue: Queue) -> None:
    await queue.push("s", leads(2))
    a, b = await leasing_of(queue).lease_next("s", "w", max=2, ttl_s=10, now=T0)
    deep: object = 1
    for _ in range(70):
        deep = [deep]
    items = [
        RenewItem(a.lead.id, a.token, 60, {"ok": True}),
        RenewItem(b.lead.id, b.token, 60, {"too": "x" * (queue.max_payload_bytes + 1)}),
    ]
    with pytest.raises(InvalidInput, match=r"items\[1\]\.checkpoint"):
        await queue.renew_many(items, now=at(1))
    with pytest.raises(InvalidInput, match="checkpoint"):
        await queue.renew(a.lead.id, a.token, 60, checkpoint=deep, now=at(1))
    with pytest.raises(InvalidInput, match="checkpoint"):
        await queue.renew(a.lead.id, a.token, 60, checkpoint={"nul": "\x00"}, now=at(1))
    for lease in (a, b):  # neither renewed nor given a checkpoint
        lead = await queue.get(lease.lead.id)
        assert lead.checkpoint is None and lead.lease_expires_at == lease.expires_at


# -- the age of the oldest available lead -------------------------------------------


async def test_the_oldest_available_age_is_judged_on_the_database_clock(queue: Queue) -> None:
    now = await queue.db_now()
    await queue.push("s", leads(2), now=now)
    await queue.push("s", [NewLead({"later": True}, delay_s=30)], now=now)
    assert (await queue.stats("s", now=now + timedelta(seconds=5))).oldest_available_age_s == 5
    a, b = await leasing_of(queue).lease_next("s", "w", max=2, now=now + timedelta(seconds=5))
    # Only the delayed lead is left: not available until it is due, then aged from then.
    assert (await queue.stats("s", now=now + timedelta(seconds=10))).oldest_available_age_s is None
    due = await queue.stats("s", now=now + timedelta(seconds=42))
    assert due.oldest_available_age_s == 12 and due.queued == 1
    every = await queue.stats_all(now=now + timedelta(seconds=42))
    assert every.sessions["s"].oldest_available_age_s == 12
    assert every.total.oldest_available_age_s == 12
    assert await queue.available(now=now + timedelta(seconds=42)) == {"s": 12}
    # A lead released goes back to the queue available from then.
    await queue.release(a.lead.id, a.token, now=now + timedelta(seconds=50))
    again = await queue.stats("s", now=now + timedelta(seconds=53))
    assert again.oldest_available_age_s == 23  # the delayed one, due at 30, is older
    assert b.lead.id


async def test_lead_times_written_by_hand_fail_no_statement_across_sessions(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """Infinite timestamps written in SQL into one session's leads (its oldest available
    lead at '-infinity', another's lease expiring at 'infinity') reach every statement across
    sessions: the stats, the fleet's view, the dashboard's data all still answer (an age
    beyond any finite one reads as statements.MAX_SPAN_S), and a lease across sessions serves the
    others (a lead that cannot be read back skips its session)."""
    queue = Queue(db)
    await queue.push("ancient", leads(2))
    await queue.push("forever", leads(2))
    await queue.push("ok", leads(3))
    [held_on] = await leasing_of(queue).lease_next("forever", "w")
    await db.rows("UPDATE leads SET available_at = '-infinity' WHERE session = 'ancient'")
    await db.rows(
        "UPDATE leads SET lease_expires_at = 'infinity' WHERE id = %(id)s",
        {"id": held_on.lead.id},
    )
    every = await queue.stats_all()
    assert every.sessions["ancient"].oldest_available_age_s == statements.MAX_SPAN_S
    assert every.total.oldest_available_age_s == statements.MAX_SPAN_S
    assert (await queue.available())["ok"] >= 0
    snapshot = await overview.snapshot(queue)
    [expiring] = snapshot.expiring
    assert (expiring.lead_id, expiring.expires_in_s) == (held_on.lead.id, statements.MAX_SPAN_S)
    with caplog.at_level(logging.ERROR, logger="leaseq.fleet"):
        fleet = Fleet(leasing_of(queue).sessions)
        got = [x.lead.session for _ in range(6) for x in await fleet.lease(across(None, "w"))]
    assert sorted(got) == ["forever", "ok", "ok", "ok"]
    assert any("ancient" in r.getMessage() for r in caplog.records), caplog.records
