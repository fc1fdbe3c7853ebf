"""The signal to scale on (docs/beyond.md#a-signal-to-scale-on): a session's backlog, the leads
it holds, the age of its oldest available lead, its completions per second over the last
minute, and the workers that would keep its wait under a target.

Everything comes from cheap reads: the kept counts (``lead_counts``), the oldest available
lead (one probe of ``leads_ready_age``), and the leads finished in the last minute (a range
of ``leads_terminal_updated``): none scans the backlog. Knows nothing of HTTP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

from app.domain import validation
from app.domain.queue import Queue
from app.store import statements
from leaseq.model import AllCounts, Counts, Scaling

WINDOW_S = 60.0  # completions per second are counted over this many seconds
DEFAULT_TARGET_WAIT_S = 60.0
MAX_TARGET_WAIT_S = 86_400.0
FLEET = "*"  # the ``session`` of a fleet's total


def suggested_workers(
    backlog: int, leased: int, completions_per_s: float, target_wait_s: float
) -> int:
    """Workers enough to finish the backlog and the leads in flight within ``target_wait_s``,
    each at the rate the workers holding leads finished them over the last minute.

    0 when nothing is queued or leased. Without a rate (nothing finished in the last minute:
    no workers yet, or leads that run longer than a minute) it cannot size the pool: it asks
    for one worker more than the leads held, up to twice them, never more than there are
    leads. Never more workers than leads either way: a worker beyond them would idle.
    """
    if backlog <= 0 and leased <= 0:
        return 0
    if completions_per_s <= 0:
        wanted = leased + min(backlog, max(leased, 1))
    else:
        per_worker = completions_per_s / max(leased, 1)
        wanted = math.ceil((backlog + leased) / (per_worker * target_wait_s))
    return max(1, min(wanted, backlog + leased))


def scaling_of(session: str, counts: Counts, completed: int, target_wait_s: float) -> Scaling:
    rate = completed / WINDOW_S
    return Scaling(
        session=session,
        backlog=counts.queued,
        leased=counts.leased,
        oldest_available_age_s=counts.oldest_available_age_s,
        completions_per_s=rate,
        suggested_workers=suggested_workers(counts.queued, counts.leased, rate, target_wait_s),
    )


def target_wait(value: float | None) -> float:
    """A target wait in seconds (> 0); None: the default. Raises InvalidInput."""
    if value is None:
        return DEFAULT_TARGET_WAIT_S
    return validation.number(
        "target_wait_s", value, low=0, high=MAX_TARGET_WAIT_S, low_inclusive=False
    )


async def session_scaling(
    queue: Queue, session: str, target_wait_s: float | None = None, *, now: datetime | None = None
) -> Scaling:
    """One session's signal."""
    target = target_wait(target_wait_s)
    counts = await queue.stats(session, now=now)
    [row] = await queue.db.rows(statements.completions(session=session, window_s=WINDOW_S, now=now))
    return scaling_of(session, counts, int(row["n"]), target)


async def completed_by_session(queue: Queue, *, now: datetime | None = None) -> dict[str, int]:
    """Leads finished in the last minute, per session that finished any."""
    rows = await queue.db.rows(statements.completions_all(window_s=WINDOW_S, now=now))
    return {row["session"]: int(row["n"]) for row in rows}


async def lease_seconds_by_session(
    queue: Queue, *, now: datetime | None = None
) -> dict[str, float]:
    """The seconds the workers held each session's leads, over the leases that ended in the
    last minute (docs/beyond.md#fair-share-by-time): what fair share by time measures, per
    session that ended any. One statement, a range of ``lead_events_outcomes_at``."""
    rows = await queue.db.rows(statements.lease_seconds_recent(window_s=WINDOW_S, now=now))
    return {row["session"]: float(row["seconds"]) for row in rows}


def time_shares(lease_seconds: dict[str, float], sessions: Iterable[str]) -> dict[str, float]:
    """Each of ``sessions``' share (0 to 1) of the lease seconds of them all; {} when none of
    them held a lease that ended."""
    names = list(sessions)
    total = sum(lease_seconds.get(name, 0.0) for name in names)
    if total <= 0:
        return {}
    return {name: lease_seconds.get(name, 0.0) / total for name in names}


def fleet_scaling(
    counts: AllCounts, completed: dict[str, int], target_wait_s: float | None = None
) -> tuple[dict[str, Scaling], Scaling]:
    """Each session's signal, and the fleet's (``session`` ``*``): one pool of workers for all
    of ``counts``' sessions, sized by their totals."""
    target = target_wait(target_wait_s)
    sessions = {
        name: scaling_of(name, c, completed.get(name, 0), target)
        for name, c in counts.sessions.items()
    }
    done = sum(completed.get(name, 0) for name in counts.sessions)
    return sessions, scaling_of(FLEET, counts.total, done, target)
