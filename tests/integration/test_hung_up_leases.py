"""No lead is granted to nobody: a lease taken for a client that hung up meanwhile (its
connection closed while it waited, as a stopping worker cancels its pending long poll) is
given back at once, keyed or not, on the long poll and on a completion's ``next``. ``gone``
is what the route hands the lease: whether its client is still there."""

from __future__ import annotations

from app.domain.queue import Queue
from app.leasing.request import LeaseRequest
from leaseq.model import CompleteItem, NewLead
from tests.support import lease_from, leasing_of


async def hung_up() -> bool:
    return True


def keyed(key: str) -> LeaseRequest:
    return LeaseRequest.checked("w", session="s", max=10, wait_s=5, idempotency_key=key)


async def test_a_keyed_long_poll_whose_client_hung_up_leaves_its_leads_queued(
    queue: Queue,
) -> None:
    await queue.push("s", [NewLead({}) for _ in range(3)])
    assert await leasing_of(queue).lease(keyed("k1"), gone=hung_up) == []
    stats = await queue.stats("s")
    assert (stats.queued, stats.leased) == (3, 0)
    # Its key's retry, if it comes, gets the leases still valid of those it took: none.
    assert await leasing_of(queue).lease(keyed("k1")) == []  # the leases it took: none valid


async def test_a_completion_whose_client_hung_up_leases_nothing_for_it(queue: Queue) -> None:
    await queue.push("s", [NewLead({}) for _ in range(4)])
    [held] = (await lease_from(queue, "s", "w")).leases
    item = CompleteItem(held.lead.id, held.token)
    lead, leases = await leasing_of(queue).complete_and_lease(item, keyed("k2"), gone=hung_up)
    assert lead.status == "done" and leases == []
    stats = await queue.stats("s")
    assert (stats.queued, stats.leased, stats.done) == (3, 0, 1)
