"""Flow control on the real queue: pause and resume, a worker's cooldown, the maximum runtime.

Time is the injected database clock (``now=``) wherever a pause or a runtime has to end;
no test sleeps. Concurrency keys under load are in ``test_concurrency_keys.py``.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.leasing.fleet import Fleet
from app.store.pool import Database
from leaseq.errors import InvalidInput, LeaseLost
from leaseq.model import CompleteItem, Lease, NewLead, SessionSettings
from tests.support import T0, across, at, fetch, lease_from, leasing_of


async def test_a_paused_session_leases_nothing_and_its_held_leases_go_on(queue: Queue) -> None:
    await queue.push("s", [NewLead({"i": i}) for i in range(3)], now=T0)
    [held] = (await lease_from(queue, "s", "w", now=T0)).leases
    settings = await queue.pause("s", now=T0)
    assert settings.paused_until is not None and settings.paused_until.year == 9999
    assert (await lease_from(queue, "s", "w", max=3, now=at(1))).leases == []
    # held leases go on: renew, then complete
    await queue.renew(held.lead.id, held.token, 30, now=at(2))
    [done] = await queue.complete_many([_done(held)], now=at(3))
    assert done.ok
    stats = await queue.stats("s", now=at(3))
    assert stats.paused_until == settings.paused_until and stats.queued == 2
    # a change of settings leaves the pause as it is
    await queue.put_settings("s", SessionSettings(weight=2), now=at(4))
    assert (await queue.settings("s")).paused_until == settings.paused_until
    assert (await lease_from(queue, "s", "w", now=at(5))).leases == []
    resumed = await queue.resume("s", now=at(6))
    assert resumed.paused_until is None and resumed.weight == 2
    assert len((await lease_from(queue, "s", "w", max=3, now=at(7))).leases) == 2
    assert (await queue.stats("s", now=at(7))).paused_until is None


async def test_a_pause_for_a_time_ends_on_the_database_clock(queue: Queue) -> None:
    await queue.push("s", [NewLead({})], now=T0)
    paused = await queue.pause("s", 10, now=T0)
    assert paused.paused_until == at(10)
    assert (await lease_from(queue, "s", "w", now=at(9.9))).leases == []
    assert (await queue.stats("s", now=at(9.9))).paused_until == at(10)
    assert (await queue.stats("s", now=at(10))).paused_until is None
    assert len((await lease_from(queue, "s", "w", now=at(10))).leases) == 1


async def test_a_limited_session_paused_leases_nothing(queue: Queue) -> None:
    await queue.put_settings("s", SessionSettings(max_leased=5, rate_per_s=100), now=T0)
    await queue.push("s", [NewLead({}) for _ in range(3)], now=T0)
    await queue.pause("s", 60, now=T0)
    assert (await lease_from(queue, "s", "w", max=3, now=at(1))).leases == []
    assert len((await lease_from(queue, "s", "w", max=3, now=at(61))).leases) == 3


async def test_a_lease_across_sessions_skips_a_paused_one(queue: Queue) -> None:
    for session in ("a", "b"):
        await queue.push(session, [NewLead({}) for _ in range(5)], now=T0)
    await queue.pause("a", now=T0)
    fleet = Fleet(leasing_of(queue).sessions)
    got = []
    for _ in range(5):
        got += await fleet.lease(across(None, "w"), now=at(1))
    assert {lease.lead.session for lease in got} == {"b"} and len(got) == 5
    assert await fleet.lease(across(["a", "b"], "w"), now=at(1)) == []


async def test_a_pause_binds_a_lease_through_another_connection_pool(
    queue: Queue, database_url: str, settings: Settings
) -> None:
    """Another API process: its own pool and its own leasing, the same database."""
    await queue.push("s", [NewLead({}) for _ in range(4)])
    async with Database.from_settings(settings, database_url) as other_db:
        other = Queue(other_db)
        assert len((await lease_from(other, "s", "w")).leases) == 1  # it has leased before
        await queue.pause("s")
        assert (await lease_from(other, "s", "w", max=3)).leases == []
        await other.resume("s")
        assert len((await lease_from(queue, "s", "w", max=3)).leases) == 3


async def test_hostile_pauses_are_refused(queue: Queue) -> None:
    for bad in (0, -1, float("nan"), float("inf"), 1e12, "10", True):
        with pytest.raises(InvalidInput):
            await queue.pause("s", bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        await queue.pause("no spaces")
    assert (await queue.settings("s")).paused_until is None
    assert await queue.settings_all() == {}


# -- a worker's cooldown -------------------------------------------------------------------


async def test_a_throttled_release_pauses_the_session_and_spends_no_attempt(
    queue: Queue, db: Database
) -> None:
    [lead_id] = (await queue.push("s", [NewLead({}, max_attempts=1)], now=T0)).ids
    for n in range(1, 4):
        start = at(100 * n)
        [lease] = (await lease_from(queue, "s", "w", now=start)).leases
        assert lease.attempt == n
        lead = await queue.release(lead_id, lease.token, throttle_s=60, now=start)
        assert lead.status == "queued" and lead.attempts == n
        assert (await queue.stats("s", now=start)).paused_until == start + timedelta(seconds=60)
        assert (await lease_from(queue, "s", "w", now=start + timedelta(seconds=59))).leases == []
    [row] = await fetch(db, "SELECT throttles FROM leads WHERE id = %(id)s", id=lead_id)
    assert row["throttles"] == 3
    # the lead's one counted attempt is still there: a plain release on it fails the lead
    [lease] = (await lease_from(queue, "s", "w", now=at(1000))).leases
    lead = await queue.release(lead_id, lease.token, now=at(1000))
    assert lead.status == "failed" and lead.error == "released on attempt 4 of 1"


async def test_a_throttle_never_shortens_a_pause(queue: Queue) -> None:
    await queue.push("s", [NewLead({}) for _ in range(2)], now=T0)
    leases = (await lease_from(queue, "s", "w", max=2, now=T0)).leases
    await queue.pause("s", 600, now=T0)
    await queue.release(leases[0].lead.id, leases[0].token, throttle_s=5, now=T0)
    assert (await queue.settings("s")).paused_until == at(600)
    # an expired lease counts its attempt (the sweep), a throttled one did not
    swept = await queue.sweep("s", now=at(10_000))
    assert swept.requeued == 1


async def test_a_lost_lease_cannot_throttle_and_bad_throttles_change_nothing(
    queue: Queue,
) -> None:
    await queue.push("s", [NewLead({})], now=T0)
    [lease] = (await lease_from(queue, "s", "w", ttl_s=10, now=T0)).leases
    with pytest.raises(LeaseLost):
        await queue.release(lease.lead.id, lease.token, throttle_s=60, now=at(11))
    assert (await queue.settings("s")).paused_until is None
    for bad in (0, 0.5, 3601, float("nan"), "60", True):
        with pytest.raises(InvalidInput):
            await queue.release(lease.lead.id, lease.token, throttle_s=bad, now=at(1))  # type: ignore[arg-type]
    assert (await queue.get(lease.lead.id)).status == "leased"
    assert (await queue.settings_all()) == {}


# -- a maximum runtime -------------------------------------------------------------------------


async def test_a_heartbeat_cannot_keep_a_lead_past_its_maximum_runtime(queue: Queue) -> None:
    [lead_id] = (await queue.push("s", [NewLead({}, max_runtime_s=60)], now=T0)).ids
    assert (await queue.get(lead_id)).max_runtime_s == 60
    [lease] = (await lease_from(queue, "s", "w", ttl_s=30, now=T0)).leases
    assert lease.expires_at == at(30) and lease.ttl_s == 30
    renewal = await queue.renew(lead_id, lease.token, 30, now=at(20))
    assert renewal.expires_at == at(50) and renewal.ttl_s == 30
    renewal = await queue.renew(lead_id, lease.token, 30, now=at(45))
    assert renewal.expires_at == at(60) and renewal.ttl_s == pytest.approx(15)
    with pytest.raises(LeaseLost) as lost:
        await queue.renew(lead_id, lease.token, 30, now=at(60))
    assert lost.value.reason == "max_runtime"
    assert (await queue.sweep("s", now=at(60))).requeued == 1
    [again] = (await lease_from(queue, "s", "w", ttl_s=30, now=at(61))).leases
    assert again.attempt == 2 and again.expires_at == at(91)


async def test_the_session_default_runtime_and_a_short_one_bound_the_lease_itself(
    queue: Queue,
) -> None:
    await queue.put_settings("s", SessionSettings(max_runtime_s=5), now=T0)
    await queue.push("s", [NewLead({}), NewLead({}, max_runtime_s=100)], now=T0)
    first, second = (await lease_from(queue, "s", "w", max=2, ttl_s=30, now=T0)).leases
    # the session's default, shorter than the ttl: the lease is granted only that long
    assert first.expires_at == at(5) and first.ttl_s == pytest.approx(5)
    assert second.expires_at == at(30) and second.ttl_s == 30  # its own is longer
    with pytest.raises(LeaseLost) as lost:
        await queue.renew(first.lead.id, first.token, 30, now=at(5))
    assert lost.value.reason == "max_runtime"
    # a plain lost lease has no reason
    with pytest.raises(LeaseLost) as lost:
        await queue.renew(second.lead.id, "not-the-token", 30, now=at(5))
    assert lost.value.reason is None


@pytest.mark.parametrize(
    "bad",
    [
        NewLead({}, max_runtime_s=0),
        NewLead({}, max_runtime_s=86_401),
        NewLead({}, max_runtime_s=1.5),  # type: ignore[arg-type]
        NewLead({}, concurrency_key=""),
        NewLead({}, concurrency_key="k" * 129),
        NewLead({}, concurrency_key="a\x00b"),
        NewLead({}, concurrency_key=7),  # type: ignore[arg-type]
    ],
)
async def test_hostile_flow_fields_of_a_push_write_nothing(queue: Queue, bad: NewLead) -> None:
    with pytest.raises(InvalidInput):
        await queue.push("s", [NewLead({}), bad])
    assert (await queue.stats("s")).queued == 0


@pytest.mark.parametrize(
    "bad",
    [
        SessionSettings(max_leased_per_key=0),
        SessionSettings(max_leased_per_key=2**31),
        SessionSettings(max_runtime_s=0),
        SessionSettings(max_runtime_s=86_401),
        SessionSettings(max_runtime_s=True),  # type: ignore[arg-type]
    ],
)
async def test_hostile_flow_settings_store_nothing(queue: Queue, bad: SessionSettings) -> None:
    with pytest.raises(InvalidInput):
        await queue.put_settings("s", bad)
    assert await queue.settings_all() == {}


def _done(lease: Lease) -> CompleteItem:
    return CompleteItem(lease.lead.id, lease.token)
