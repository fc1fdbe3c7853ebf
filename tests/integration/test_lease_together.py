"""Keyed leases and completions with ``next`` of one session, grouped (``app.leasing.together``,
``statements.lease_together``): the calls that arrive while one of theirs runs share the
next statement, and each caller gets what its call alone would have got.

Calls sent at once through one ``Leasing`` (one API process) go together: the grouper sends
what waits when its task first runs. Each case says which statements ran.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import psycopg
import pytest

from app.domain import idempotency
from app.domain.queue import Queue
from app.leasing.entry import Leasing
from app.leasing.request import LeaseRequest
from app.store import statements
from app.store.pool import libpq_url
from leaseq.errors import InvalidInput, LeaseLost
from leaseq.model import CompleteItem, Counts, Lease, SessionSettings
from tests.integration.test_concurrency import push_all
from tests.support import T0, at, fetch, leads, statements_run
from tests.support.in_process import until


def keyed(key: str | None, **fields: Any) -> LeaseRequest:
    return LeaseRequest.checked("w", session="s", ttl_s=60, idempotency_key=key, **fields)


async def held(leasing: Leasing, n: int) -> list[Lease]:
    """``n`` leases of session s, highest priority first."""
    return await leasing.lease_next("s", "w", max=n, ttl_s=60, now=T0)


def done(lease: Lease, **fields: Any) -> CompleteItem:
    return CompleteItem(lease.lead.id, lease.token, **fields)


async def events_of(queue: Queue, lead_id: int) -> list[str]:
    rows = await fetch(
        queue.db, f"SELECT event FROM lead_events WHERE lead_id = {lead_id} ORDER BY at, id"
    )
    return [row["event"] for row in rows]


async def test_completions_sent_at_once_share_one_statement_each_its_own_leases(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Five keyed completions with next in one statement, served in their order (the first
    gets the best lead), each key storing its own leases, and each lead's ledger in order."""
    await queue.push("s", leads(5), now=T0)
    await queue.push("s", leads(5, priority=9), now=T0)  # the best leads
    leasing = Leasing(queue)
    holding = await held(leasing, 5)
    ran = statements_run(monkeypatch)
    answers = await asyncio.gather(
        *(
            leasing.complete_and_lease(done(lease), keyed(f"k{i}"), now=at(1))
            for i, lease in enumerate(holding)
        )
    )
    assert ran == ["lease_together"]
    assert [lead.id for lead, _ in answers] == [lease.lead.id for lease in holding]
    taken = [lease for _, leases in answers for lease in leases]
    assert [len(leases) for _, leases in answers] == [1, 1, 1, 1, 1]
    # Leased in priority order: the first caller first, then the group in its order.
    best = sorted((lease for lease in taken), key=lambda x: (-x.lead.priority, x.lead.id))
    assert taken == best and len({lease.lead.id for lease in taken}) == 5
    keys = await fetch(queue.db, "SELECT key, answer FROM idempotency_keys ORDER BY key")
    assert {row["key"]: row["answer"]["leases"] for row in keys} == {
        f"k{i}": [[leases[0].lead.id, leases[0].token]] for i, (_, leases) in enumerate(answers)
    }
    assert await queue.stats("s") == Counts(done=5, leased=5)
    for lease in holding:
        assert await events_of(queue, lease.lead.id) == ["pushed", "leased", "completed"]
    for lease in taken:
        assert await events_of(queue, lease.lead.id) == ["pushed", "leased"]
    assert leasing.sessions._together.grouped == 5


async def test_in_one_group_a_refused_completion_leases_nothing_and_a_retried_key_gets_its_answer(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One statement for: a completion (leases), a completion with a wrong token (LeaseLost,
    nothing leased), a keyed lease (leases) and a keyed lease sent again (the first try's
    leases back, nothing new)."""
    await queue.push("s", leads(10), now=T0)
    leasing = Leasing(queue)
    first, good, _ = await held(leasing, 3)
    retried = keyed("again", max=2)
    before = await leasing.lease(retried, now=T0)
    ran = statements_run(monkeypatch)

    async def refused() -> None:
        with pytest.raises(LeaseLost):
            await leasing.complete_and_lease(
                CompleteItem(good.lead.id + 1, "not-its-token"), keyed("b"), now=at(1)
            )

    _, (_, [a]), _, d, again = await asyncio.gather(
        leasing.complete_and_lease(done(first), keyed("x"), now=at(1)),
        leasing.complete_and_lease(done(good), keyed("a"), now=at(1)),
        refused(),
        leasing.lease(keyed("d"), now=at(1)),
        leasing.lease(retried, now=at(1)),
    )
    assert ran[0] == "lease_together"
    assert "lease_keyed" not in ran and "lease_next" not in ran  # nobody leased on their own
    assert [lease.token for lease in again] == [lease.token for lease in before]
    assert len(d) == 1 and a.lead.id not in {x.lead.id for x in [*d, *before]}
    keys = {row["key"] for row in await fetch(queue.db, "SELECT key FROM idempotency_keys")}
    assert keys == {"again", "x", "a", "d"}  # the refused caller's key stays free
    assert await queue.stats("s") == Counts(done=2, leased=1 + 2 + 2 + 1, queued=2)


async def test_in_one_group_a_key_used_for_another_request_completes_nothing(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A completion with next whose key a committed request holds for another request,
    grouped with others: its lead is not completed (its 422 changes nothing), while the
    others of its statement complete and lease; nothing is written under its key."""
    await queue.push("s", leads(8), now=T0)
    leasing = Leasing(queue)
    first, second, third = await held(leasing, 3)
    [kept] = await leasing.lease(keyed("used", max=1), now=T0)  # the key's first request
    ran = statements_run(monkeypatch)

    async def refused() -> None:
        with pytest.raises(InvalidInput, match="another request"):
            await leasing.complete_and_lease(done(second), keyed("used", max=2), now=at(1))

    (_, [a]), _, (_, [c]) = await asyncio.gather(
        leasing.complete_and_lease(done(first), keyed("a"), now=at(1)),
        refused(),
        leasing.complete_and_lease(done(third), keyed("c"), now=at(1)),
    )
    assert ran[0] == "lease_together" and "complete_many" not in ran
    assert await events_of(queue, second.lead.id) == ["pushed", "leased"]
    assert (await queue.get(second.lead.id)).status == "leased"
    answers = await fetch(queue.db, "SELECT answer FROM idempotency_keys WHERE key = 'used'")
    assert [row["answer"]["leases"] for row in answers] == [[[kept.lead.id, kept.token]]]
    assert await queue.stats("s") == Counts(done=2, leased=4, queued=2)  # second, kept, a, c
    # The holder's lease stands: completed under a key of its own, it leases.
    lead, [_] = await leasing.complete_and_lease(done(second), keyed("b"), now=at(2))
    assert lead.status == "done" and {a.lead.id, c.lead.id}.isdisjoint({kept.lead.id})


async def test_a_limited_session_completes_in_the_group_and_leases_under_its_cap(
    queue: Queue,
) -> None:
    await queue.push("s", leads(12), now=T0)
    leasing = Leasing(queue)
    holding = await held(leasing, 4)
    await queue.put_settings("s", SessionSettings(max_leased=5), now=T0)
    answers = await asyncio.gather(
        *(
            leasing.complete_and_lease(done(lease), keyed(f"k{i}", max=2), now=at(1))
            for i, lease in enumerate(holding)
        )
    )
    assert [lead.status for lead, _ in answers] == ["done"] * 4
    assert sum(len(leases) for _, leases in answers) == 5  # the cap, the completed ones gone
    assert await queue.stats("s") == Counts(done=4, leased=5, queued=3)


async def test_a_completion_whose_row_another_transaction_holds_does_not_hold_up_its_group(
    queue: Queue, database_url: str
) -> None:
    """The group skips the held row: its caller completes on its own once the row is free,
    while the others of its group are answered meanwhile."""
    await queue.push("s", leads(6), now=T0)
    leasing = Leasing(queue)
    first, blocked, free = await held(leasing, 3)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as other:
        async with other.transaction():
            await other.execute("SELECT FROM leads WHERE id = %s FOR UPDATE", [blocked.lead.id])
            calls = [
                asyncio.create_task(leasing.complete_and_lease(done(lease), keyed(None), now=at(1)))
                for lease in (first, blocked, free)
            ]
            await asyncio.wait_for(asyncio.gather(calls[0], calls[2]), 10)
            assert not calls[1].done()
        lead, leases = await asyncio.wait_for(calls[1], 10)
    assert lead.status == "done" and len(leases) == 1
    assert await queue.stats("s") == Counts(done=3, leased=3)


async def test_a_group_whose_key_another_request_commits_meanwhile_falls_back_whole(
    queue: Queue, database_url: str
) -> None:
    """Another request holds key k (its statement's transaction still open) while a group
    with k runs: the group's statement waits on the key, fails once that commits, and changed
    nothing; each caller then goes its own way, the one with k getting that request's
    leases back."""
    await queue.push("s", leads(8), now=T0)
    leasing = Leasing(queue)
    holding = await held(leasing, 2)
    asked = idempotency.fingerprint(keyed("k").stands_for(60.0))
    other_try = statements.lease_keyed(
        session="s",
        max=1,
        owner="w",
        tokens=["other-1"],
        ttl_s=60.0,
        key="k",
        key_session="s",
        request=asked,
        now=T0,
        ledger=True,
    )
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as other:
        async with other.transaction():
            await other.execute(other_try.text, other_try.params)
            calls = [
                asyncio.create_task(leasing.complete_and_lease(done(lease), keyed(key), now=at(1)))
                for lease, key in zip(holding, ("y", None), strict=True)
            ]
            calls.append(asyncio.create_task(leasing.lease(keyed("k"), now=at(1))))
            calls.append(asyncio.create_task(leasing.lease(keyed("z"), now=at(1))))

            async def waiting_on_the_key() -> bool:
                lock = "SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                return bool(await fetch(queue.db, lock + " AND datname = current_database()"))

            await until(waiting_on_the_key, within_s=10)
            assert not any(call.done() for call in calls)
        answers = await asyncio.wait_for(asyncio.gather(*calls), 10)
    *completions, k, z = answers
    assert [lead.status for lead, _ in completions] == ["done"] * 2
    assert [lease.token for lease in k] == ["other-1"]
    assert len(z) == 1 and all(len(leases) == 1 for _, leases in completions)
    assert await queue.stats("s") == Counts(done=2, leased=1 + 2 + 1, queued=8 - 2 - 4)
    assert leasing.sessions._together.grouped == 4


@pytest.mark.timeout(120)
async def test_sixteen_workers_of_one_process_run_each_lead_once(queue: Queue) -> None:
    """16 workers through one Leasing (one API process), every completion keyed with its
    next: groups form, every lead is leased and completed once, and each lead's ledger reads
    leased, completed."""
    pushed = await push_all(queue, "s", 400)
    leasing = Leasing(queue)

    async def work(owner: str) -> list[int]:
        finished: list[int] = []
        request = LeaseRequest.checked(owner, session="s", ttl_s=600, idempotency_key=owner)
        leases = await leasing.lease(request, now=at(1))
        n = 0
        while leases:
            [lease] = leases
            n += 1
            request = LeaseRequest.checked(
                owner, session="s", ttl_s=600, idempotency_key=f"{owner}-{n}"
            )
            lead, leases = await leasing.complete_and_lease(done(lease), request, now=at(2))
            finished.append(lead.id)
        return finished

    per_worker = await asyncio.gather(*(work(f"w{i}") for i in range(16)))
    finished = [lead_id for ids in per_worker for lead_id in ids]
    assert sorted(finished) == sorted(pushed)
    assert leasing.sessions._together.grouped > 0
    assert await queue.stats("s") == Counts(done=400)
    rows = await fetch(
        queue.db, "SELECT lead_id, event FROM lead_events WHERE event <> 'pushed' ORDER BY id"
    )
    by_lead: dict[int, list[str]] = {}
    for row in rows:
        by_lead.setdefault(row["lead_id"], []).append(row["event"])
    assert Counter(tuple(events) for events in by_lead.values()) == {("leased", "completed"): 400}
