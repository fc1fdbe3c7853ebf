"""A completion with ``next`` (``Leasing.complete_and_lease``): one statement for a session
without limits, the completion's CTE gating the lease's; the two steps otherwise.

Each case says which statements ran, so a path that took a second round trip shows, and
what the database holds after: a refused completion leases nothing, a limited or paused
session keeps its limits, and many workers completing and leasing at once never hold one
lead twice.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import pytest

from app.domain.queue import Queue
from app.leasing.request import LeaseRequest
from leaseq.errors import InvalidInput, LeaseLost
from leaseq.model import CompleteItem, Counts, Lease, SessionSettings
from tests.integration.test_concurrency import push_all, queues, within_deadline
from tests.support import T0, at, fetch, leads, leasing_of, statements_run

WORKERS = 16
LEADS = 400


def next_of(session: str = "s", **fields: Any) -> LeaseRequest:
    return LeaseRequest.checked("w", session=session, **fields)


async def leased_one(queue: Queue, session: str = "s") -> Lease:
    [lease] = await leasing_of(queue).lease_next(session, "w", ttl_s=60, now=T0)
    return lease


def done(lease: Lease, **fields: Any) -> CompleteItem:
    return CompleteItem(lease.lead.id, lease.token, **fields)


async def test_a_completion_and_its_next_lease_are_one_statement(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    await queue.push("s", leads(3), now=T0)
    held = await leased_one(queue)
    ran = statements_run(monkeypatch)
    lead, leases = await leasing_of(queue).complete_and_lease(
        done(held, result={"ok": 1}), next_of(max=2, ttl_s=30), now=at(1)
    )
    assert ran == ["complete_and_lease"]
    assert (lead.id, lead.status, lead.result) == (held.lead.id, "done", {"ok": 1})
    assert [lease.lead.id for lease in leases] == [held.lead.id + 1, held.lead.id + 2]
    assert {(lease.attempt, lease.ttl_s, lease.owner) for lease in leases} == {(1, 30, "w")}
    assert await queue.stats("s") == Counts(leased=2, done=1)
    ledger = await fetch(queue.db, "SELECT lead_id, event FROM lead_events ORDER BY id")
    assert {
        lead_id: [e["event"] for e in ledger if e["lead_id"] == lead_id]
        for lead_id in (held.lead.id, held.lead.id + 1, held.lead.id + 2)
    } == {
        held.lead.id: ["pushed", "leased", "completed"],
        held.lead.id + 1: ["pushed", "leased"],
        held.lead.id + 2: ["pushed", "leased"],
    }


async def test_a_refused_completion_leases_nothing(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    await queue.push("s", leads(3), now=T0)
    held = await leased_one(queue)
    ran = statements_run(monkeypatch)
    for wrong in (CompleteItem(held.lead.id, "not-the-token"), done(held)):
        at_s = 1 if wrong.token != held.token else 120  # the second: its lease has expired
        with pytest.raises(LeaseLost):
            await leasing_of(queue).complete_and_lease(wrong, next_of(max=2), now=at(at_s))
    assert "lease_next" not in ran and "lease_group" not in ran
    assert await queue.stats("s") == Counts(queued=2, leased=1)


async def test_a_completion_sent_again_is_answered_and_leases(queue: Queue) -> None:
    """The answer of the first was lost: the same completion again is answered as it was,
    and its ``next`` leases (as the two requests it stands for would)."""
    await queue.push("s", leads(3), now=T0)
    held = await leased_one(queue)
    first, _ = await leasing_of(queue).complete_and_lease(done(held), next_of(), now=at(1))
    again, leases = await leasing_of(queue).complete_and_lease(done(held), next_of(), now=at(2))
    assert again == first
    assert len(leases) == 1 and await queue.stats("s") == Counts(leased=2, done=1)


async def test_a_keyed_next_sent_again_gets_the_same_leases(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    await queue.push("s", leads(4), now=T0)
    held = await leased_one(queue)
    request = next_of(max=2, ttl_s=30, idempotency_key="next-1")
    ran = statements_run(monkeypatch)
    _, first = await leasing_of(queue).complete_and_lease(done(held), request, now=at(1))
    assert ran == ["complete_and_lease"]
    [key] = await fetch(queue.db, "SELECT answer FROM idempotency_keys WHERE key = 'next-1'")
    assert key["answer"]["leases"] == [[lease.lead.id, lease.token] for lease in first]
    _, again = await leasing_of(queue).complete_and_lease(done(held), request, now=at(2))
    assert [lease.token for lease in again] == [lease.token for lease in first]
    assert await queue.stats("s") == Counts(queued=1, leased=2, done=1)


async def test_a_limited_session_completes_in_one_statement_and_leases_under_its_cap(
    queue: Queue,
) -> None:
    await queue.put_settings("s", SessionSettings(max_leased=2), now=T0)
    await queue.push("s", leads(5), now=T0)
    held = await leased_one(queue)
    lead, leases = await leasing_of(queue).complete_and_lease(done(held), next_of(max=5), now=at(1))
    assert lead.status == "done" and len(leases) == 2  # the cap, with the completed lead gone
    assert await queue.stats("s") == Counts(queued=2, leased=2, done=1)


async def test_a_paused_session_completes_and_leases_nothing(queue: Queue) -> None:
    await queue.push("s", leads(3), now=T0)
    held = await leased_one(queue)
    await queue.pause("s", now=at(1))
    lead, leases = await leasing_of(queue).complete_and_lease(done(held), next_of(), now=at(2))
    assert lead.status == "done" and leases == []
    assert await queue.stats("s") == Counts(queued=2, done=1)


async def test_next_of_another_session_leases_there(queue: Queue) -> None:
    await queue.push("a", leads(1), now=T0)
    await queue.push("b", leads(1), now=T0)
    held = await leased_one(queue, "a")
    lead, [lease] = await leasing_of(queue).complete_and_lease(done(held), next_of("b"), now=at(1))
    assert (lead.session, lead.status, lease.lead.session) == ("a", "done", "b")


async def test_a_key_of_another_request_completes_nothing_in_either_way(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key that named another request (here a lease of session a) refuses a completion with
    next, in one statement (a next of one session) or in two steps (a next across sessions;
    on one PostgreSQL a key is one whatever its session): InvalidInput, the lead still held,
    its ledger unchanged. An unkeyed completion reads no key."""
    await queue.push("a", leads(2), now=T0)
    await queue.push("s", leads(2), now=T0)
    held = await leased_one(queue)
    leasing = leasing_of(queue)
    await leasing.lease(LeaseRequest.checked("w", session="a", idempotency_key="k"), now=T0)
    ran = statements_run(monkeypatch)
    for request in (
        next_of(idempotency_key="k"),
        LeaseRequest.checked("w", sessions=["a", "s"], idempotency_key="k"),
    ):
        with pytest.raises(InvalidInput, match="another request"):
            await leasing.complete_and_lease(done(held), request, now=at(1))
    assert "complete_many" not in ran and "remembered_anywhere" in ran
    assert (await queue.get(held.lead.id)).status == "leased"
    events = await fetch(queue.db, f"SELECT event FROM lead_events WHERE lead_id = {held.lead.id}")
    assert [row["event"] for row in events] == ["pushed", "leased"]
    ran.clear()
    lead, _ = await leasing.complete_and_lease(done(held), next_of(), now=at(1))
    assert lead.status == "done" and ran == ["complete_and_lease"]


@pytest.mark.timeout(120)
async def test_workers_completing_and_leasing_at_once_run_each_lead_once(
    queue: Queue, database_url: str
) -> None:
    """16 workers, each on a connection of its own, each completion bringing the next lease:
    every lead leased once and completed once, and no lead is held by two at a time (each
    lead's ledger reads leased, completed)."""
    pushed = await push_all(queue, "s", LEADS)

    async def work(q: Queue, owner: str) -> list[int]:
        finished: list[int] = []
        leases = await leasing_of(q).lease_next("s", owner, ttl_s=600, now=at(1))
        while leases:
            [lease] = leases
            request = LeaseRequest.checked(owner, session="s", ttl_s=600)
            lead, leases = await leasing_of(q).complete_and_lease(done(lease), request, now=at(2))
            finished.append(lead.id)
        return finished

    async with queues(database_url, WORKERS) as workers:
        per_worker = await within_deadline(*(work(q, f"w{i}") for i, q in enumerate(workers)))
    finished = [lead_id for ids in per_worker for lead_id in ids]
    assert sorted(finished) == sorted(pushed)
    assert sum(1 for ids in per_worker if ids) > 1
    assert await queue.stats("s") == Counts(done=LEADS)
    rows = await fetch(
        queue.db, "SELECT lead_id, event FROM lead_events WHERE event <> 'pushed' ORDER BY id"
    )
    by_lead: dict[int, list[str]] = {}
    for row in rows:
        by_lead.setdefault(row["lead_id"], []).append(row["event"])
    assert Counter(tuple(events) for events in by_lead.values()) == {("leased", "completed"): LEADS}


async def test_concurrent_completions_of_one_lease_complete_it_once(queue: Queue) -> None:
    """The same completion sent twice at once (a retry racing its original): one completes
    and leases; the other is answered as completed, and its ``next`` leases too."""
    await queue.push("s", leads(5), now=T0)
    held = await leased_one(queue)
    answers = await asyncio.gather(
        *(leasing_of(queue).complete_and_lease(done(held), next_of(), now=at(1)) for _ in "ab")
    )
    assert [lead.status for lead, _ in answers] == ["done", "done"]
    assert sorted(len(leases) for _, leases in answers) == [1, 1]
    completions = await fetch(queue.db, "SELECT FROM lead_events WHERE event = 'completed'")
    assert len(completions) == 1
    assert await queue.stats("s") == Counts(queued=2, leased=2, done=1)
