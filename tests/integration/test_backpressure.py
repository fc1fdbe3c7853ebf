"""Backpressure (docs/beyond.md#backpressure): a session's ``max_queued`` bounds its queued
leads at every door (the queue's push, ``leaseq_push`` in a producer's transaction), decided
in the inserting statement, so concurrent pushers never overshoot it."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psycopg
import pytest

from app.domain.queue import Queue
from app.store.pool import Database, libpq_url
from app.store.statements import QUOTA_SQLSTATE
from leaseq import QuotaExceeded, push_in
from leaseq.model import NewLead, SessionSettings
from tests.support import fetch, lease_from


def batch(n: int, **fields: Any) -> list[NewLead]:
    return [NewLead(payload={"i": i}, **fields) for i in range(n)]


async def queued(queue: Queue, session: str) -> int:
    return (await queue.stats(session)).queued


async def test_a_push_past_max_queued_stores_none_of_its_batch(queue: Queue, db: Database) -> None:
    await queue.put_settings("s", SessionSettings(max_queued=3))
    assert (await queue.settings("s")).max_queued == 3
    await queue.push("s", batch(2))
    with pytest.raises(QuotaExceeded) as refused:
        await queue.push("s", batch(2))
    assert refused.value.retry_after_s == queue.quota_retry_after_s
    assert "max_queued 3" in refused.value.detail
    assert await queued(queue, "s") == 2
    assert len(await fetch(db, "SELECT id FROM lead_events WHERE session = 's'")) == 2
    await queue.push("s", batch(1))  # exactly to the bound
    # A leased lead is not queued: leasing one frees room for one more.
    await lease_from(queue, "s", "w")
    await queue.push("s", batch(1))
    with pytest.raises(QuotaExceeded):
        await queue.push("s", batch(1))
    # Other sessions are not bound by it.
    await queue.push("other", batch(10))


async def test_keys_already_in_the_session_take_no_room(queue: Queue) -> None:
    await queue.put_settings("s", SessionSettings(max_queued=2))
    keyed = [NewLead(payload={}, key="a"), NewLead(payload={}, key="b")]
    first = await queue.push("s", keyed)
    again = await queue.push("s", keyed)
    assert (again.ids, again.created, again.duplicates) == (first.ids, 0, 2)
    with pytest.raises(QuotaExceeded):
        await queue.push("s", [*keyed, NewLead(payload={}, key="c")])


async def test_a_keyed_retry_after_room_frees_gets_a_first_answer(queue: Queue) -> None:
    await queue.put_settings("s", SessionSettings(max_queued=2))
    await queue.push("s", batch(2))
    leads = [NewLead(payload={"k": 1}, key="k1")]
    with pytest.raises(QuotaExceeded):
        await queue.push("s", leads, idempotency_key="retry-1")
    await lease_from(queue, "s", "w")
    taken = await queue.push("s", leads, idempotency_key="retry-1")
    assert (taken.created, taken.duplicates) == (1, 0)
    # The key remembers the answer that stored something: the same again is that answer.
    assert await queue.push("s", leads, idempotency_key="retry-1") == taken


async def test_concurrent_pushers_never_pass_the_bound(queue: Queue) -> None:
    """30 pushes of 4 leads at once against a bound of 50: twelve fit (48), every other one
    is refused whole, whatever order they commit in."""
    await queue.put_settings("s", SessionSettings(max_queued=50))

    async def one() -> int:
        try:
            return (await queue.push("s", batch(4))).created
        except QuotaExceeded:
            return 0

    created = await asyncio.gather(*(one() for _ in range(30)))
    assert sorted(created, reverse=True)[:13] == [4] * 12 + [0]
    assert await queued(queue, "s") == 48 == sum(created)


async def test_the_service_default_binds_sessions_without_their_own(db: Database) -> None:
    queue = Queue(db, default_max_queued=2)
    await queue.keep_config()
    with pytest.raises(QuotaExceeded):
        await queue.push("s", batch(3))
    await queue.put_settings("roomy", SessionSettings(max_queued=5))
    await queue.push("roomy", batch(5))
    unbounded = Queue(db)
    await unbounded.keep_config()  # a service without LEASEQ_MAX_QUEUED forgets the default
    await unbounded.push("s", batch(3))


def test_leaseq_push_in_a_transaction_obeys_it(queue_url: str) -> None:
    with psycopg.connect(queue_url) as conn:
        conn.execute("INSERT INTO session_settings (session, max_queued) VALUES ('s', 1)")
        conn.commit()
        push_in(conn, "s", {"n": 1})
        conn.commit()
        with pytest.raises(psycopg.Error) as refused:
            push_in(conn, "s", {"n": 2})
        assert refused.value.sqlstate == QUOTA_SQLSTATE
        conn.rollback()
        [(n,)] = conn.execute("SELECT count(*) FROM leads WHERE session = 's'").fetchall()
        assert n == 1


def test_concurrent_producer_transactions_never_pass_the_bound(queue_url: str) -> None:
    """Eight producers, each pushing leads one by one in transactions of three through
    ``leaseq_push``, against a bound of 10: what commits never passes it."""
    with psycopg.connect(queue_url, autocommit=True) as conn:
        conn.execute("INSERT INTO session_settings (session, max_queued) VALUES ('s', 10)")
    committed: list[int] = []
    start = threading.Barrier(8)

    def producer() -> None:
        with psycopg.connect(queue_url) as conn:
            start.wait()
            for _ in range(4):
                try:
                    for n in range(3):
                        push_in(conn, "s", {"n": n})
                    conn.commit()
                    committed.append(3)
                except psycopg.Error as exc:
                    assert exc.sqlstate in (QUOTA_SQLSTATE, "40P01"), exc  # 40P01: deadlock
                    conn.rollback()

    threads = [threading.Thread(target=producer) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with psycopg.connect(queue_url) as conn:
        [(n,)] = conn.execute("SELECT count(*) FROM leads WHERE session = 's'").fetchall()
    assert n == sum(committed) == 9


@pytest.fixture
def queue_url(database_url: str) -> str:
    return libpq_url(database_url)
