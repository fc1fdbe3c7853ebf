"""Idempotency keys of push and lease (``app.domain.idempotency``): one intent, one effect.

A retried request with its key gets the first answer back, however the
retries fall: after the first committed, while it still runs (concurrently),
or with another body (refused).
"""

from __future__ import annotations

import asyncio

import psycopg
import pytest

from app.domain import idempotency
from app.domain.queue import Queue
from app.store import statements
from app.store.pool import libpq_url
from leaseq.errors import InvalidInput
from leaseq.model import NewLead, SessionSettings
from tests.support import (
    T0,
    across,
    at,
    events,
    fetch,
    leads,
    leasing_of,
    statements_run,
)
from tests.support.in_process import until


async def _count(queue: Queue, table: str) -> int:
    [found] = await fetch(queue.db, f"SELECT count(*) AS n FROM {table}")
    return int(found["n"])


# -- push --------------------------------------------------------------------


async def test_a_push_sent_again_with_its_key_pushes_once(queue: Queue) -> None:
    first = await queue.push("s", leads(3), idempotency_key="p-1", now=T0)
    again = await queue.push("s", leads(3), idempotency_key="p-1", now=at(1))
    assert again == first and first.created == 3
    assert await _count(queue, "leads") == 3
    assert [e["event"] for e in await events(queue.db)] == ["pushed"] * 3
    other = await queue.push("s", leads(3), idempotency_key="p-2", now=at(2))
    assert other.created == 3 and set(other.ids).isdisjoint(first.ids)  # a new key, a new push


async def test_a_key_sent_with_another_request_is_refused(queue: Queue) -> None:
    await queue.push("s", leads(1), idempotency_key="k", now=T0)
    for session, batch in (("s", leads(2)), ("t", leads(1)), ("s", [NewLead({"i": 9})])):
        with pytest.raises(InvalidInput, match="Idempotency-Key"):
            await queue.push(session, batch, idempotency_key="k", now=T0)
    assert await _count(queue, "leads") == 1


@pytest.mark.parametrize("key", ["", " ", "a b", "x" * 256, "é", "tab\\t".replace("\\t", "\t")])
async def test_a_malformed_key_is_refused_before_anything_is_written(
    queue: Queue, key: str
) -> None:
    with pytest.raises(InvalidInput, match="Idempotency-Key"):
        await queue.push("s", leads(1), idempotency_key=key, now=T0)
    with pytest.raises(InvalidInput, match="Idempotency-Key"):
        await leasing_of(queue).lease_next("s", "w", idempotency_key=key, now=T0)
    assert await _count(queue, "leads") == await _count(queue, "idempotency_keys") == 0


async def test_concurrent_pushes_with_one_key_push_once_and_answer_alike(queue: Queue) -> None:
    """A retry that overtakes its first try waits for it, then gets its answer."""
    answers = await asyncio.gather(
        *(queue.push("s", leads(50), idempotency_key="same") for _ in range(8))
    )
    assert all(answer == answers[0] for answer in answers)
    assert answers[0].created == 50
    assert await _count(queue, "leads") == 50


async def test_a_push_that_fails_leaves_its_key_free(queue: Queue) -> None:
    [parent] = (await queue.push("s", leads(1), now=T0)).ids
    await fetch(queue.db, "ALTER TABLE leads ADD CONSTRAINT no_deep CHECK (depth < 5)")
    with pytest.raises(Exception, match="no_deep"):
        await queue.push("s", [NewLead({}, depth=9)], idempotency_key="k", now=T0)
    assert await _count(queue, "idempotency_keys") == 0
    await fetch(queue.db, "ALTER TABLE leads DROP CONSTRAINT no_deep")
    pushed = await queue.push("s", [NewLead({}, depth=9)], idempotency_key="k", now=T0)
    assert pushed.created == 1 and pushed.ids[0] > parent


# -- lease -------------------------------------------------------------------


async def test_a_lease_sent_again_with_its_key_gets_the_same_leases(queue: Queue) -> None:
    await queue.push("s", leads(5, max_attempts=1), now=T0)
    first = await leasing_of(queue).lease_next(
        "s", "w", max=3, ttl_s=30, idempotency_key="l-1", now=T0
    )
    again = await leasing_of(queue).lease_next(
        "s", "w", max=3, ttl_s=30, idempotency_key="l-1", now=at(1)
    )
    assert [(x.lead.id, x.token, x.attempt, x.ttl_s) for x in again] == [
        (x.lead.id, x.token, 1, 30) for x in first
    ]
    assert [e["event"] for e in await events(queue.db)].count("leased") == 3  # no second lease
    # A lease the holder finished meanwhile is no longer handed back.
    await queue.complete(first[0].lead.id, first[0].token, now=at(2))
    later = await leasing_of(queue).lease_next(
        "s", "w", max=3, ttl_s=30, idempotency_key="l-1", now=at(3)
    )
    assert [x.token for x in later] == [x.token for x in first[1:]]
    # Nor one that expired: the key never takes new leads.
    assert (
        await leasing_of(queue).lease_next(
            "s", "w", max=3, ttl_s=30, idempotency_key="l-1", now=at(30)
        )
        == []
    )
    assert await queue.stats("s") == type(await queue.stats("s"))(queued=2, leased=2, done=1)


async def test_a_lease_that_took_nothing_leaves_its_key_free(queue: Queue) -> None:
    assert await leasing_of(queue).lease_next("s", "w", idempotency_key="k", now=T0) == []
    assert await _count(queue, "idempotency_keys") == 0
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", idempotency_key="k", now=at(1))
    assert lease.attempt == 1


async def test_a_lease_key_sent_with_another_request_is_refused(queue: Queue) -> None:
    await queue.push("s", leads(3), now=T0)
    await leasing_of(queue).lease_next("s", "w", idempotency_key="k", now=T0)
    for kwargs in ({"max": 2}, {"ttl_s": 5.0}, {"owner": "v"}):
        request = {"owner": "w", **kwargs}
        owner = str(request.pop("owner"))
        with pytest.raises(InvalidInput, match="Idempotency-Key"):
            await leasing_of(queue).lease_next("s", owner, idempotency_key="k", now=T0, **request)  # type: ignore[arg-type]
    assert (await queue.stats("s")).leased == 1


async def test_concurrent_leases_with_one_key_lease_once(queue: Queue) -> None:
    await queue.push("s", leads(20, max_attempts=1), now=T0)
    answers = await asyncio.gather(
        *(
            leasing_of(queue).lease_next(
                "s", "w", max=2, ttl_s=60, idempotency_key="same", now=at(1)
            )
            for _ in range(8)
        )
    )
    tokens = {tuple(lease.token for lease in answer) for answer in answers}
    assert len(tokens) == 1 and len(next(iter(tokens))) == 2
    assert (await queue.stats("s")).leased == 2


async def test_push_and_lease_keys_are_apart(queue: Queue) -> None:
    pushed = await queue.push("s", leads(1), idempotency_key="same", now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", idempotency_key="same", now=T0)
    assert lease.lead.id == pushed.ids[0]


# -- a keyed lease in one statement ---------------------------------------------------------


@pytest.fixture
def ran(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    return statements_run(monkeypatch)


async def test_a_keyed_lease_is_one_statement_that_stores_its_answer(
    queue: Queue, ran: list[str]
) -> None:
    await queue.push("s", leads(3), now=T0)
    ran.clear()
    first = await leasing_of(queue).lease_next("s", "w", max=2, idempotency_key="one", now=T0)
    assert len(first) == 2 and ran == ["lease_keyed"]
    [key] = await fetch(queue.db, "SELECT answer FROM idempotency_keys WHERE key = 'one'")
    assert key["answer"]["leases"] == [[lease.lead.id, lease.token] for lease in first]
    ran.clear()
    again = await leasing_of(queue).lease_next("s", "w", max=2, idempotency_key="one", now=at(1))
    assert [x.token for x in again] == [x.token for x in first]
    assert ran == ["lease_keyed", "valid_leases"]  # the key's answer, then what is still held


async def test_a_keyed_lease_of_a_limited_session_goes_under_its_lock(
    queue: Queue, ran: list[str]
) -> None:
    await queue.put_settings("s", SessionSettings(max_leased=2), now=T0)
    await queue.push("s", leads(5), now=T0)
    ran.clear()
    first = await leasing_of(queue).lease_next("s", "w", max=5, idempotency_key="cap", now=T0)
    assert len(first) == 2  # the cap holds for a keyed lease too
    assert ran[0] == "lease_keyed" and "lease_limited" in ran
    again = await leasing_of(queue).lease_next("s", "w", max=5, idempotency_key="cap", now=at(1))
    assert [x.token for x in again] == [x.token for x in first]
    assert (await queue.stats("s")).leased == 2


async def test_a_keyed_lease_that_overtakes_its_first_try_gets_that_try_s_leases(
    queue: Queue, database_url: str
) -> None:
    """The first try's statement still runs (its transaction open) when the retry comes: the
    retry's key waits on it, fails once it commits, and reads the first try's answer."""
    await queue.push("s", leads(4), now=T0)
    request = leasing_of(queue).lease_next
    asked = idempotency.fingerprint({"session": "s", "owner": "w", "max": 2, "ttl_s": 30.0})
    tokens = ["first-1", "first-2"]
    first_try = statements.lease_keyed(
        session="s",
        max=2,
        owner="w",
        tokens=tokens,
        ttl_s=30.0,
        key="race",
        key_session="s",
        request=asked,
        now=T0,
        ledger=True,
    )
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as first:
        async with first.transaction():
            await first.execute(first_try.text, first_try.params)
            retry = asyncio.create_task(
                request("s", "w", max=2, ttl_s=30.0, idempotency_key="race", now=at(1))
            )

            async def waiting_on_the_key() -> bool:
                lock = "SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                return bool(await fetch(queue.db, lock + " AND datname = current_database()"))

            await until(waiting_on_the_key, within_s=10)
            assert not retry.done()
        leases = await asyncio.wait_for(retry, 10)
    assert sorted(lease.token for lease in leases) == tokens
    assert (await queue.stats("s")).leased == 2


async def test_a_keyed_lease_across_sessions_sent_again_gets_its_leases_back(
    queue: Queue,
) -> None:
    """The first try took the only lead: its session shows no work when the retry comes, so
    the retry chooses no session, and still gets the lease back from the key."""
    await queue.push("a1", leads(1), now=T0)
    leasing = leasing_of(queue)
    request = across(None, "w", idempotency_key="fleet-1", ttl_s=60)
    [first] = await leasing.lease(request, now=T0)
    await leasing.fleet.read()  # the view now says a1 has nothing available
    [again] = await leasing.lease(request, now=at(1))
    assert (again.lead.id, again.token) == (first.lead.id, first.token)
    with pytest.raises(InvalidInput, match="Idempotency-Key"):
        await leasing.lease(across(None, "v", idempotency_key="fleet-1"), now=at(2))
    assert await leasing.lease(across(None, "w", idempotency_key="fleet-2"), now=at(2)) == []


async def test_a_push_key_stored_before_the_newer_fields_names_the_same_request(
    queue: Queue,
) -> None:
    """A key stored by a version whose leads had only the first fields (before flow control,
    trace context and dependencies) and retried after an upgrade is the same request."""
    old_lead = {"payload": {"n": 1}, "priority": 0, "key": None, "depth": 0}
    old_lead |= {"parent_id": None, "max_attempts": None, "delay_s": 0.0}
    stored = idempotency.fingerprint({"session": "s", "leads": [old_lead]})
    answer = '{"ids": [41], "created": 1, "duplicates": 0}'
    await fetch(
        queue.db,
        "INSERT INTO idempotency_keys (verb, key, request, created_at, answer) "
        "VALUES ('push', 'before-upgrade', %(stored)s, now(), %(answer)s::jsonb) RETURNING key",
        stored=stored,
        answer=answer,
    )
    again = await queue.push("s", [NewLead({"n": 1})], idempotency_key="before-upgrade")
    assert again.ids == [41]
    with pytest.raises(InvalidInput, match="Idempotency-Key"):
        await queue.push(
            "s", [NewLead({"n": 1}, concurrency_key="c")], idempotency_key="before-upgrade"
        )
