"""Every way a lease is lost, for every operation that needs a valid lease
(docs/contract.md#invariant-2).

Whatever the reason — expired, wrong token, completed, swept, released,
re-leased with a newer attempt, cancelled — renew, complete and release answer
lease_lost, the batch forms answer it per item, and nothing is written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pytest

from app.domain.lease_tokens import mint
from app.domain.queue import Queue
from leaseq.errors import LeaseLost
from leaseq.model import CompleteItem, Counts, ItemResult, RenewItem, SweepResult
from tests.support import T0, TICK, at, events, fetch, leads, leasing_of, row


@dataclass
class Attempt:
    """A lease that is no longer valid, and the instant a worker tries to use it."""

    lead_id: int
    token: str
    now: datetime


Setup = Callable[[Queue], Awaitable[Attempt]]


async def _leased(queue: Queue, max_attempts: int = 5) -> tuple[int, str]:
    await queue.push("s", leads(1, max_attempts=max_attempts), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    assert lease.expires_at == at(10)
    return lease.lead.id, lease.token


async def expired_at_its_instant(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    return Attempt(lead_id, token, at(10))  # valid means now < expires_at


async def expired_long_ago(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    return Attempt(lead_id, token, at(3600))


async def wrong_token(queue: Queue) -> Attempt:
    lead_id, _ = await _leased(queue)
    return Attempt(lead_id, mint("s"), at(1))


async def wrong_lead(queue: Queue) -> Attempt:
    _, token = await _leased(queue)
    [other] = (await queue.push("s", leads(1), now=T0)).ids
    return Attempt(other, token, at(1))


async def unknown_lead(queue: Queue) -> Attempt:
    _, token = await _leased(queue)
    return Attempt(987_654, token, at(1))


async def completed(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.complete(lead_id, token, now=at(1))
    return Attempt(lead_id, token, at(2))


async def completed_as_failed(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.complete(lead_id, token, "failed", error="x", now=at(1))
    return Attempt(lead_id, token, at(2))


async def swept(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=1)
    return Attempt(lead_id, token, at(10))


async def swept_then_clock_reads_earlier(queue: Queue) -> Attempt:
    """The status is re-checked, not only the expiry: a swept lease stays lost."""
    lead_id, token = await _leased(queue)
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=1)
    return Attempt(lead_id, token, at(5))


async def swept_to_failed(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue, max_attempts=1)
    assert await queue.sweep("s", now=at(10)) == SweepResult(failed=1)
    return Attempt(lead_id, token, at(5))


async def re_leased_after_sweep(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.sweep("s", now=at(10))
    [newer] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(10))
    assert (newer.lead.id, newer.attempt) == (lead_id, 2)
    return Attempt(lead_id, token, at(11))  # the newer lease is valid at that instant


async def released(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.release(lead_id, token, now=at(1))
    return Attempt(lead_id, token, at(2))


async def re_leased_after_release(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.release(lead_id, token, now=at(1))
    [newer] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(1))
    assert newer.attempt == 2
    return Attempt(lead_id, token, at(2))


async def cancelled(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.cancel(lead_id, now=at(1))
    return Attempt(lead_id, token, at(2))


async def cancelled_then_retried_and_re_leased(queue: Queue) -> Attempt:
    lead_id, token = await _leased(queue)
    await queue.cancel(lead_id, now=at(1))
    await queue.retry(lead_id, now=at(1))
    [newer] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(1))
    assert newer.attempt == 2
    return Attempt(lead_id, token, at(2))


REASONS: list[Setup] = [
    expired_at_its_instant,
    expired_long_ago,
    wrong_token,
    wrong_lead,
    unknown_lead,
    completed,
    completed_as_failed,
    swept,
    swept_then_clock_reads_earlier,
    swept_to_failed,
    re_leased_after_sweep,
    released,
    re_leased_after_release,
    cancelled,
    cancelled_then_retried_and_re_leased,
]


async def _renew(queue: Queue, a: Attempt) -> None:
    with pytest.raises(LeaseLost):
        await queue.renew(a.lead_id, a.token, 60, now=a.now)


async def _complete(queue: Queue, a: Attempt) -> None:
    with pytest.raises(LeaseLost):
        await queue.complete(a.lead_id, a.token, "done", {"r": 1}, now=a.now)


async def _complete_cached(queue: Queue, a: Attempt) -> None:
    with pytest.raises(LeaseLost):
        await queue.complete(a.lead_id, a.token, "cached", now=a.now)


async def _release(queue: Queue, a: Attempt) -> None:
    with pytest.raises(LeaseLost):
        await queue.release(a.lead_id, a.token, now=a.now)


async def _renew_many(queue: Queue, a: Attempt) -> None:
    answers = await queue.renew_many([RenewItem(a.lead_id, a.token, 60)], now=a.now)
    assert answers == [ItemResult(a.lead_id, False, code="lease_lost")]


async def _complete_many(queue: Queue, a: Attempt) -> None:
    answers = await queue.complete_many([CompleteItem(a.lead_id, a.token)], now=a.now)
    assert answers == [ItemResult(a.lead_id, False, code="lease_lost")]


OPERATIONS = [_renew, _complete, _complete_cached, _release, _renew_many, _complete_many]


async def _snapshot(queue: Queue) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return (
        await fetch(queue.db, "SELECT * FROM leads ORDER BY id"),
        await events(queue.db),
    )


# The same completion sent again (same lease, same status) is not a lost lease: it is a
# retry, answered as the first (test_a_completion_sent_again_answers_as_the_first).
RETRIES = {(completed, _complete), (completed, _complete_many)}
CASES = [
    pytest.param(reason, operation, id=f"{reason.__name__}-{operation.__name__.strip('_')}")
    for reason in REASONS
    for operation in OPERATIONS
    if (reason, operation) not in RETRIES
]


@pytest.mark.parametrize(("reason", "operation"), CASES)
async def test_a_lost_lease_is_refused_and_nothing_changes(
    queue: Queue, reason: Setup, operation: Callable[[Queue, Attempt], Awaitable[None]]
) -> None:
    attempt = await reason(queue)
    before = await _snapshot(queue)
    await operation(queue, attempt)
    assert await _snapshot(queue) == before


@pytest.mark.parametrize("status", ["done", "failed", "cached"])
async def test_a_completion_sent_again_answers_as_the_first_and_changes_nothing(
    queue: Queue, status: str
) -> None:
    """A worker whose answer was lost sends it again and gets the same lead
    (docs/contract.md#complete)."""
    lead_id, token = await _leased(queue)
    first = await queue.complete(lead_id, token, status, {"n": 1}, "e", now=at(1))  # type: ignore[arg-type]
    before = await _snapshot(queue)
    again = await queue.complete(lead_id, token, status, {"n": 2}, now=at(2))  # type: ignore[arg-type]
    assert again == first and again.result == {"n": 1}
    [item] = await queue.complete_many([CompleteItem(lead_id, token, status)], now=at(3))  # type: ignore[arg-type]
    assert item == ItemResult(lead_id, True)
    assert await _snapshot(queue) == before  # no second completion, no event
    # Another status, or the lead finished otherwise, is still a lost lease.
    other = "cached" if status != "cached" else "done"
    await _complete_as(queue, Attempt(lead_id, token, at(4)), other)


async def test_a_completion_sent_again_after_an_operator_retry_is_lost(queue: Queue) -> None:
    """A failed lead queued again by an operator forgets the token that finished it."""
    lead_id, token = await _leased(queue)
    await queue.complete(lead_id, token, "failed", error="x", now=at(1))
    await queue.retry(lead_id, now=at(2))
    assert (await row(queue.db, lead_id))["lease_token"] is None
    await _complete_as(queue, Attempt(lead_id, token, at(3)), "failed")


async def _complete_as(queue: Queue, a: Attempt, status: str) -> None:
    before = await _snapshot(queue)
    with pytest.raises(LeaseLost):
        await queue.complete(a.lead_id, a.token, status, now=a.now)  # type: ignore[arg-type]
    [item] = await queue.complete_many([CompleteItem(a.lead_id, a.token, status)], now=a.now)  # type: ignore[arg-type]
    assert item == ItemResult(a.lead_id, False, code="lease_lost")
    assert await _snapshot(queue) == before


async def test_the_newer_lease_survives_the_older_holder(queue: Queue) -> None:
    """After a re-lease, the stale holder loses and the new holder keeps full use of its lease."""
    lead_id, old = await _leased(queue)
    await queue.sweep("s", now=at(10))
    [newer] = await leasing_of(queue).lease_next("s", "w2", ttl_s=10, now=at(10))
    for op in (_renew, _complete, _release):
        await op(queue, Attempt(lead_id, old, at(11)))
    assert (await queue.renew(lead_id, newer.token, 10, now=at(12))).expires_at == at(22)
    lead = await queue.complete(lead_id, newer.token, now=at(13))
    assert (lead.status, lead.owner, lead.attempts) == ("done", "w2", 2)


async def test_a_lease_is_valid_until_the_instant_before_expiry(queue: Queue) -> None:
    lead_id, token = await _leased(queue)
    renewal = await queue.renew(lead_id, token, 10, now=at(10) - TICK)
    assert renewal.expires_at == at(20) - TICK
    with pytest.raises(LeaseLost):
        await queue.renew(lead_id, token, 10, now=at(20) - TICK)
    assert (await queue.sweep("s", now=at(20) - TICK)) == SweepResult(requeued=1)


async def test_complete_at_the_last_instant_wins(queue: Queue) -> None:
    lead_id, token = await _leased(queue)
    lead = await queue.complete(lead_id, token, now=at(10) - TICK)
    assert lead.status == "done"
    assert await queue.sweep("s", now=at(10)) == SweepResult()
    assert (await queue.get(lead_id)).status == "done"


async def test_complete_twice_completes_once(queue: Queue) -> None:
    lead_id, token = await _leased(queue)
    await queue.complete(lead_id, token, "done", {"first": True}, now=at(1))
    with pytest.raises(LeaseLost):
        await queue.complete(lead_id, token, "failed", {"second": True}, now=at(1))
    lead = await queue.get(lead_id)
    assert (lead.status, lead.result) == ("done", {"first": True})
    assert [e["event"] for e in await events(queue.db, lead_id)].count("completed") == 1


# -- batches mix ok and lost, answered per item in order ------------------------


async def _mixed_batch(queue: Queue) -> dict[str, tuple[int, str]]:
    """Six leases at T0: two kept valid, four lost in different ways, as seen at at(5)."""
    await queue.push("s", leads(6), now=T0)
    got = await leasing_of(queue).lease_next("s", "w", max=6, ttl_s=60, now=T0)
    by_name = dict(
        zip(
            ["ok1", "expired", "ok2", "completed", "cancelled", "re_leased"],
            [(lease.lead.id, lease.token) for lease in got],
            strict=True,
        )
    )
    lead_id, token = by_name["expired"]
    await queue.renew(lead_id, token, 1, now=T0)  # expires at at(1)
    await queue.complete(*by_name["completed"], now=at(1))
    await queue.cancel(by_name["cancelled"][0], now=at(1))
    lead_id, token = by_name["re_leased"]
    await queue.release(lead_id, token, now=at(1))
    [newer] = await leasing_of(queue).lease_next("s", "w2", now=at(1))
    assert newer.lead.id == lead_id
    return by_name


ORDER = ["expired", "ok1", "wrong_token", "completed", "ok2", "cancelled", "re_leased"]


async def test_renew_many_mixes_ok_and_lost_in_order(queue: Queue) -> None:
    by_name = await _mixed_batch(queue)
    items = []
    for name in ORDER:
        if name == "wrong_token":
            items.append(RenewItem(by_name["ok1"][0], mint("s"), 30))
        else:
            items.append(RenewItem(*by_name[name], 30))
    before = {name: await row(queue.db, lead_id) for name, (lead_id, _) in by_name.items()}

    answers = await queue.renew_many(items, now=at(5))

    assert [a.lead_id for a in answers] == [item.lead_id for item in items]
    assert [(a.ok, a.code) for a in answers] == [
        (name.startswith("ok"), None if name.startswith("ok") else "lease_lost") for name in ORDER
    ]
    assert [a.expires_at for a in answers] == [
        at(35) if name.startswith("ok") else None for name in ORDER
    ]
    for name, (lead_id, _) in by_name.items():
        after = await row(queue.db, lead_id)
        if name.startswith("ok"):
            assert after["lease_expires_at"] == at(35)
        else:
            assert after == before[name]


async def test_complete_many_mixes_ok_and_lost_in_order(queue: Queue) -> None:
    by_name = await _mixed_batch(queue)
    items = []
    for name in ORDER:
        if name == "wrong_token":
            items.append(CompleteItem(by_name["ok2"][0], mint("s"), "failed"))
        else:
            items.append(CompleteItem(*by_name[name], "cached", {"name": name}))
    before = {name: await row(queue.db, lead_id) for name, (lead_id, _) in by_name.items()}

    answers = await queue.complete_many(items, now=at(5))

    assert answers == [
        ItemResult(item.lead_id, True)
        if name.startswith("ok")
        else ItemResult(item.lead_id, False, code="lease_lost")
        for name, item in zip(ORDER, items, strict=True)
    ]
    for name, (lead_id, _) in by_name.items():
        after = await row(queue.db, lead_id)
        if name.startswith("ok"):
            assert (after["status"], after["result"]) == ("cached", {"name": name})
        else:
            assert after == before[name]
    assert await queue.stats("s") == Counts(leased=2, done=1, failed=1, cached=2)


async def test_complete_many_with_the_same_lease_twice_completes_it_once(queue: Queue) -> None:
    """The first item completes the lead; the repeat finds the lease gone, like a second call."""
    lead_id, token = await _leased(queue)
    answers = await queue.complete_many(
        [
            CompleteItem(lead_id, token, "done", {"n": 1}),
            CompleteItem(lead_id, token, "failed", {"n": 2}),
        ],
        now=at(1),
    )
    assert answers == [ItemResult(lead_id, True), ItemResult(lead_id, False, code="lease_lost")]
    lead = await queue.get(lead_id)
    assert (lead.status, lead.result) == ("done", {"n": 1})
    assert [e["event"] for e in await events(queue.db, lead_id)].count("completed") == 1


async def test_renew_many_with_the_same_lease_twice(queue: Queue) -> None:
    """Renewing is idempotent: a repeated item renews too and reports the expiry stored."""
    lead_id, token = await _leased(queue)
    answers = await queue.renew_many(
        [RenewItem(lead_id, token, 30), RenewItem(lead_id, token, 30)], now=at(1)
    )
    assert answers == [ItemResult(lead_id, True, expires_at=at(31), ttl_s=30, attempt=1)] * 2
    assert (await queue.get(lead_id)).lease_expires_at == at(31)
