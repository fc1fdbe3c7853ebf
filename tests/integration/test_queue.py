"""The queue core against a real PostgreSQL: each operation's happy path and the rules around it.

Lost leases are in test_queue_lease_lost.py, the ledger in test_queue_ledger.py,
bad input in test_validation.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.errors import Conflict, NotFound
from leaseq.model import AllCounts, CompleteItem, Counts, NewLead, RenewItem, SweepResult
from tests.support import T0, TICK, at, events, fetch, leads, leasing_of, row

# -- push ------------------------------------------------------------------


async def test_push_queues_leads_with_their_fields(queue: Queue) -> None:
    pushed = await queue.push(
        "s1",
        [
            NewLead({"url": "https://a.example"}),
            NewLead({"n": [1, 2.5, None, "x"]}, priority=7, key="k", depth=2, max_attempts=9),
        ],
        now=T0,
    )
    assert pushed.created == 2
    assert pushed.duplicates == 0
    first, second = pushed.ids
    assert second > first

    lead = await queue.get(first)
    assert lead.session == "s1"
    assert lead.payload == {"url": "https://a.example"}
    assert (lead.status, lead.priority, lead.key, lead.depth, lead.parent_id) == (
        "queued",
        0,
        None,
        0,
        None,
    )
    assert (lead.attempts, lead.max_attempts, lead.owner) == (0, queue.default_max_attempts, None)
    assert lead.available_at == lead.created_at == lead.updated_at == T0
    assert lead.lease_expires_at is None
    assert lead.result is None
    assert lead.error is None

    lead = await queue.get(second)
    assert lead.payload == {"n": [1, 2.5, None, "x"]}
    assert (lead.priority, lead.key, lead.depth, lead.max_attempts) == (7, "k", 2, 9)


async def test_push_records_parent_and_delay(queue: Queue) -> None:
    [parent] = (await queue.push("s", leads(1), now=T0)).ids
    [child] = (
        await queue.push("s", [NewLead({}, parent_id=parent, depth=1, delay_s=90)], now=T0)
    ).ids
    lead = await queue.get(child)
    assert (lead.parent_id, lead.depth) == (parent, 1)
    assert lead.available_at == at(90)
    assert lead.created_at == T0


async def test_push_uses_the_queue_default_max_attempts(db: Database) -> None:
    queue = Queue(db, default_max_attempts=2)
    [lead_id] = (await queue.push("s", leads(1), now=T0)).ids
    assert (await queue.get(lead_id)).max_attempts == 2


async def test_push_ids_follow_input_order(queue: Queue) -> None:
    pushed = await queue.push("s", leads(1000), now=T0)
    assert pushed.created == 1000
    assert pushed.ids == sorted(pushed.ids)
    assert len(set(pushed.ids)) == 1000
    for i in (0, 499, 999):
        assert (await queue.get(pushed.ids[i])).payload == {"i": i}


# -- dedupe by key ----------------------------------------------------------


async def test_dedupe_within_one_batch(queue: Queue) -> None:
    pushed = await queue.push(
        "s",
        [
            NewLead({"n": 1}, key="a"),
            NewLead({"n": 2}, key="b"),
            NewLead({"n": 3}, key="a"),
            NewLead({"n": 4}),
            NewLead({"n": 5}, key="b"),
            NewLead({"n": 6}),
        ],
        now=T0,
    )
    a, b, a2, none1, b2, none2 = pushed.ids
    assert a2 == a
    assert b2 == b
    assert len({a, b, none1, none2}) == 4
    assert (pushed.created, pushed.duplicates) == (4, 2)
    # The first lead of a key is the one stored.
    assert (await queue.get(a)).payload == {"n": 1}
    assert (await queue.get(b)).payload == {"n": 2}
    assert (await queue.stats("s")).queued == 4


async def test_dedupe_across_batches_returns_existing_ids(queue: Queue) -> None:
    first = await queue.push("s", [NewLead({}, key="a"), NewLead({}, key="b")], now=T0)
    a, b = first.ids
    second = await queue.push(
        "s",
        [NewLead({}, key="c"), NewLead({"other": 1}, key="b"), NewLead({}), NewLead({}, key="a")],
        now=at(1),
    )
    c, b2, plain, a2 = second.ids
    assert (b2, a2) == (b, a)
    assert c not in (a, b)
    assert plain not in (a, b, c)
    assert (second.created, second.duplicates) == (2, 2)
    assert (await queue.get(b)).payload == {}
    assert (await queue.get(b)).created_at == T0

    again = await queue.push("s", [NewLead({}, key="a"), NewLead({}, key="a")], now=at(2))
    assert again.ids == [a, a]
    assert (again.created, again.duplicates) == (0, 2)
    assert (await queue.stats("s")).queued == 4


async def test_dedupe_holds_after_the_lead_finished(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", [NewLead({}, key="once")], now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", now=at(1))
    await queue.complete(lease.lead.id, lease.token, now=at(2))
    again = await queue.push("s", [NewLead({}, key="once")], now=at(3))
    assert again.ids == [lead_id]
    assert (again.created, again.duplicates) == (0, 1)
    assert (await queue.get(lead_id)).status == "done"


async def test_keyed_leads_keep_push_order(queue: Queue) -> None:
    """Ids ascend in input order whatever the keys, so equal priorities lease oldest first."""
    keys = ["zeta", None, "alpha", "mid", None, "beta"]
    pushed = await queue.push("s", [NewLead({"k": k}, key=k) for k in keys], now=T0)
    assert pushed.ids == sorted(pushed.ids)
    for lead_id, key in zip(pushed.ids, keys, strict=True):
        assert (await queue.get(lead_id)).key == key
    leased = await leasing_of(queue).lease_next("s", "w", max=10, now=T0)
    assert [lease.lead.id for lease in leased] == pushed.ids


async def test_dedupe_keys_are_per_session(queue: Queue) -> None:
    [in_a] = (await queue.push("a", [NewLead({}, key="k")], now=T0)).ids
    [in_b] = (await queue.push("b", [NewLead({}, key="k")], now=T0)).ids
    assert in_a != in_b
    assert (await queue.get(in_b)).session == "b"


# -- lease_next ------------------------------------------------------------


async def test_lease_next_hands_out_a_lease(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", [NewLead({"x": 1})], now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "worker-1", ttl_s=30, now=at(5))
    assert lease.lead.id == lead_id
    assert lease.lead.payload == {"x": 1}
    assert lease.owner == "worker-1"
    assert lease.attempt == 1
    assert lease.expires_at == at(35)
    assert len(lease.token) >= 32
    assert lease.lead.status == "leased"
    assert lease.lead.lease_expires_at == at(35)

    stored = await row(queue.db, lead_id)
    assert stored["status"] == "leased"
    assert stored["lease_token"] == lease.token
    assert stored["owner"] == "worker-1"
    assert stored["attempts"] == 1
    assert stored["updated_at"] == at(5)
    assert not hasattr(lease.lead, "lease_token")  # the token is never part of a lead


async def test_lease_next_answers_empty_when_nothing_is_queued(queue: Queue) -> None:
    assert await leasing_of(queue).lease_next("s", "w", now=T0) == []
    await queue.push("s", leads(1), now=T0)
    assert len(await leasing_of(queue).lease_next("s", "w", now=T0)) == 1
    assert await leasing_of(queue).lease_next("s", "w", now=T0) == []


async def test_lease_next_uses_the_default_ttl(db: Database) -> None:
    queue = Queue(db, default_ttl_s=42)
    await queue.push("s", leads(2), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    assert (lease.expires_at, lease.ttl_s) == (at(42), 42)  # the lease says what it got
    [asked] = await leasing_of(queue).lease_next("s", "w", ttl_s=7, now=T0)
    assert (asked.expires_at, asked.ttl_s) == (at(7), 7)


async def test_lease_next_takes_up_to_max_with_distinct_tokens(queue: Queue) -> None:
    ids = (await queue.push("s", leads(7), now=T0)).ids
    batch = await leasing_of(queue).lease_next("s", "w", max=5, now=T0)
    assert [lease.lead.id for lease in batch] == ids[:5]
    assert len({lease.token for lease in batch}) == 5
    rest = await leasing_of(queue).lease_next("s", "w", max=100, now=T0)
    assert [lease.lead.id for lease in rest] == ids[5:]


async def test_lease_order_is_priority_then_age(queue: Queue) -> None:
    """docs/contract.md#invariant-6: highest priority first, then oldest (lowest id) first."""
    first = await queue.push("s", [NewLead({}, priority=p) for p in (0, 5, -1, 5, 10, 0)], now=T0)
    later = await queue.push("s", [NewLead({}, priority=p) for p in (10, 5, -1)], now=at(1))
    p0a, p5a, m1a, p5b, p10a, p0b = first.ids
    p10b, p5c, m1b = later.ids
    expected = [p10a, p10b, p5a, p5b, p5c, p0a, p0b, m1a, m1b]

    one_by_one = []
    for _ in expected:
        [lease] = await leasing_of(queue).lease_next("s", "w", now=at(2))
        one_by_one.append(lease.lead.id)
    assert one_by_one == expected
    assert await leasing_of(queue).lease_next("s", "w", now=at(2)) == []


async def test_lease_order_in_one_batch(queue: Queue) -> None:
    ids = (await queue.push("s", [NewLead({}, priority=p) for p in (1, 3, 2, 3)], now=T0)).ids
    batch = await leasing_of(queue).lease_next("s", "w", max=3, now=T0)
    assert [lease.lead.id for lease in batch] == [ids[1], ids[3], ids[2]]


async def test_delayed_lead_waits_until_available_at(queue: Queue) -> None:
    [late] = (await queue.push("s", [NewLead({}, delay_s=30, priority=9)], now=T0)).ids
    [now_lead] = (await queue.push("s", leads(1), now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", max=10, now=at(30) - TICK)
    assert lease.lead.id == now_lead  # the higher priority is not available yet
    assert await leasing_of(queue).lease_next("s", "w", now=at(30) - TICK) == []
    [lease] = await leasing_of(queue).lease_next("s", "w", now=at(30))
    assert lease.lead.id == late


# -- renew -----------------------------------------------------------------


async def test_renew_extends_from_now(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    renewal = await queue.renew(lease.lead.id, lease.token, ttl_s=60, now=at(9))
    assert (renewal.expires_at, renewal.ttl_s) == (at(69), 60)
    assert (await queue.get(lease.lead.id)).lease_expires_at == at(69)
    # Renewing keeps the lease valid past its first expiry.
    assert (await queue.renew(lease.lead.id, lease.token, 5, now=at(60))).expires_at == at(65)
    lead = await queue.get(lease.lead.id)
    assert (lead.status, lead.attempts, lead.owner) == ("leased", 1, "w")


async def test_renew_uses_the_default_ttl(db: Database) -> None:
    queue = Queue(db, default_ttl_s=100)
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    renewal = await queue.renew(lease.lead.id, lease.token, now=at(5))
    assert (renewal.expires_at, renewal.ttl_s) == (at(105), 100)


async def test_renew_many_answers_each_item_in_order(queue: Queue) -> None:
    await queue.push("s", leads(3), now=T0)
    a, b, c = await leasing_of(queue).lease_next("s", "w", max=3, ttl_s=10, now=T0)
    answers = await queue.renew_many(
        [
            RenewItem(c.lead.id, c.token, 30),
            RenewItem(a.lead.id, a.token),
            RenewItem(b.lead.id, b.token, 1),
        ],
        now=at(5),
    )
    assert [(x.lead_id, x.ok, x.code) for x in answers] == [
        (c.lead.id, True, None),
        (a.lead.id, True, None),
        (b.lead.id, True, None),
    ]
    assert [x.expires_at for x in answers] == [
        at(35),
        at(5) + timedelta(seconds=queue.default_ttl_s),
        at(6),
    ]
    assert (await queue.get(b.lead.id)).lease_expires_at == at(6)


# -- complete --------------------------------------------------------------


@pytest.mark.parametrize("status", ["done", "failed", "cached"])
async def test_complete_finishes_a_lead(queue: Queue, status: str) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    lead = await queue.complete(
        lease.lead.id, lease.token, status, {"rows": [1, 2]}, error="boom", now=at(3)
    )
    assert lead.id == lease.lead.id
    assert lead.status == status
    assert lead.result == {"rows": [1, 2]}
    assert lead.error == "boom"
    assert lead.lease_expires_at is None
    assert (lead.attempts, lead.owner, lead.updated_at) == (1, "w", at(3))
    assert await queue.get(lead.id) == lead
    # The finished lead keeps the token that completed it (never shown): a retry is known.
    assert (await row(queue.db, lead.id))["lease_token"] == lease.token


async def test_complete_defaults_to_done_without_result(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    lead = await queue.complete(lease.lead.id, lease.token, now=at(1))
    assert (lead.status, lead.result, lead.error) == ("done", None, None)


async def test_complete_stores_any_json_result(queue: Queue) -> None:
    await queue.push("s", leads(3), now=T0)
    leases = await leasing_of(queue).lease_next("s", "w", max=3, now=T0)
    for lease, result in zip(leases, [[1, "two"], "text", 3.5], strict=True):
        lead = await queue.complete(lease.lead.id, lease.token, result=result, now=at(1))
        assert lead.result == result
        assert (await queue.get(lead.id)).result == result


async def test_complete_many_answers_each_item_in_order(queue: Queue) -> None:
    await queue.push("s", leads(3), now=T0)
    a, b, c = await leasing_of(queue).lease_next("s", "w", max=3, now=T0)
    answers = await queue.complete_many(
        [
            CompleteItem(b.lead.id, b.token, "cached", {"from": "cache"}),
            CompleteItem(a.lead.id, a.token),
            CompleteItem(c.lead.id, c.token, "failed", error="bad input"),
        ],
        now=at(1),
    )
    assert [(x.lead_id, x.ok, x.code) for x in answers] == [
        (b.lead.id, True, None),
        (a.lead.id, True, None),
        (c.lead.id, True, None),
    ]
    assert (await queue.get(a.lead.id)).status == "done"
    lead_b = await queue.get(b.lead.id)
    assert (lead_b.status, lead_b.result) == ("cached", {"from": "cache"})
    lead_c = await queue.get(c.lead.id)
    assert (lead_c.status, lead_c.error) == ("failed", "bad input")
    assert await queue.stats("s") == Counts(done=1, failed=1, cached=1)


# -- release ---------------------------------------------------------------


async def test_release_queues_the_lead_again(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    lead = await queue.release(lease.lead.id, lease.token, now=at(4))
    assert (lead.status, lead.available_at, lead.lease_expires_at) == ("queued", at(4), None)
    assert lead.attempts == 1  # the attempt was made; the fencing number never goes back
    assert (await row(queue.db, lead.id))["lease_token"] is None
    [again] = await leasing_of(queue).lease_next("s", "w2", now=at(4))
    assert (again.lead.id, again.attempt, again.owner) == (lead.id, 2, "w2")
    assert again.token != lease.token


async def test_release_with_delay(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    lead = await queue.release(lease.lead.id, lease.token, delay_s=60, now=at(1))
    assert lead.available_at == at(61)
    assert await leasing_of(queue).lease_next("s", "w", now=at(61) - TICK) == []
    [again] = await leasing_of(queue).lease_next("s", "w", now=at(61))
    assert again.lead.id == lead.id


@pytest.mark.parametrize("max_attempts", [1, 2, 3])
async def test_release_on_the_last_attempt_fails_the_lead(queue: Queue, max_attempts: int) -> None:
    """docs/contract.md#invariant-7: a lead is leased at most max_attempts times, release or not."""
    [lead_id] = (await queue.push("s", leads(1, max_attempts=max_attempts), now=T0)).ids
    for attempt in range(1, max_attempts + 1):
        [lease] = await leasing_of(queue).lease_next("s", "w", now=at(attempt))
        assert lease.attempt == attempt
        lead = await queue.release(lead_id, lease.token, error="no disk", now=at(attempt))
        if attempt < max_attempts:
            assert (lead.status, lead.error, lead.available_at) == ("queued", None, at(attempt))
    assert (lead.status, lead.attempts, lead.lease_expires_at) == ("failed", max_attempts, None)
    assert lead.error == f"released on attempt {max_attempts} of {max_attempts}: no disk"
    assert lead.available_at == (at(max_attempts - 1) if max_attempts > 1 else T0)  # unchanged
    assert await leasing_of(queue).lease_next("s", "w", now=at(100)) == []
    assert (await row(queue.db, lead_id))["lease_token"] is None
    [*_, last] = await events(queue.db, lead_id)
    assert (last["event"], last["status"], last["attempt"]) == ("released", "failed", max_attempts)


async def test_release_on_the_last_attempt_without_a_reason(queue: Queue) -> None:
    await queue.push("s", leads(1, max_attempts=1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    lead = await queue.release(lease.lead.id, lease.token, delay_s=30, now=at(1))
    assert (lead.status, lead.error) == ("failed", "released on attempt 1 of 1")


async def test_an_operator_retry_gives_a_released_out_lead_one_more_attempt(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", leads(1, max_attempts=1), now=T0)).ids
    [first] = await leasing_of(queue).lease_next("s", "w", now=T0)
    await queue.release(lead_id, first.token, now=at(1))
    await queue.retry(lead_id, now=at(2))
    [second] = await leasing_of(queue).lease_next("s", "w", now=at(2))
    assert second.attempt == 2
    lead = await queue.release(lead_id, second.token, now=at(3))
    assert (lead.status, lead.error) == ("failed", "released on attempt 2 of 2")


# -- sweep -----------------------------------------------------------------


async def test_sweep_requeues_expired_leases_only(queue: Queue) -> None:
    await queue.push("s", leads(3), now=T0)
    short, long_ = await leasing_of(queue).lease_next("s", "w", max=2, ttl_s=10, now=T0)
    await queue.renew(long_.lead.id, long_.token, 100, now=T0)
    assert await queue.sweep("s", now=at(10) - TICK) == SweepResult(0, 0)
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=1, failed=0)

    swept = await queue.get(short.lead.id)
    assert (swept.status, swept.lease_expires_at, swept.available_at) == ("queued", None, at(10))
    assert swept.attempts == 1
    assert (await queue.get(long_.lead.id)).status == "leased"
    assert await queue.stats("s") == Counts(queued=2, leased=1)
    # Nothing left to sweep.
    assert await queue.sweep("s", now=at(10)) == SweepResult(0, 0)


async def test_sweep_fails_a_lead_at_max_attempts(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", leads(1, max_attempts=2), now=T0)).ids
    [first] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=1, failed=0)
    [second] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=at(10))
    assert (first.attempt, second.attempt) == (1, 2)
    assert await queue.sweep("s", now=at(20)) == SweepResult(requeued=0, failed=1)

    lead = await queue.get(lead_id)
    assert (lead.status, lead.attempts, lead.lease_expires_at) == ("failed", 2, None)
    assert lead.error == "lease expired on attempt 2 of 2"
    assert await leasing_of(queue).lease_next("s", "w", now=at(30)) == []


async def test_sweep_counts_more_than_one_batch(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("app.domain.queue.SWEEP_BATCH", 7)
    await queue.push("s", leads(30), now=T0)
    await queue.push("t", leads(5), now=T0)
    for session in ("s", "t"):
        await leasing_of(queue).lease_next(session, "w", max=100, ttl_s=10, now=T0)
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=30, failed=0)
    assert await queue.stats("t") == Counts(leased=5)
    assert await queue.sweep_all(now=at(10)) == SweepResult(requeued=5, failed=0)


async def test_sweep_all_covers_every_session(queue: Queue) -> None:
    for session in ("a", "b", "c"):
        await queue.push(session, leads(2, max_attempts=1), now=T0)
        await leasing_of(queue).lease_next(session, "w", ttl_s=10, now=T0)
    await queue.push("a", leads(1, priority=1), now=T0)  # max_attempts 5: requeued
    await leasing_of(queue).lease_next("a", "w", ttl_s=10, now=T0)

    assert await queue.sweep_all(now=at(10)) == SweepResult(requeued=1, failed=3)
    stats = await queue.stats_all()
    assert stats.sessions == {
        "a": Counts(queued=2, failed=1),
        "b": Counts(queued=1, failed=1),
        "c": Counts(queued=1, failed=1),
    }
    assert await queue.sweep_all(now=at(10)) == SweepResult(0, 0)


async def test_sweep_is_scoped_to_its_session(queue: Queue) -> None:
    await queue.push("A", leads(2), now=T0)
    await queue.push("B", leads(2), now=T0)
    a_leases = await leasing_of(queue).lease_next("A", "w", max=2, ttl_s=10, now=T0)
    b_leases = await leasing_of(queue).lease_next("B", "w", max=2, ttl_s=10, now=T0)
    assert {lease.lead.session for lease in a_leases} == {"A"}
    assert {lease.lead.session for lease in b_leases} == {"B"}

    assert await queue.sweep("A", now=at(60)) == SweepResult(requeued=2, failed=0)
    assert await queue.stats("A") == Counts(queued=2)
    assert await queue.stats("B") == Counts(leased=2)
    for lease in b_leases:
        stored = await row(queue.db, lease.lead.id)
        assert (stored["status"], stored["lease_token"]) == ("leased", lease.token)
    assert await queue.sweep("B", now=at(60)) == SweepResult(requeued=2, failed=0)


async def test_lease_next_is_scoped_to_its_session(queue: Queue) -> None:
    await queue.push("A", leads(3, priority=0), now=T0)
    await queue.push("B", leads(3, priority=100), now=T0)
    batch = await leasing_of(queue).lease_next("A", "w", max=100, now=T0)
    assert len(batch) == 3
    assert {lease.lead.session for lease in batch} == {"A"}
    assert await queue.stats("B") == Counts(queued=3)


# -- cancel and retry ------------------------------------------------------


async def test_cancel_a_queued_lead(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", leads(1), now=T0)).ids
    lead = await queue.cancel(lead_id, now=at(1))
    assert (lead.status, lead.error, lead.updated_at) == ("failed", "cancelled", at(1))
    assert await leasing_of(queue).lease_next("s", "w", now=at(2)) == []


async def test_cancel_a_leased_lead(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    lead = await queue.cancel(lease.lead.id, now=at(1))
    assert (lead.status, lead.error, lead.lease_expires_at) == ("failed", "cancelled", None)
    assert (await row(queue.db, lead.id))["lease_token"] is None
    # Sweeping later does not bring it back.
    assert await queue.sweep("s", now=at(10_000)) == SweepResult(0, 0)
    assert (await queue.get(lead.id)).status == "failed"


@pytest.mark.parametrize("status", ["done", "failed", "cached"])
async def test_cancel_of_a_terminal_lead_is_a_conflict(queue: Queue, status: str) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    before = await queue.complete(lease.lead.id, lease.token, status, now=at(1))
    with pytest.raises(Conflict, match=status):
        await queue.cancel(lease.lead.id, now=at(2))
    assert await queue.get(lease.lead.id) == before


async def test_cancel_twice_is_a_conflict(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", leads(1), now=T0)).ids
    cancelled = await queue.cancel(lead_id, now=at(1))
    with pytest.raises(Conflict):
        await queue.cancel(lead_id, now=at(2))
    assert await queue.get(lead_id) == cancelled


async def test_retry_replays_a_failed_lead(queue: Queue) -> None:
    """Attempts keep growing across replays; max_attempts makes room for one more."""
    [lead_id] = (await queue.push("s", leads(1, max_attempts=1), now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=T0)
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=0, failed=1)

    lead = await queue.retry(lead_id, now=at(11))
    assert (lead.status, lead.error, lead.result) == ("queued", None, None)
    assert (lead.attempts, lead.max_attempts, lead.available_at) == (1, 2, at(11))
    [again] = await leasing_of(queue).lease_next("s", "w", ttl_s=10, now=at(11))
    assert (again.lead.id, again.attempt) == (lead_id, 2)
    assert again.token != lease.token
    assert await queue.sweep("s", now=at(21)) == SweepResult(requeued=0, failed=1)

    await queue.retry(lead_id, now=at(22))
    [third] = await leasing_of(queue).lease_next("s", "w", now=at(22))
    assert third.attempt == 3
    done = await queue.complete(lead_id, third.token, now=at(23))
    assert (done.status, done.attempts) == ("done", 3)


async def test_retry_of_a_failed_completion_and_of_a_cancelled_lead(queue: Queue) -> None:
    ids = (await queue.push("s", leads(2), now=T0)).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
    await queue.complete(lease.lead.id, lease.token, "failed", {"partial": 1}, "oops", now=at(1))
    await queue.cancel(ids[1], now=at(1))
    for lead_id in ids:
        lead = await queue.retry(lead_id, now=at(2))
        assert (lead.status, lead.result, lead.error) == ("queued", None, None)
    leased = await leasing_of(queue).lease_next("s", "w", max=10, now=at(2))
    assert sorted((x.lead.id, x.attempt) for x in leased) == [(ids[0], 2), (ids[1], 1)]


@pytest.mark.parametrize("status", ["queued", "leased", "done", "cached"])
async def test_retry_of_a_lead_that_is_not_failed_is_a_conflict(queue: Queue, status: str) -> None:
    [lead_id] = (await queue.push("s", leads(1), now=T0)).ids
    if status != "queued":
        [lease] = await leasing_of(queue).lease_next("s", "w", now=T0)
        if status != "leased":
            await queue.complete(lead_id, lease.token, status, now=at(1))
    before = await queue.get(lead_id)
    with pytest.raises(Conflict, match=status):
        await queue.retry(lead_id, now=at(2))
    assert await queue.get(lead_id) == before


async def test_unknown_lead_is_not_found(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    for call in (queue.get(999_999), queue.cancel(999_999), queue.retry(999_999)):
        with pytest.raises(NotFound, match="999999"):
            await call
    assert await queue.stats("s") == Counts(queued=1)


# -- stats -----------------------------------------------------------------


async def test_stats_counts_each_status(queue: Queue) -> None:
    assert await queue.stats("s") == Counts()
    await queue.push("s", leads(8, max_attempts=1), now=T0)
    a, b, c, d, _ = await leasing_of(queue).lease_next("s", "w", max=5, ttl_s=10, now=T0)
    await queue.complete(a.lead.id, a.token, "done", now=at(1))
    await queue.complete(b.lead.id, b.token, "cached", now=at(1))
    await queue.complete(c.lead.id, c.token, "failed", now=at(1))
    await queue.release(d.lead.id, d.token, now=at(1))  # its last attempt: failed
    stats = await queue.stats("s")
    assert stats == Counts(queued=3, leased=1, done=1, failed=2, cached=1)
    assert stats.pending == 4
    assert await queue.sweep("s", now=at(10)) == SweepResult(requeued=0, failed=1)
    assert await queue.stats("s") == Counts(queued=3, done=1, failed=3, cached=1)
    assert await queue.stats("unknown") == Counts()


async def test_stats_all_counts_per_session_and_total(queue: Queue) -> None:
    assert await queue.stats_all() == AllCounts(sessions={}, total=Counts())
    await queue.push("b", leads(3), now=T0)
    await queue.push("a", leads(2), now=T0)
    [lease] = await leasing_of(queue).lease_next("b", "w", now=T0)
    await queue.complete(lease.lead.id, lease.token, now=at(1))
    await leasing_of(queue).lease_next("a", "w", now=T0)

    stats = await queue.stats_all()
    assert list(stats.sessions) == ["a", "b"]
    assert stats.sessions["a"] == Counts(queued=1, leased=1)
    assert stats.sessions["b"] == Counts(queued=2, done=1)
    assert stats.total == Counts(queued=3, leased=1, done=1)
    assert stats.total.pending == 4
    assert stats.sessions["a"] == await queue.stats("a")


async def test_db_now_reads_the_database_clock(queue: Queue) -> None:
    [found] = await fetch(queue.db, "SELECT now() AS now")
    assert abs((await queue.db_now()) - found["now"]) < timedelta(seconds=60)


async def test_the_database_clock_is_used_without_now(queue: Queue) -> None:
    """Without ``now`` every stamp is the database's clock (docs/contract.md#invariant-3)."""
    before = await queue.db_now()
    [lead_id] = (await queue.push("s", leads(1))).ids
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=600)
    after = await queue.db_now()
    lead = await queue.get(lead_id)
    assert before <= lead.created_at <= after
    assert before + timedelta(seconds=600) <= lease.expires_at <= after + timedelta(seconds=600)
    assert (await queue.renew(lead_id, lease.token, 900)).expires_at > lease.expires_at
    assert (await queue.complete(lead_id, lease.token)).status == "done"
