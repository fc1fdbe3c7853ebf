"""The operator's overview of the queue at one instant: what the dashboard shows.

One ``snapshot`` is eleven statements (``app.store.statements``) on one connection: the
database clock, whether the server runs autovacuum, counts per session (and the blocked
leads), the age of the oldest available lead per session, the sessions' settings (weight,
cap, rate), completions and wasted attempts per minute over the last
``WINDOW_MINUTES`` (from the ledger), the leases closest to expiry, the
latest failures, and the signal to scale on's two reads of the last minute: the leads
finished (``completions_all``, for each session's suggested workers, as ``GET /scaling``
computes them) and the seconds the leases that ended lasted (``lease_seconds_recent``: each
session's share of the workers' time, as fair share by time measures it). Part of the
domain, as the report is: the dashboard (``app.dashboard``) shapes it, and knows no SQL.

The window is read through index ``lead_events_outcomes_at`` (the ends of
attempts by time), so its cost follows the events in the window, not the size
of the ledger. With the ledger off the chart stays flat.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import cast

from app.domain import scaling
from app.domain.queue import Queue, counts_by_session, settings_of
from app.store import statements
from app.store.pool import Connection, Row, execute
from leaseq.model import Counts, SessionSettings

WINDOW_MINUTES = statements.WINDOW_MINUTES
MAX_SESSIONS = 100
EXPIRING = 10
FAILURES = 10


@dataclass(frozen=True, slots=True)
class SessionView:
    """One session's line: counts (with its oldest available lead's age), its last minutes,
    and its settings (None for the total, which has none); the seconds workers held its leads
    over the leases that ended in the last minute, and the workers it calls for (the
    signal to scale on's, for its default target wait; the total's: one pool for all)."""

    name: str
    counts: Counts
    completed_per_minute: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)
    wasted_per_minute: list[int] = field(default_factory=lambda: [0] * WINDOW_MINUTES)
    settings: SessionSettings | None = None
    lease_seconds: float = 0.0
    suggested_workers: int = 0


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
    pending; of those the search matched) are counted in ``total`` but not listed.
    ``autovacuum`` is what the server says of it (``SHOW autovacuum``); off, the tables
    only grow.
    """

    now: datetime
    sessions: list[SessionView]
    total: SessionView
    hidden_sessions: int
    expiring: list[ExpiringLease]
    failures: list[Failure]
    autovacuum: bool = True


Rows = list[Row]


async def _read(
    conn: Connection,
) -> tuple[datetime, bool, Rows, Rows, Rows, Rows, Rows, Rows, Rows, Rows, Rows]:
    [now] = await execute(conn, statements.db_now())
    [autovacuum] = await execute(conn, statements.autovacuum())
    return (
        cast(datetime, now["now"]),
        bool(autovacuum["enabled"]),
        await execute(conn, statements.stats_all()),
        await execute(conn, statements.blocked(session=None)),
        await execute(conn, statements.oldest_available(now=None)),
        await execute(conn, statements.settings_all(now=None)),
        await execute(conn, statements.per_minute(window_minutes=WINDOW_MINUTES)),
        await execute(conn, statements.expiring(limit=EXPIRING)),
        await execute(conn, statements.failures(limit=FAILURES)),
        await execute(conn, statements.completions_all(window_s=scaling.WINDOW_S, now=None)),
        await execute(conn, statements.lease_seconds_recent(window_s=scaling.WINDOW_S, now=None)),
    )


def _workers(name: str, counts: Counts, finished: int) -> int:
    """The workers ``counts`` call for, ``finished`` leads in the last minute, at the signal's
    default target wait (``GET /scaling``'s answer without ``target_wait_s``)."""
    return scaling.scaling_of(
        name, counts, finished, scaling.DEFAULT_TARGET_WAIT_S
    ).suggested_workers


async def snapshot(
    queue: Queue, search: str | None = None, *, visible: Callable[[str], bool] | None = None
) -> Snapshot:
    """What the dashboard shows now. Raises Unavailable when the database does not answer.

    With ``search``, only the sessions whose name holds it (in any case) are listed; the
    total still counts every session. With ``visible`` (a scoped token's sessions), nothing
    of any other session is shown or counted, not even in the total; the expiring leases
    and latest failures are then those of the visible sessions among the latest read.
    """
    (
        now,
        autovacuum,
        counts_rows,
        blocked_rows,
        oldest_rows,
        settings_rows,
        minute_rows,
        expiring_rows,
        failure_rows,
        recent_rows,
        lease_rows,
    ) = await queue.db.run(_read)
    finished = {r["session"]: int(r["n"]) for r in recent_rows}
    held = {r["session"]: float(r["seconds"]) for r in lease_rows}
    counts = counts_by_session(counts_rows, oldest_rows, blocked_rows)
    settings = {r["session"]: settings_of(r) for r in settings_rows}
    completed: dict[str, list[int]] = {}
    wasted: dict[str, list[int]] = {}
    for row in minute_rows:
        slot = WINDOW_MINUTES - 1 - int(row["ago"])
        completed.setdefault(row["session"], [0] * WINDOW_MINUTES)[slot] += int(row["completed"])
        wasted.setdefault(row["session"], [0] * WINDOW_MINUTES)[slot] += int(row["wasted"])
    names = set(counts) | set(completed) | set(settings) | set(held)
    if visible is not None:
        names = {name for name in names if visible(name)}
        expiring_rows = [row for row in expiring_rows if visible(row["session"])]
        failure_rows = [row for row in failure_rows if visible(row["session"])]
    views = [
        SessionView(
            name,
            counts.get(name, Counts()),
            completed.get(name, [0] * WINDOW_MINUTES),
            wasted.get(name, [0] * WINDOW_MINUTES),
            settings.get(name, SessionSettings()),
            held.get(name, 0.0),
            _workers(name, counts.get(name, Counts()), finished.get(name, 0)),
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
        [sum(v.completed_per_minute[i] for v in views) for i in range(WINDOW_MINUTES)],
        [sum(v.wasted_per_minute[i] for v in views) for i in range(WINDOW_MINUTES)],
        lease_seconds=sum(v.lease_seconds for v in views),
        suggested_workers=_workers(
            scaling.FLEET, total, sum(finished.get(v.name, 0) for v in views)
        ),
    )
    if search:
        views = [view for view in views if search.casefold() in view.name.casefold()]
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
