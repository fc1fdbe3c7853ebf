"""Large dependency graphs on a fresh database (tables without statistics, as a new
deployment has), under the service's default statement timeout: a parent with thousands of
dependents cancelled or completed, a chain thousands deep cancelled at its root, and a
fan-in of the largest ``after`` completed in one batch. Each is one statement that changes
every lead below, and each count is checked (revision 0021; the timings are in
bench/README.md, "Dependency graphs")."""

from __future__ import annotations

import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.limits import MAX_AFTER
from leaseq.model import CompleteItem, NewLead
from tests.support import fetch, lease_from

WIDE = 3000
DEEP = 2000
BELOW_FAN_IN = 500


@pytest.fixture
def settings() -> Settings:
    """The service's defaults: its statement timeout, which the old plans passed."""
    return Settings(pool_size=4)


async def push_all(queue: Queue, session: str, leads: list[NewLead]) -> list[int]:
    ids: list[int] = []
    for start in range(0, len(leads), 1000):
        ids += (await queue.push(session, leads[start : start + 1000])).ids
    return ids


async def fan_out(queue: Queue) -> int:
    [parent] = (await queue.push("s", [NewLead({})])).ids
    await push_all(queue, "s", [NewLead({"i": i}, after=[parent]) for i in range(WIDE)])
    assert (await queue.stats("s")).blocked == WIDE
    return parent


async def test_cancelling_a_parent_fails_its_thousands_of_dependents(
    queue: Queue, db: Database
) -> None:
    parent = await fan_out(queue)
    await queue.cancel(parent)
    stats = await queue.stats("s")
    assert (stats.queued, stats.blocked, stats.failed) == (0, 0, WIDE + 1)
    [row] = await fetch(
        db,
        "SELECT count(*) AS n, count(DISTINCT error) AS errors, min(error) AS error "
        "FROM leads WHERE id <> %(parent)s",
        parent=parent,
    )
    assert (row["n"], row["errors"], row["error"]) == (WIDE, 1, f"dependency {parent} failed")
    [events] = await fetch(
        db,
        "SELECT count(*) AS n FROM lead_events WHERE event = 'failed' AND lead_id <> %(parent)s",
        parent=parent,
    )
    assert events["n"] == WIDE


async def test_completing_a_parent_makes_its_thousands_of_dependents_available(
    queue: Queue,
) -> None:
    parent = await fan_out(queue)
    [lease] = (await lease_from(queue, "s", "w")).leases
    await queue.complete(parent, lease.token)
    stats = await queue.stats("s")
    assert (stats.queued, stats.blocked, stats.done) == (WIDE, 0, 1)
    assert len((await lease_from(queue, "s", "w", max=100)).leases) == 100


async def test_cancelling_the_root_of_a_chain_fails_the_whole_chain(queue: Queue) -> None:
    ids: list[int] = []
    for start in range(0, DEEP, 1000):
        leads = [
            NewLead({}, key=f"c{i}", after=[] if i == 0 else [{"key": f"c{i - 1}"}])
            if i > start or i == 0
            else NewLead({}, key=f"c{i}", after=[ids[-1]])
            for i in range(start, min(DEEP, start + 1000))
        ]
        ids += (await queue.push("s", leads)).ids
    assert (await queue.stats("s")).blocked == DEEP - 1
    await queue.cancel(ids[0])
    stats = await queue.stats("s")
    assert (stats.queued, stats.blocked, stats.failed) == (0, 0, DEEP)
    assert (await queue.get(ids[-1])).error == f"dependency {ids[-2]} failed"


async def test_a_fan_in_of_the_largest_after_is_released_by_one_batch(queue: Queue) -> None:
    parents = await push_all(queue, "s", [NewLead({}) for _ in range(MAX_AFTER)])
    await push_all(queue, "s", [NewLead({}, after=parents) for _ in range(BELOW_FAN_IN)])
    leases = (await lease_from(queue, "s", "w", max=MAX_AFTER)).leases
    assert len(leases) == MAX_AFTER
    answers = await queue.complete_many([CompleteItem(x.lead.id, x.token) for x in leases])
    assert all(answer.ok for answer in answers)
    stats = await queue.stats("s")
    assert (stats.queued, stats.blocked, stats.done) == (BELOW_FAN_IN, 0, MAX_AFTER)
