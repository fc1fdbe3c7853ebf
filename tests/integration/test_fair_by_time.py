"""Fair share by time (docs/beyond.md#fair-share-by-time): with ``fair_by="time"`` a lease across
sessions shares the workers' time by weight, whatever each session's leads last; by count
(the default) it shares leases.

Deterministic: eight simulated workers lease across two sessions through the real queue
and fleet, each holding a lead for its session's time on the injected database clock (1 s
or 0.1 s) and completing it then; the fleet's view is read once a simulated second, as its
refresh does. The worker-time each session took is added up over 20 simulated seconds.
(bench/fair_time.py measures the same with real workers and real time.)
"""

from __future__ import annotations

import heapq
from datetime import timedelta

import pytest

from app.domain.queue import Queue
from app.leasing.fleet import Fleet
from leaseq.model import NewLead, SessionSettings
from tests.support import across, leasing_of

DURATIONS = {"slow": 1.0, "fast": 0.1}
WORKERS = 8
HORIZON_S = 20.0


async def worker_time(queue: Queue, fair_by: str, weights: dict[str, float]) -> dict[str, float]:
    """Each session's share of the workers' time over ``HORIZON_S`` simulated seconds."""
    for session, weight in weights.items():
        await queue.put_settings(session, SessionSettings(weight=weight))
    for session in DURATIONS:
        for _ in range(3):
            await queue.push(session, [NewLead({"n": n}) for n in range(1000)])
    simulated = [0.0]
    fleet = Fleet(leasing_of(queue).sessions, clock=lambda: simulated[0], fair_by=fair_by)
    base = await queue.db_now()
    busy = dict.fromkeys(DURATIONS, 0.0)
    free = [(0.0, w) for w in range(WORKERS)]
    read_at = -1.0
    while free:
        at, worker = heapq.heappop(free)
        if at >= HORIZON_S:
            continue
        simulated[0] = at
        if at - read_at >= 1.0:
            await fleet.read()
            read_at = at
        now = base + timedelta(seconds=at)
        [lease] = await fleet.lease(across(None, f"w{worker}", ttl_s=600), now=now)
        held = DURATIONS[lease.lead.session]
        ends = now + timedelta(seconds=held)
        await queue.complete(lease.lead.id, lease.token, now=ends)
        busy[lease.lead.session] += min(held, HORIZON_S - at)
        heapq.heappush(free, (at + held, worker))
    total = sum(busy.values())
    return {session: seconds / total for session, seconds in busy.items()}


async def test_by_time_equal_weights_share_the_workers_time_equally(queue: Queue) -> None:
    share = await worker_time(queue, "time", {})
    assert share["slow"] == pytest.approx(0.5, abs=0.1), share


@pytest.mark.slow  # two simulated minutes of eight workers: about 30 s of round trips
async def test_by_time_weights_three_and_one_share_it_three_to_one(queue: Queue) -> None:
    share = await worker_time(queue, "time", {"slow": 3})
    assert share["slow"] == pytest.approx(0.75, abs=0.1), share
    again = await worker_time(queue, "time", {"slow": 1, "fast": 3})
    assert again["fast"] == pytest.approx(0.75, abs=0.1), again


async def test_by_count_the_long_leads_take_the_workers_time(queue: Queue) -> None:
    """The default: equal numbers of leases, so the session whose leads last ten times longer
    takes ten elevenths of the workers' time."""
    share = await worker_time(queue, "count", {})
    assert share["slow"] == pytest.approx(10 / 11, abs=0.05), share


def test_an_unknown_way_is_refused(queue: Queue) -> None:
    with pytest.raises(ValueError, match="fair_by"):
        Fleet(leasing_of(queue).sessions, fair_by="size")
