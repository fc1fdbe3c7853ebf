"""What the dashboard shows, read through the queue's connection handling (no HTTP here).

One ``snapshot`` is seven statements on one connection: the database clock,
whether the server runs autovacuum, counts per session (``sql.stats_all``),
the age of the oldest queued lead per session, completions and wasted
attempts per minute over the last ``WINDOW_MINUTES`` (from the ledger), the
leases closest to expiry and the latest failures.

The window is read through index ``lead_events_outcomes_at`` (the ends of
attempts by time), so its cost follows the events in the window, not the size
of the ledger. With the ledger off the chart stays flat.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any, cast

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app import sql
from app.model import Counts
from app.queue import Queue

WINDOW_MINUTES = 15
MAX_SESSIONS = 100
EXPIRING = 10
FAILURES = 10
STATUSES = ("queued", "leased", "done", "failed", "cached")
OUTCOME_EVENTS = "('completed', 'expired', 'released')"


@dataclass(frozen=True, slots=True)
class SessionView:
    """One session's line: counts, the oldest queued lead's age, and its last minutes."""

    name: str
    counts: Counts
    oldest_queued_s: float | None = None
    completed_per_minute: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)
    wasted_per_minute: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)


@dataclass(frozen=True, slots=True)
class ExpiringLease:
    lead_id: int
    session: str
    owner: str | None
    attempt: int
    expires_in_s: float


@dataclass(frozen=True, slots=True)
class Failure:
    lead_id: int
    session: str
    owner: str | None
    attempts: int
    error: str | None
    at: datetime


@dataclass(frozen=True, slots=True)
class Snapshot:
    """Everything on the page at one instant of the database clock.

    ``*_per_minute`` lists run from the oldest minute to the current one.
    ``hidden_sessions`` is how many sessions beyond ``MAX_SESSIONS`` (the least
    pending) are counted in ``total`` but not listed. ``autovacuum`` is what the
    server says of it (``SHOW autovacuum``); off, the tables only grow.
    """

    now: datetime
    sessions: list[SessionView]
    total: SessionView
    hidden_sessions: int
    expiring: list[ExpiringLease]
    failures: list[Failure]
    autovacuum: bool = True


@cache
def oldest_queued() -> TextClause:
    """Seconds since the oldest leasable queued lead of each session became leasable."""
    return text("""
SELECT session, extract(epoch FROM now() - min(available_at)) AS age_s
FROM leads WHERE status = 'queued' AND available_at <= now()
GROUP BY session
""")


@cache
def per_minute() -> TextClause:
    """Completions and wasted attempts (expired or released leases) per session and minute ago.

    The event filter is the predicate of index ``lead_events_outcomes_at``, word for word.
    """
    return text(f"""
SELECT session,
       least(floor(extract(epoch FROM now() - at) / 60), {WINDOW_MINUTES - 1})::int AS ago,
       count(*) FILTER (WHERE event = 'completed') AS completed,
       count(*) FILTER (WHERE event IN ('expired', 'released')) AS wasted
FROM lead_events
WHERE event IN {OUTCOME_EVENTS}
  AND at >= now() - interval '{WINDOW_MINUTES} minutes' AND at <= now()
GROUP BY 1, 2
""")


@cache
def expiring() -> TextClause:
    """The leases that end soonest (index ``leads_leased_expiry``)."""
    return text("""
SELECT id, session, owner, attempts,
       extract(epoch FROM lease_expires_at - now()) AS expires_in_s
FROM leads WHERE status = 'leased'
ORDER BY lease_expires_at LIMIT :limit
""")


@cache
def failures() -> TextClause:
    """The most recently failed leads."""
    return text("""
SELECT id, session, owner, attempts, error, updated_at
FROM leads WHERE status = 'failed'
ORDER BY updated_at DESC, id DESC LIMIT :limit
""")


Rows = list[Mapping[str, Any]]


async def _read(conn: AsyncConnection) -> tuple[datetime, bool, Rows, Rows, Rows, Rows, Rows]:
    async def rows(stmt: TextClause, **params: Any) -> Rows:
        return [cast(Mapping[str, Any], r._mapping) for r in await conn.execute(stmt, params)]

    [now] = await rows(sql.db_now())
    [autovacuum] = await rows(sql.autovacuum())
    return (
        cast(datetime, now["now"]),
        bool(autovacuum["enabled"]),
        await rows(sql.stats_all()),
        await rows(oldest_queued()),
        await rows(per_minute()),
        await rows(expiring(), limit=EXPIRING),
        await rows(failures(), limit=FAILURES),
    )


def _counts(rows: Sequence[Mapping[str, Any]]) -> dict[str, Counts]:
    by: dict[str, dict[str, int]] = {}
    for row in rows:
        by.setdefault(row["session"], {})[row["status"]] = int(row["n"])
    return {name: Counts(**found) for name, found in by.items()}


async def snapshot(queue: Queue) -> Snapshot:
    """What the dashboard shows now. Raises Unavailable when the database does not answer."""
    (
        now,
        autovacuum,
        counts_rows,
        oldest_rows,
        minute_rows,
        expiring_rows,
        failure_rows,
    ) = await queue.with_connection(_read)
    counts = _counts(counts_rows)
    oldest = {r["session"]: float(r["age_s"]) for r in oldest_rows}
    completed: dict[str, list[int]] = {}
    wasted: dict[str, list[int]] = {}
    for row in minute_rows:
        slot = WINDOW_MINUTES - 1 - int(row["ago"])
        completed.setdefault(row["session"], [0] * WINDOW_MINUTES)[slot] += int(row["completed"])
        wasted.setdefault(row["session"], [0] * WINDOW_MINUTES)[slot] += int(row["wasted"])
    names = set(counts) | set(completed)
    views = [
        SessionView(
            name,
            counts.get(name, Counts()),
            oldest.get(name),
            completed.get(name, [0] * WINDOW_MINUTES),
            wasted.get(name, [0] * WINDOW_MINUTES),
        )
        for name in names
    ]
    views.sort(key=lambda v: (-v.counts.pending, v.name))
    total = Counts()
    for view in views:
        total = total + view.counts
    total_view = SessionView(
        "total",
        total,
        max(oldest.values(), default=None),
        [sum(v.completed_per_minute[i] for v in views) for i in range(WINDOW_MINUTES)],
        [sum(v.wasted_per_minute[i] for v in views) for i in range(WINDOW_MINUTES)],
    )
    return Snapshot(
        now=now,
        sessions=sorted(views[:MAX_SESSIONS], key=lambda v: v.name),
        total=total_view,
        hidden_sessions=max(0, len(views) - MAX_SESSIONS),
        expiring=[
            ExpiringLease(
                int(r["id"]), r["session"], r["owner"], int(r["attempts"]), float(r["expires_in_s"])
            )
            for r in expiring_rows
        ],
        failures=[
            Failure(
                int(r["id"]),
                r["session"],
                r["owner"],
                int(r["attempts"]),
                r["error"],
                r["updated_at"],
            )
            for r in failure_rows
        ],
        autovacuum=autovacuum,
    )
