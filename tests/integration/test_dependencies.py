"""Dependencies on real PostgreSQL (docs/contract.md#dependencies): the order they impose,
the exactly-once unblock of a fan-in under concurrent workers, failures down the chain (each
in its lead's ledger once), and every refusal writing nothing."""

from __future__ import annotations

import asyncio

import pytest

from app.domain.queue import Queue
from app.domain.report import report
from app.domain.timeline import timeline
from app.store.pool import Database
from leaseq.errors import InvalidInput
from leaseq.model import NewLead
from tests.support import event_names, fetch, lease_from


async def lease_all(queue: Queue, session: str, owner: str = "w") -> list[int]:
    leased = await lease_from(queue, session, owner, max=100)
    return [lease.lead.id for lease in leased.leases]


async def finish(queue: Queue, session: str, status: str = "done") -> list[int]:
    """Lease every available lead of the session and complete each with ``status``."""
    leased = await lease_from(queue, session, "w", max=100)
    for lease in leased.leases:
        await queue.complete(lease.lead.id, lease.token, status)  # type: ignore[arg-type]
    return sorted(lease.lead.id for lease in leased.leases)


async def test_a_diamond_pushed_in_one_call_leases_in_dependency_order(queue: Queue) -> None:
    top, left, right, bottom = (
        await queue.push(
            "s",
            [
                NewLead({"n": "top"}, key="top"),
                NewLead({"n": "left"}, key="left", after=[{"key": "top"}]),
                NewLead({"n": "right"}, key="right", after=[{"key": "top"}]),
                NewLead({"n": "bottom"}, after=[{"key": "left"}, {"key": "right"}]),
            ],
        )
    ).ids
    assert (await queue.get(bottom)).after == sorted([left, right])
    assert (await queue.get(top)).after == []
    stats = await queue.stats("s")
    assert (stats.queued, stats.blocked, stats.pending) == (4, 3, 4)
    assert await finish(queue, "s") == [top]
    assert await finish(queue, "s") == [left, right]
    assert (await queue.stats("s")).blocked == 0
    assert await finish(queue, "s") == [bottom]
    assert await finish(queue, "s") == []
    # A later push may wait on a lead already done: it is available at once.
    [later] = (await queue.push("s", [NewLead({}, after=[top, {"key": "left"}])])).ids
    assert await finish(queue, "s") == [later]


async def test_a_fan_in_of_1000_unblocks_once_under_16_workers(queue: Queue, db: Database) -> None:
    parents = (await queue.push("s", [NewLead({"i": i}) for i in range(1000)])).ids
    child_ids: list[int] = []
    for start in range(0, 1000, 100):  # at most 100 in one lead's after: a chain of joins
        [join] = (await queue.push("s", [NewLead({}, after=parents[start : start + 100])])).ids
        child_ids.append(join)
    [child] = (await queue.push("s", [NewLead({"child": True}, after=child_ids)])).ids
    assert (await queue.stats("s")).blocked == 11
    done: list[int] = []

    async def worker(n: int) -> None:
        while True:
            leased = await lease_from(queue, "s", f"w{n}", max=8)
            if not leased.leases:
                if len(done) >= 1011:
                    return
                await asyncio.sleep(0.01)
                continue
            for lease in leased.leases:
                await queue.complete(lease.lead.id, lease.token, "done")
                done.append(lease.lead.id)

    async with asyncio.timeout(120):
        await asyncio.gather(*(worker(n) for n in range(16)))
    assert sorted(done) == sorted([*parents, *child_ids, child])  # each once
    assert done.index(child) == len(done) - 1
    assert all(
        done.index(join) > max(done.index(p) for p in parents[k * 100 : k * 100 + 100])
        for k, join in enumerate(child_ids)
    )
    [row] = await fetch(
        db, "SELECT status, attempts, waiting_on FROM leads WHERE id = %(id)s", id=child
    )
    assert (row["status"], row["attempts"], row["waiting_on"]) == ("done", 1, 0)
    leased = await fetch(
        db,
        "SELECT count(*) AS n FROM lead_events WHERE lead_id = %(id)s AND event = 'leased'",
        id=child,
    )
    assert leased[0]["n"] == 1


async def test_one_lead_waits_on_1000_completed_by_16_workers_at_once(
    queue: Queue, db: Database
) -> None:
    """The child's counter is decremented by every parent's completion, from 16 connections
    at once, and it is unblocked exactly once, by the last."""
    parents = (await queue.push("s", [NewLead({"i": i}) for i in range(1000)])).ids
    # One lead on all 1000: its after is built over ten pushes of joins above; here the
    # counter itself is stressed: ten leads each waiting on 100 of the same parents.
    joins = [
        (await queue.push("s", [NewLead({"join": k}, after=parents[k * 100 : k * 100 + 100])])).ids[
            0
        ]
        for k in range(10)
    ]
    leases = [
        lease for _ in range(10) for lease in (await lease_from(queue, "s", "w", max=100)).leases
    ]
    assert sorted(lease.lead.id for lease in leases) == parents

    async def complete(chunk: list) -> None:  # type: ignore[type-arg]
        for lease in chunk:
            await queue.complete(lease.lead.id, lease.token, "done")

    await asyncio.gather(*(complete(leases[n::16]) for n in range(16)))
    rows = await fetch(
        db,
        "SELECT id, waiting_on, scheduled FROM leads WHERE id = ANY(%(ids)s) ORDER BY id",
        ids=joins,
    )
    assert [(r["waiting_on"], r["scheduled"]) for r in rows] == [(0, False)] * 10
    assert sorted(await lease_all(queue, "s")) == joins


async def test_a_failed_parent_fails_its_descendants(queue: Queue) -> None:
    a, b, c, d, other = (
        await queue.push(
            "s",
            [
                NewLead({}, key="a", max_attempts=1),
                NewLead({}, key="b", after=[{"key": "a"}]),
                NewLead({}, key="c", after=[{"key": "b"}]),
                NewLead({}, key="d"),
                NewLead({}, after=[{"key": "d"}, {"key": "c"}]),
            ],
        )
    ).ids
    leased = (await lease_from(queue, "s", "w", max=10)).leases
    assert sorted(lease.lead.id for lease in leased) == [a, d]
    [held_a] = [lease for lease in leased if lease.lead.id == a]
    await queue.complete(a, held_a.token, "failed", error="boom")
    for lead_id, parent in ((b, a), (c, b), (other, c)):
        lead = await queue.get(lead_id)
        assert (lead.status, lead.error) == ("failed", f"dependency {parent} failed")
    stats = await queue.stats("s")
    assert (stats.failed, stats.blocked, stats.leased) == (4, 0, 1)
    # A lead pushed after a failed one fails at once.
    [late] = (await queue.push("s", [NewLead({}, after=[a])])).ids
    assert (await queue.get(late)).error == f"dependency {a} failed"


async def test_each_lead_failed_down_the_chain_has_one_failed_event(queue: Queue) -> None:
    """A diamond under a failed parent, a chain below it and a second diamond with a parent
    that is done: each lead failed by the trigger has its ``failed`` event once, at the
    instant its row changed, in its timeline and in the report (the CLI prints the same report:
    tests/integration/test_cli_report.py)."""
    ids = (
        await queue.push(
            "s",
            [
                NewLead({}, key="top", max_attempts=1),
                NewLead({}, key="left", after=[{"key": "top"}]),
                NewLead({}, key="right", after=[{"key": "top"}]),
                NewLead({}, key="bottom", after=[{"key": "left"}, {"key": "right"}]),
                NewLead({}, key="below", after=[{"key": "bottom"}]),
                NewLead({}, key="other"),
                NewLead({}, key="joined", after=[{"key": "other"}, {"key": "bottom"}]),
            ],
        )
    ).ids
    top, left, right, bottom, below, other, joined = ids
    held = (await lease_from(queue, "s", "w", max=10)).leases
    leased = {lease.lead.id: lease for lease in held}
    assert sorted(leased) == [top, other]
    await queue.complete(other, leased[other].token, "done")
    await queue.complete(top, leased[top].token, "failed", error="boom")

    for lead_id in (left, right, bottom, below, joined):
        shown = await timeline(queue, lead_id)
        assert [event.event for event in shown.events] == ["pushed", "failed"], lead_id
        failed = shown.events[-1]
        assert (failed.status, failed.attempt, failed.owner) == ("failed", 0, None)
        assert failed.at == shown.lead.updated_at  # the instant of the statement
        assert shown.lead.error in (f"dependency {parent} failed" for parent in ids)
    assert await event_names(queue.db, top) == ["pushed", "leased", "completed"]
    assert await event_names(queue.db, other) == ["pushed", "leased", "completed"]

    found = await report(queue, "s")
    assert (found.failed, found.completions, found.wasted_attempts) == (5, 2, 0)
    assert (found.leads, found.pushed, found.cancelled) == (7, 7, 0)
    assert not found.breached


async def test_a_lead_pushed_after_a_failed_one_has_its_failed_event(queue: Queue) -> None:
    """Failed at once by its push (the parent failed before): ``pushed``, then ``failed``,
    both at the push's instant; and its own dependents of the same call fail with it."""
    [parent] = (await queue.push("s", [NewLead({})])).ids
    await queue.cancel(parent)
    late, later = (
        await queue.push(
            "s", [NewLead({}, key="late", after=[parent]), NewLead({}, after=[{"key": "late"}])]
        )
    ).ids
    for lead_id, cause in ((late, parent), (later, late)):
        shown = await timeline(queue, lead_id)
        assert [event.event for event in shown.events] == ["pushed", "failed"]
        assert shown.lead.error == f"dependency {cause} failed"
        assert shown.events[-1].at == shown.lead.updated_at
    assert await event_names(queue.db, parent) == ["pushed", "cancelled"]
    assert (await report(queue, "s")).failed == 2


async def test_a_cancelled_parent_fails_its_dependents_in_the_ledger_once(queue: Queue) -> None:
    parent, child, grandchild = (
        await queue.push(
            "s",
            [
                NewLead({}, key="p"),
                NewLead({}, key="c", after=[{"key": "p"}]),
                NewLead({}, after=[{"key": "p"}, {"key": "c"}]),
            ],
        )
    ).ids
    await queue.cancel(parent)
    assert await event_names(queue.db, child) == ["pushed", "failed"]
    assert await event_names(queue.db, grandchild) == ["pushed", "failed"]
    # A retry of the parent revives it alone: nothing more is written for its dependents.
    await queue.retry(parent)
    assert await event_names(queue.db, parent) == ["pushed", "cancelled", "retried"]
    assert await event_names(queue.db, child) == ["pushed", "failed"]


async def test_with_the_ledger_off_a_failure_down_the_chain_writes_nothing(db: Database) -> None:
    """A lead pushed without a ledger has none: the trigger, which cannot read the service's
    setting, writes no row for it either."""
    queue = Queue(db, ledger=False)
    parent, child = (
        await queue.push("s", [NewLead({}, key="p"), NewLead({}, after=[{"key": "p"}])])
    ).ids
    await queue.cancel(parent)
    assert (await queue.get(child)).error == f"dependency {parent} failed"
    assert await fetch(db, "SELECT * FROM lead_events") == []


@pytest.mark.parametrize(
    "after, where",
    [
        ([{"key": "late"}], "leads[1].after[0]"),  # a later lead: it would make a cycle
        ([{"key": "nope"}], "leads[1].after[0]"),
        ([{"key": "mine"}], "leads[1].after[0]"),  # itself
        ([10**12], "leads[1].after[0]"),
    ],
)
async def test_a_bad_reference_pushes_nothing(queue: Queue, after: list, where: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(InvalidInput) as refused:
        await queue.push(
            "s",
            [
                NewLead({}, key="first"),
                NewLead({}, key="mine", after=after),
                NewLead({}, key="late"),
            ],
        )
    assert refused.value.field == where
    assert (await queue.stats("s")).queued == 0


async def test_another_session_s_lead_is_unknown(queue: Queue) -> None:
    [theirs] = (await queue.push("other", [NewLead({})])).ids
    with pytest.raises(InvalidInput, match="no lead"):
        await queue.push("s", [NewLead({}), NewLead({}, after=[theirs])])
    assert (await queue.stats("s")).queued == 0
    assert (await queue.get(theirs)).status == "queued"


async def test_a_cancelled_parent_fails_its_dependents_and_a_retry_revives_it_alone(
    queue: Queue,
) -> None:
    parent, child = (
        await queue.push("s", [NewLead({}, key="p"), NewLead({}, after=[{"key": "p"}])])
    ).ids
    await queue.cancel(parent)
    lead = await queue.get(child)
    assert (lead.status, lead.error) == ("failed", f"dependency {parent} failed")
    await queue.retry(parent)
    assert (await queue.get(parent)).status == "queued"
    assert (await queue.get(child)).status == "failed"
    assert await finish(queue, "s") == [parent]


async def test_a_push_racing_its_parent_s_completion_counts_it_once(queue: Queue) -> None:
    """Each child is pushed while its parent completes: whichever commits first, every child
    ends available, never blocked for ever."""
    parents = (await queue.push("s", [NewLead({"i": i}) for i in range(50)])).ids
    leases = (await lease_from(queue, "s", "w", max=50)).leases

    async def complete_all() -> None:
        for lease in leases:
            await queue.complete(lease.lead.id, lease.token, "done")

    async def push_children() -> list[int]:
        ids = []
        for parent in parents:
            ids += (await queue.push("s", [NewLead({}, after=[parent])])).ids
        return ids

    _, children = await asyncio.gather(complete_all(), push_children())
    assert (await queue.stats("s")).blocked == 0
    assert sorted(await lease_all(queue, "s")) == children


async def test_pruning_a_parent_takes_its_edges(queue: Queue, db: Database) -> None:
    _parent, child = (
        await queue.push("s", [NewLead({}, key="p"), NewLead({}, after=[{"key": "p"}])])
    ).ids
    await finish(queue, "s")
    await finish(queue, "s")
    assert await fetch(db, "SELECT lead_id FROM lead_dependencies") == [{"lead_id": child}]
    await queue.prune(older_than_s=0)
    assert await fetch(db, "SELECT lead_id FROM lead_dependencies") == []
