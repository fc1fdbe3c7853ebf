"""Every statement of schedules: the rows of ``schedules`` (revision 0010) and their ticks.

A tick is pushed by one statement (so one transaction): a guarded UPDATE
moves ``next_tick`` on only if it is still the tick this process read, and
the same statement pushes the tick's lead through ``leaseq_push`` (revision
0007: the service's checks, the ledger row, the counts, the NOTIFY of
waiting leases) with the key ``schedule:{name}:{tick}``. Two processes that
read the same due tick both send it; the second's UPDATE waits for the
first's row lock, then finds ``next_tick`` moved and pushes nothing. A lead
already holding that key in the session (pushed, then the tick somehow sent
again) is not pushed twice either: the key dedupes it.

``NOW`` is the database clock, or an injected instant in tests. Knows
nothing of HTTP; imports nothing of ``app``.
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import statement
from app.store.statements.fragments import NOW

COLUMNS = "name, session, cron, timezone, lead, next_tick, created_at, updated_at"


def _schedule_now() -> str:
    return f"SELECT {NOW} AS now"


@statement(_schedule_now)
def schedule_now(*, now: datetime | None) -> None:
    """The database clock (or the injected instant): every tick is judged by it."""


def _schedule_put() -> str:
    return f"""
INSERT INTO schedules AS s (name, session, cron, timezone, lead, next_tick, created_at, updated_at)
VALUES (%(name)s, %(session)s, %(cron)s, %(timezone)s, CAST(%(lead)s AS jsonb), %(next_tick)s,
        {NOW}, {NOW})
ON CONFLICT (name) DO UPDATE
SET session = excluded.session, cron = excluded.cron, timezone = excluded.timezone,
    lead = excluded.lead, next_tick = excluded.next_tick, updated_at = excluded.updated_at
RETURNING {COLUMNS}
"""


@statement(_schedule_put)
def schedule_put(
    *,
    name: str,
    session: str,
    cron: str,
    timezone: str,
    lead: str,
    next_tick: datetime,
    now: datetime | None,
) -> None:
    """Create or replace a schedule; returns it."""


def _schedule_get() -> str:
    return f"SELECT {COLUMNS} FROM schedules WHERE name = %(name)s"


@statement(_schedule_get)
def schedule_get(*, name: str) -> None:
    """One schedule by name."""


def _schedules_all() -> str:
    return f"SELECT {COLUMNS} FROM schedules ORDER BY name"


@statement(_schedules_all)
def schedules_all() -> None:
    """Every schedule, by name."""


def _schedule_delete() -> str:
    return "DELETE FROM schedules WHERE name = %(name)s RETURNING name"


@statement(_schedule_delete)
def schedule_delete(*, name: str) -> None:
    """Delete a schedule; its name when there was one."""


def _schedules_due() -> str:
    return f"""
SELECT {COLUMNS}, {NOW} AS now FROM schedules
WHERE next_tick <= {NOW}
ORDER BY next_tick, name
LIMIT %(limit)s
"""


@statement(_schedules_due)
def schedules_due(*, limit: int, now: datetime | None) -> None:
    """Schedules whose next tick has come, with the instant that judged it (index
    schedules_next_tick: one probe when none is due)."""


def _schedule_fire() -> str:
    return f"""
WITH advanced AS (
    UPDATE schedules
    SET next_tick = %(next_tick)s, updated_at = {NOW}
    WHERE name = %(name)s AND next_tick = %(tick_was)s
    RETURNING session, lead
)
SELECT leaseq_push(
    session,
    lead -> 'payload',
    coalesce((lead ->> 'priority')::integer, 0),
    %(key)s,
    coalesce((lead ->> 'delay_s')::float8, 0),
    %(max_attempts)s::integer
) AS lead_id
FROM advanced
"""


@statement(_schedule_fire)
def schedule_fire(
    *,
    name: str,
    tick_was: datetime,
    next_tick: datetime,
    key: str,
    max_attempts: int,
    now: datetime | None,
) -> None:
    """Move a due schedule's ``next_tick`` from ``tick_was`` to ``next_tick`` and push its
    lead with ``key``, in one statement; no row when another process moved it first."""
