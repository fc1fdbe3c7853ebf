"""Leasing across sessions (``app.fleet``): fair shares by weight, measured over many leases.

Every figure is a count of leases the real queue handed out; the tolerance is
one lease (the clocks move in whole leases).
"""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence

import pytest

from app.fleet import Fleet
from app.pg import Database
from app.queue import Queue
from leaseq.errors import InvalidInput
from leaseq.model import NewLead, SessionSettings
from tests.support import T0


async def fill(queue: Queue, backlogs: dict[str, int]) -> None:
    for session, n in backlogs.items():
        for start in range(0, n, 1000):
            await queue.push(
                session, [NewLead({"i": i}) for i in range(start, min(n, start + 1000))]
            )


async def shares(
    fleet: Fleet, leases: int, sessions: Sequence[str] | None = None, *, max: int = 1
) -> Counter[str]:
    """Lease ``leases`` times (``max`` each) across ``sessions``; the leads each session gave."""
    got: Counter[str] = Counter()
    for _ in range(leases):
        for lease in await fleet.lease(sessions, "w", max=max, ttl_s=600, now=T0):
            got[lease.lead.session] += 1
    return got


async def test_equal_weights_split_equally_whatever_the_backlogs(queue: Queue) -> None:
    await fill(queue, {"big": 2000, "small": 150})
    got = await shares(Fleet(queue), 200)
    assert sum(got.values()) == 200
    assert abs(got["big"] - got["small"]) <= 1, got  # 100 each, though one has 13 times the work


async def test_weights_three_and_one_split_three_to_one(queue: Queue) -> None:
    await fill(queue, {"heavy": 400, "light": 400})
    await queue.put_settings("heavy", SessionSettings(weight=3))
    got = await shares(Fleet(queue), 200, ["heavy", "light"])
    assert abs(got["heavy"] - 150) <= 1 and abs(got["light"] - 50) <= 1, got


async def test_weights_hold_for_batches_too(queue: Queue) -> None:
    await fill(queue, {"a": 800, "b": 800, "c": 800})
    await queue.put_settings("a", SessionSettings(weight=2))
    got = await shares(Fleet(queue), 40, max=10)  # 400 leads in batches of 10
    assert got["a"] == 200 and got["b"] == got["c"] == 100, got


async def test_a_session_back_from_idle_gets_its_share_not_a_burst(queue: Queue) -> None:
    await fill(queue, {"steady": 1000})
    fleet = Fleet(queue)
    assert await shares(fleet, 100) == {"steady": 100}
    await fill(queue, {"late": 1000})
    fleet.work_arrived("late")  # as its NOTIFY says
    got = await shares(fleet, 40)
    # It starts at the clock served last: half of what follows, not its 100 missed leases.
    assert abs(got["late"] - 20) <= 1 and abs(got["steady"] - 20) <= 1, got


async def test_a_lease_chooses_only_among_the_sessions_asked(queue: Queue) -> None:
    await fill(queue, {"a": 5, "b": 5, "c": 5})
    fleet = Fleet(queue)
    got = await shares(fleet, 20, ["b", "c"])
    assert got == {"b": 5, "c": 5}  # then empty: the others' leads are not theirs
    assert await fleet.lease(["b", "c"], "w", now=T0) == []
    assert await shares(fleet, 5) == {"a": 5}


async def test_work_pushed_later_is_found_without_a_notification(queue: Queue) -> None:
    fleet = Fleet(queue)
    assert await fleet.lease(None, "w", now=T0) == []
    await fill(queue, {"quiet": 1})
    await asyncio.sleep(0.15)  # the empty view is read again after EMPTY_REFRESH_S
    [lease] = await fleet.lease(None, "w", now=T0)
    assert lease.lead.session == "quiet"


async def test_a_capped_session_is_skipped_never_waited_on(queue: Queue) -> None:
    await fill(queue, {"capped": 50, "free": 50})
    await queue.put_settings("capped", SessionSettings(max_leased=2))
    fleet = Fleet(queue)
    async with asyncio.timeout(5):
        got = await shares(fleet, 20)
    assert got == {"capped": 2, "free": 18}
    assert (await queue.stats("capped")).leased == 2


async def test_a_throttled_session_is_skipped_until_its_next_token(queue: Queue) -> None:
    await fill(queue, {"slow": 50, "fast": 50})
    await queue.put_settings("slow", SessionSettings(rate_per_s=1, burst=3))
    fleet = Fleet(queue)
    got = await shares(fleet, 12)
    assert got == {"slow": 3, "fast": 9}  # its burst, then nothing until a token comes


async def test_concurrent_leases_across_sessions_are_fair_and_never_double(
    db: Database,
) -> None:
    queue = Queue(db)
    await fill(queue, {"x": 600, "y": 600, "z": 600})
    await queue.put_settings("z", SessionSettings(weight=2))
    fleet = Fleet(queue)
    seen: list[int] = []
    by_session: Counter[str] = Counter()

    async def leaser() -> None:
        for _ in range(25):
            for lease in await fleet.lease(None, "w", max=2, ttl_s=600, now=T0):
                seen.append(lease.lead.id)
                by_session[lease.lead.session] += 1

    async with asyncio.timeout(60):
        await asyncio.gather(*(leaser() for _ in range(16)))
    assert len(seen) == len(set(seen)) == 800
    # 1 : 1 : 2 of 800, within a batch or two of the requests in flight.
    assert abs(by_session["x"] - 200) <= 8 and abs(by_session["y"] - 200) <= 8, by_session
    assert abs(by_session["z"] - 400) <= 8, by_session


async def test_a_lease_across_sessions_sent_again_with_its_key_gets_the_same_leases(
    queue: Queue,
) -> None:
    await fill(queue, {"a": 10, "b": 10})
    fleet = Fleet(queue)
    first = await fleet.lease(["a", "b"], "w", max=3, idempotency_key="k-1", now=T0)
    again = await fleet.lease(["a", "b"], "w", max=3, idempotency_key="k-1", now=T0)
    assert len(first) == 3 and [x.token for x in again] == [x.token for x in first]
    with pytest.raises(InvalidInput):  # the key names that request, not another
        await fleet.lease(["a"], "w", max=3, idempotency_key="k-1", now=T0)


@pytest.mark.parametrize(
    ("sessions", "owner", "max_"),
    [([], "w", 1), (["bad name"], "w", 1), (["a"] * 0 + ["ok"], "", 1), (["ok"], "w", 0)],
)
async def test_bad_input_is_refused_before_anything_is_leased(
    queue: Queue, sessions: list[str], owner: str, max_: int
) -> None:
    await fill(queue, {"ok": 3})
    with pytest.raises(InvalidInput):
        await Fleet(queue).lease(sessions, owner, max=max_, now=T0)
    assert (await queue.stats("ok")).queued == 3
