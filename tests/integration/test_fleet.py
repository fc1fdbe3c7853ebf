"""Leasing across sessions (``app.leasing.fleet``): fair shares by weight, measured over many
leases.

Every figure is a count of leases the real queue handed out; the tolerance is
one lease (the clocks move in whole leases).
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from collections.abc import Sequence
from typing import Any

import pytest

from app.domain.queue import Queue
from app.leasing.fleet import FAILED_RETRY_S, Fleet
from app.leasing.session import Leased
from app.store.pool import Database, StatementFailed
from leaseq.errors import InvalidInput, Unavailable
from leaseq.limits import MIN_RATE_PER_S
from leaseq.model import NewLead, SessionSettings
from tests.support import CONNECTION_LOST, T0, UNSERVABLE, across, at, leasing_of, unservable


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
        for lease in await fleet.lease(across(sessions, "w", max=max, ttl_s=600), now=T0):
            got[lease.lead.session] += 1
    return got


async def test_equal_weights_split_equally_whatever_the_backlogs(queue: Queue) -> None:
    await fill(queue, {"big": 2000, "small": 150})
    got = await shares(Fleet(leasing_of(queue).sessions), 200)
    assert sum(got.values()) == 200
    assert abs(got["big"] - got["small"]) <= 1, got  # 100 each, though one has 13 times the work


async def test_weights_three_and_one_split_three_to_one(queue: Queue) -> None:
    await fill(queue, {"heavy": 400, "light": 400})
    await queue.put_settings("heavy", SessionSettings(weight=3))
    got = await shares(Fleet(leasing_of(queue).sessions), 200, ["heavy", "light"])
    assert abs(got["heavy"] - 150) <= 1 and abs(got["light"] - 50) <= 1, got


async def test_weights_hold_for_batches_too(queue: Queue) -> None:
    await fill(queue, {"a": 800, "b": 800, "c": 800})
    await queue.put_settings("a", SessionSettings(weight=2))
    got = await shares(Fleet(leasing_of(queue).sessions), 40, max=10)  # 400 leads in batches of 10
    assert got["a"] == 200 and got["b"] == got["c"] == 100, got


async def test_a_session_back_from_idle_gets_its_share_not_a_burst(queue: Queue) -> None:
    await fill(queue, {"steady": 1000})
    fleet = Fleet(leasing_of(queue).sessions)
    assert await shares(fleet, 100) == {"steady": 100}
    await fill(queue, {"late": 1000})
    fleet.work_arrived("late")  # as its NOTIFY says
    got = await shares(fleet, 40)
    # It starts at the clock served last: half of what follows, not its 100 missed leases.
    assert abs(got["late"] - 20) <= 1 and abs(got["steady"] - 20) <= 1, got


async def test_a_lease_chooses_only_among_the_sessions_asked(queue: Queue) -> None:
    await fill(queue, {"a": 5, "b": 5, "c": 5})
    fleet = Fleet(leasing_of(queue).sessions)
    got = await shares(fleet, 20, ["b", "c"])
    assert got == {"b": 5, "c": 5}  # then empty: the others' leads are not theirs
    assert await fleet.lease(across(["b", "c"], "w"), now=T0) == []
    assert await shares(fleet, 5) == {"a": 5}


async def test_work_pushed_later_is_found_without_a_notification(queue: Queue) -> None:
    fleet = Fleet(leasing_of(queue).sessions)
    assert await fleet.lease(across(None, "w"), now=T0) == []
    await fill(queue, {"quiet": 1})
    await asyncio.sleep(0.15)  # the empty view is read again after EMPTY_REFRESH_S
    [lease] = await fleet.lease(across(None, "w"), now=T0)
    assert lease.lead.session == "quiet"


async def test_a_capped_session_is_skipped_never_waited_on(queue: Queue) -> None:
    await fill(queue, {"capped": 50, "free": 50})
    await queue.put_settings("capped", SessionSettings(max_leased=2))
    fleet = Fleet(leasing_of(queue).sessions)
    async with asyncio.timeout(5):
        got = await shares(fleet, 20)
    assert got == {"capped": 2, "free": 18}
    assert (await queue.stats("capped")).leased == 2


async def test_a_throttled_session_is_skipped_until_its_next_token(queue: Queue) -> None:
    await fill(queue, {"slow": 50, "fast": 50})
    await queue.put_settings("slow", SessionSettings(rate_per_s=1, burst=3))
    fleet = Fleet(leasing_of(queue).sessions)
    got = await shares(fleet, 12)
    assert got == {"slow": 3, "fast": 9}  # its burst, then nothing until a token comes


async def test_concurrent_leases_across_sessions_are_fair_and_never_double(
    db: Database,
) -> None:
    queue = Queue(db)
    await fill(queue, {"x": 600, "y": 600, "z": 600})
    await queue.put_settings("z", SessionSettings(weight=2))
    fleet = Fleet(leasing_of(queue).sessions)
    seen: list[int] = []
    by_session: Counter[str] = Counter()

    async def leaser() -> None:
        for _ in range(25):
            for lease in await fleet.lease(across(None, "w", max=2, ttl_s=600), now=T0):
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
    fleet = Fleet(leasing_of(queue).sessions)
    first = await fleet.lease(across(["a", "b"], "w", max=3, idempotency_key="k-1"), now=T0)
    again = await fleet.lease(across(["a", "b"], "w", max=3, idempotency_key="k-1"), now=T0)
    assert len(first) == 3 and [x.token for x in again] == [x.token for x in first]
    with pytest.raises(InvalidInput):  # the key names that request, not another
        await fleet.lease(across(["a"], "w", max=3, idempotency_key="k-1"), now=T0)


@pytest.mark.parametrize(
    ("sessions", "owner", "max_"),
    [([], "w", 1), (["bad name"], "w", 1), (["a"] * 0 + ["ok"], "", 1), (["ok"], "w", 0)],
)
async def test_bad_input_is_refused_before_anything_is_leased(
    queue: Queue, sessions: list[str], owner: str, max_: int
) -> None:
    await fill(queue, {"ok": 3})
    with pytest.raises(InvalidInput):
        await Fleet(leasing_of(queue).sessions).lease(across(sessions, owner, max=max_), now=T0)
    assert (await queue.stats("ok")).queued == 3


class Clock:
    """A monotonic clock moved by hand (the fleet's holds and reads are timed on it)."""

    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


def skips(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "leaseq.fleet"]


async def test_a_session_held_back_by_its_rate_is_tried_again_once_its_settings_change(
    queue: Queue,
) -> None:
    """The slowest rate holds a session back for a million seconds after its burst; a new
    rate, seen at the fleet's next read of the view, lets it lease again at once."""
    await fill(queue, {"slow": 10})
    await queue.put_settings("slow", SessionSettings(rate_per_s=MIN_RATE_PER_S))
    clock = Clock()
    fleet = Fleet(leasing_of(queue).sessions, clock=clock)
    assert await shares(fleet, 3, ["slow"]) == {"slow": 1}  # its burst of one, then held
    clock.t += 2.0
    await fleet.read()
    assert await fleet.lease(across(["slow"], "w"), now=at(1)) == []  # settings unchanged: held
    await queue.put_settings("slow", SessionSettings(rate_per_s=1000))
    await fleet.read()
    assert len(await fleet.lease(across(["slow"], "w", max=5), now=at(1))) == 5


@pytest.mark.parametrize("how", sorted(UNSERVABLE))
async def test_a_session_whose_lease_fails_is_skipped_logged_and_the_others_lease(
    db: Database, caplog: pytest.LogCaptureFixture, how: str
) -> None:
    """One session's rows fail its lease statement (written in SQL, bypassing the API): a
    lease across sessions skips it, logs the failure once, and serves the others; after
    FAILED_RETRY_S it is tried (and logged) again, and once repaired it leases again."""
    queue = Queue(db)
    await fill(queue, {"broken": 5, "ok-a": 20, "ok-b": 20})
    await queue.put_settings("broken", SessionSettings(rate_per_s=100, burst=100))
    await db.rows(unservable(how, "broken"))
    clock = Clock()
    fleet = Fleet(leasing_of(queue).sessions, clock=clock)
    with caplog.at_level(logging.ERROR, logger="leaseq.fleet"):
        got = await shares(fleet, 20)
        assert got == {"ok-a": 10, "ok-b": 10}
        [logged] = skips(caplog)  # one failure, one line: skipped after it, not tried again
        assert "broken" in logged and "NumericValueOutOfRange" in logged, logged
        assert (await queue.stats("broken")).queued == 5  # nothing of it leased

        clock.t += FAILED_RETRY_S
        assert sum((await shares(fleet, 4)).values()) == 4
        assert len(skips(caplog)) == 2  # tried again, failed again: logged again

        await db.rows(
            'DROP TRIGGER IF EXISTS "unservable broken" ON session_settings;'
            "UPDATE leads SET attempts = 0 WHERE session = 'broken'"
        )
        clock.t += FAILED_RETRY_S
        assert (await shares(fleet, 1)) == {"broken": 1}  # furthest behind: it goes first
    assert len(skips(caplog)) == 2


async def test_a_session_that_fails_during_concurrent_leases_costs_the_others_nothing(
    db: Database, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """16 leases across sessions at once, while one session's statement fails (the callers
    of one grouped statement share its failure): every lease answers, the others' leads each
    go once, and each failure is logged once, not once per caller that met it."""
    queue = Queue(db)
    await fill(queue, {"broken": 50, "ok-a": 200, "ok-b": 200})
    await db.rows(unservable("lead", "broken"))
    met: list[BaseException] = []  # the failures each caller met (kept: ids stay unique)
    sessions = leasing_of(queue).sessions
    lease_one = sessions.lease

    async def noted(*args: Any, **kwargs: Any) -> Leased:
        try:
            return await lease_one(*args, **kwargs)
        except StatementFailed as exc:
            met.append(exc)
            raise

    monkeypatch.setattr(sessions, "lease", noted)
    fleet = Fleet(sessions)
    seen: list[int] = []

    async def leaser() -> None:
        for _ in range(10):
            seen.extend(x.lead.id for x in await fleet.lease(across(None, "w", ttl_s=600), now=T0))

    with caplog.at_level(logging.ERROR, logger="leaseq.fleet"):
        async with asyncio.timeout(60):
            await asyncio.gather(*(leaser() for _ in range(16)))
    assert len(seen) == len(set(seen)) == 160
    assert (await queue.stats("broken")).queued == 50
    logged = skips(caplog)
    assert met and len(logged) == len({id(exc) for exc in met}), (len(met), logged)
    assert all("broken" in line for line in logged), logged


async def test_an_outage_in_a_sessions_lease_is_unavailable_not_skipped(
    db: Database, caplog: pytest.LogCaptureFixture
) -> None:
    """The connection lost in the middle of one session's lease is an outage: the lease
    across sessions raises Unavailable (503 over HTTP) rather than skip it as unservable."""
    queue = Queue(db)
    await fill(queue, {"dying": 3})
    await db.rows(CONNECTION_LOST.format(session="dying"))
    fleet = Fleet(leasing_of(queue).sessions)
    with caplog.at_level(logging.ERROR, logger="leaseq.fleet"), pytest.raises(Unavailable):
        await fleet.lease(across(["dying"], "w"), now=T0)
    assert skips(caplog) == []
    assert (await queue.stats("dying")).queued == 3
