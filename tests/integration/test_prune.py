"""Retention: ``Queue.prune``, ``leaseq prune`` and the service's background pruner.

Only terminal leads (done, failed, cached) last changed before the cutoff go,
with their ledger rows; queued and leased leads stay whatever their age.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from app.cli.prune import parse_duration
from app.config import Settings
from app.domain.queue import Queue
from app.service.runtime import Runtime
from app.store import statements
from app.store.pool import Database
from leaseq.errors import InvalidInput
from leaseq.model import NewLead
from tests.support import at, events, fetch, leads, leasing_of
from tests.support.in_process import until
from tests.support.serving import leaseq

DAY = 86400.0


async def _ids(db: Database) -> set[int]:
    return {row["id"] for row in await fetch(db, "SELECT id FROM leads")}


async def _finish(
    queue: Queue, n: int, status: str, *, when: float, session: str = "s"
) -> list[int]:
    """Push ``n`` leads and finish each with ``status`` at ``at(when)``."""
    pushed = await queue.push(session, leads(n), now=at(when))
    held = await leasing_of(queue).lease_next(session, "w", max=n, now=at(when))
    for lease in held:
        await queue.complete(lease.lead.id, lease.token, status, now=at(when))
    return pushed.ids


async def test_prune_deletes_only_old_terminal_leads_with_their_events(
    queue: Queue, db: Database
) -> None:
    done = await _finish(queue, 2, "done", when=0)
    failed = await _finish(queue, 1, "failed", when=0)
    cached = await _finish(queue, 1, "cached", when=0)
    recent = await _finish(queue, 2, "done", when=6 * DAY)  # finished a day before the cutoff
    queued = (await queue.push("s", leads(2), now=at(0))).ids
    leased_ids = (await queue.push("s", leads(2), now=at(0))).ids
    held = await leasing_of(queue).lease_next("s", "w", max=4, now=at(1))
    assert {lease.lead.id for lease in held} == set(queued + leased_ids)
    # Two of them back to queued, two leased with a long-expired lease: neither may go.
    for lease in held[:2]:
        await queue.release(lease.lead.id, lease.token, now=at(2))
    old = set(done + failed + cached)
    assert {row["lead_id"] for row in await events(db)} >= old

    pruned = await queue.prune(7 * DAY, now=at(7 * DAY + 1))

    assert pruned == len(old)
    assert await _ids(db) == set(recent + queued + leased_ids)
    assert not {row["lead_id"] for row in await events(db)} & old
    assert await queue.prune(7 * DAY, now=at(7 * DAY + 1)) == 0


async def test_prune_works_in_batches_and_by_session(queue: Queue, db: Database) -> None:
    mine = await _finish(queue, 7, "done", when=0)
    other = await _finish(queue, 3, "done", when=0, session="other")
    seen: list[int] = []
    original = queue._rows

    async def counting(stmt: str, params: dict[str, Any]) -> list[Mapping[str, Any]]:
        rows = await original(stmt, params)
        seen.append(rows[0]["pruned"])  # only prune statements run below
        return rows

    queue._rows = counting  # type: ignore[method-assign]
    assert await queue.prune(60, "s", now=at(3600), batch=3) == 7
    assert seen == [3, 3, 1]
    assert await _ids(db) == set(other)
    assert not set(mine) & await _ids(db)
    assert await queue.prune(60, now=at(3600), batch=3) == 3
    assert await _ids(db) == set()


async def test_a_batch_prunes_the_oldest_terminal_leads_first(queue: Queue, db: Database) -> None:
    """Each batch follows index ``leads_terminal_updated``: the oldest change goes first."""
    finished_at = (40, 10, 30, 20, 0)  # ids grow left to right; ages do not
    lead_at = {when: (await _finish(queue, 1, "done", when=when))[0] for when in finished_at}
    params = {"older_than_s": 60, "now": at(3600), "limit": 2}
    gone: list[set[int]] = []
    for _ in range(3):
        before = await _ids(db)
        await db.rows(statements.prune(**params, scoped=False))
        gone.append(before - await _ids(db))
    assert gone == [
        {lead_at[0], lead_at[10]},
        {lead_at[20], lead_at[30]},
        {lead_at[40]},
    ]


async def test_prune_uses_the_database_clock(queue: Queue, db: Database) -> None:
    await queue.push("s", leads(1))
    [held] = await leasing_of(queue).lease_next("s", "w")
    await queue.complete(held.lead.id, held.token)
    assert await queue.prune(3600) == 0  # just finished
    await db.rows("UPDATE leads SET updated_at = now() - interval '2 hours'")
    assert await queue.prune(3600) == 1


async def test_a_pruned_key_can_be_pushed_again(queue: Queue) -> None:
    [first] = (await queue.push("s", [NewLead({}, key="k")], now=at(0))).ids
    [held] = await leasing_of(queue).lease_next("s", "w", now=at(0))
    await queue.complete(held.lead.id, held.token, now=at(0))
    again = await queue.push("s", [NewLead({}, key="k")], now=at(1))
    assert again.ids == [first] and again.duplicates == 1
    assert await queue.prune(60, now=at(120)) == 1
    fresh = await queue.push("s", [NewLead({}, key="k")], now=at(121))
    assert fresh.created == 1 and fresh.ids != [first]


@pytest.mark.parametrize("older_than_s", [-1, float("nan"), "7d", True])
async def test_prune_refuses_a_bad_age(queue: Queue, older_than_s: object) -> None:
    with pytest.raises(InvalidInput, match="older_than_s"):
        await queue.prune(older_than_s)  # type: ignore[arg-type]


def test_parse_duration() -> None:
    assert parse_duration("90s") == 90
    assert parse_duration("30m") == 1800
    assert parse_duration("12h") == 12 * 3600
    assert parse_duration("7d") == 7 * DAY
    assert parse_duration("1.5h") == 5400
    for bad in ("7", "d", "-1d", "7w", ""):
        with pytest.raises(ValueError):
            parse_duration(bad)


async def test_the_service_prunes_when_configured(database_url: str) -> None:
    settings = Settings(
        database_url=database_url,
        sweep_interval_s=3600,
        prune_after_s=60,
        prune_interval_s=0.05,
        statement_timeout_ms=30_000,
    )
    runtime = Runtime.build(settings)
    queue = runtime.queue
    old = await _finish(queue, 3, "done", when=0)
    await queue.push("s", leads(1), now=at(0))  # queued, old: stays
    # Finished long ago on the database clock.
    await runtime.db.rows("UPDATE leads SET updated_at = now() - interval '1 hour'")
    await runtime.start()
    try:

        async def gone() -> bool:
            return not set(old) & await _ids(runtime.db)

        await until(gone, within_s=10)
        assert len(await _ids(runtime.db)) == 1
    finally:
        await runtime.stop()


async def _keys(db: Database) -> set[str]:
    return {row["key"] for row in await fetch(db, "SELECT key FROM idempotency_keys")}


async def test_prune_keys_forgets_idempotency_keys_past_their_time(
    queue: Queue, db: Database
) -> None:
    await queue.push("s", leads(1), idempotency_key="old", now=at(0))
    await leasing_of(queue).lease_next("s", "w", idempotency_key="old", now=at(0))  # its own verb
    await queue.push("s", leads(1), idempotency_key="new", now=at(DAY))
    assert await queue.prune_keys(DAY, now=at(DAY), batch=1) == 0  # exactly a day: kept
    assert await queue.prune_keys(DAY, now=at(DAY + 1), batch=1) == 2
    assert await _keys(db) == {"new"}
    assert len(await _ids(db)) == 2  # the leads stay: only the memory of the requests goes
    with pytest.raises(InvalidInput, match="older_than_s"):
        await queue.prune_keys(-1)


async def test_the_service_keeps_leads_by_default_and_forgets_old_keys(
    database_url: str, queue: Queue, db: Database
) -> None:
    done = await _finish(queue, 2, "done", when=0)
    await queue.push("s", leads(1), idempotency_key="old")
    await queue.push("s", leads(1), idempotency_key="new")
    await db.rows("UPDATE leads SET updated_at = now() - interval '30 days'")
    await db.rows("UPDATE idempotency_keys SET created_at = now() - interval '2 days'")
    await db.rows("UPDATE idempotency_keys SET created_at = now() WHERE key = 'new'")
    settings = Settings(database_url=database_url, sweep_interval_s=3600, prune_interval_s=0.05)
    runtime = Runtime.build(settings)
    await runtime.start()
    try:
        assert settings.prune_after_s is None and settings.idempotency_ttl_s == DAY

        async def forgotten() -> bool:
            return await _keys(db) == {"new"}

        await until(forgotten, within_s=10)
        assert set(done) <= await _ids(db)
    finally:
        await runtime.stop()


@pytest.mark.service
async def test_leaseq_prune_command(database_url: str, queue: Queue, db: Database) -> None:
    done_ids = await _finish(queue, 2, "done", when=0)
    [queued] = (await queue.push("s", leads(1))).ids
    await db.rows("UPDATE leads SET updated_at = now() - interval '2 days'")

    done = await asyncio.to_thread(
        leaseq, "prune", "--older-than", "1d", "--session", "s", "--database-url", database_url
    )
    assert done.returncode == 0, done.stderr
    assert "pruned 2 leads from session s" in done.stdout
    assert await _ids(db) == {queued}
    assert not set(done_ids) & {row["lead_id"] for row in await events(db)}

    bad = await asyncio.to_thread(
        leaseq, "prune", "--older-than", "soon", "--database-url", database_url
    )
    assert bad.returncode == 2
    assert "--older-than" in bad.stderr and len(bad.stderr.strip().splitlines()) == 1
