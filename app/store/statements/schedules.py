"""Every statement of schedules: the rows of ``schedules`` (revision 0010) and their ticks.

A tick is two statements, each whole. ``schedule_push`` pushes the tick's lead
through ``leaseq_push`` (revision 0007: the service's checks, the ledger row,
the counts, the NOTIFY of waiting leases) with the key
``schedule:{name}:{tick}``, which dedupes: the same tick pushed again finds
its lead and pushes nothing. ``schedule_advance`` then moves ``next_tick`` on,
only if it is still the tick this process read. Two processes that read the
same due tick both push it, and one lead is there; only one of them advances
it. A tick pushed but not advanced (the process stopped in between, or the
advance could not reach every node of a cluster) is pushed again at the next
look and found by its key.

On a Citus cluster ``schedules`` is a reference table, whose every write goes
to each node's copy; the push goes to its session's shard alone. So a stopped
worker node holds up only the ticks of its own sessions' schedules: the
others are pushed, once each, and their advance waits for the node
(docs/scaling.md, "A stopped worker node").

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
SELECT {COLUMNS}, {NOW} AS now,
       (lead -> 'payload')::text AS payload_text,
       coalesce((lead ->> 'priority')::integer, 0) AS priority,
       coalesce((lead ->> 'delay_s')::float8, 0) AS delay_s
FROM schedules
WHERE next_tick <= {NOW}
  AND (%(after_name)s::text IS NULL
       OR (next_tick, name) > (%(after_tick)s::timestamptz, %(after_name)s::text))
ORDER BY next_tick, name
LIMIT %(limit)s
"""


@statement(_schedules_due)
def schedules_due(
    *,
    limit: int,
    now: datetime | None,
    after_tick: datetime | None = None,
    after_name: str | None = None,
) -> None:
    """Schedules whose next tick has come, in (next_tick, name) order after (``after_tick``,
    ``after_name``) when given, with the instant that judged them (index
    schedules_next_tick: one probe when none is due) and their lead's parts as
    ``schedule_push`` takes them: the payload as JSON text (a number read into Python
    could lose its digits), the priority and the delay."""


def _schedule_push() -> str:
    return """
SELECT leaseq_push(
    %(session)s::text, CAST(%(payload)s AS jsonb), %(priority)s::integer, %(key)s::text,
    %(delay_s)s::float8, %(max_attempts)s::integer
) AS lead_id
"""


@statement(_schedule_push)
def schedule_push(
    *, session: str, payload: str, priority: int, key: str, delay_s: float, max_attempts: int
) -> None:
    """Push a tick's lead with its ``key``; the id of the lead that holds the key already
    when there is one (then nothing is pushed)."""


def _schedule_advance() -> str:
    return f"""
UPDATE schedules SET next_tick = %(next_tick)s, updated_at = {NOW}
WHERE name = %(name)s AND next_tick = %(tick_was)s
RETURNING name
"""


@statement(_schedule_advance)
def schedule_advance(
    *, name: str, tick_was: datetime, next_tick: datetime, now: datetime | None
) -> None:
    """Move a schedule's ``next_tick`` from ``tick_was`` to ``next_tick``; no row when another
    process moved it first."""
