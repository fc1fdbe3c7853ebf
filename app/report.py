"""The audit of one session, read from the ``lead_events`` ledger alone.

It answers "did the queue keep its promises?" from the record of what
happened, not from the leads' current state:

* ``leads``: leads that appear in the ledger; ``pushed``: push events.
* ``leases``: leases handed out (one per lead and attempt).
* ``completed``: leads with a completion; ``completions``: completion events;
  ``double_completions``: leads completed more than once without an
  operator's retry in between (must be 0).
* ``overlapping_leases``: leases handed out while the lead's previous lease
  was still valid — before its completion, release or cancellation, or before
  the expiry the sweeper recorded (must be 0). A previous lease with no end
  recorded at all counts too: nothing but an end makes a lead leasable again.
* ``wasted_attempts``: leases that ended without a completion (expired,
  released or cancelled); leases still running are not counted.
* ``expired``, ``released``, ``cancelled``, ``retried``: events of each kind.
* ``attempts_per_lead``: how many leases each lead took, as
  ``{leases: number of leads}`` (a lead pushed and never leased counts under 0).
* ``owners``: per worker name, the leases it was handed, the completions it
  wrote and its wasted attempts, by owner name.

All zero when the ledger is off (``Settings.ledger``). Knows nothing of HTTP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, cast

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncConnection

from app import validation
from app.queue import Queue


@dataclass(frozen=True, slots=True)
class OwnerReport:
    """One worker's share of a session: leases handed to it, completions, wasted attempts."""

    owner: str
    leases: int = 0
    completions: int = 0
    wasted: int = 0


@dataclass(frozen=True, slots=True)
class Report:
    """What the ledger says about one session; see the module docstring."""

    leads: int = 0
    pushed: int = 0
    leases: int = 0
    completed: int = 0
    completions: int = 0
    double_completions: int = 0
    overlapping_leases: int = 0
    wasted_attempts: int = 0
    expired: int = 0
    released: int = 0
    cancelled: int = 0
    retried: int = 0
    attempts_per_lead: dict[int, int] = field(default_factory=dict)
    owners: list[OwnerReport] = field(default_factory=list)

    @property
    def breached(self) -> bool:
        """True when the ledger shows a broken promise (a double completion or an overlap)."""
        return self.double_completions > 0 or self.overlapping_leases > 0


COUNTERS = tuple(f.name for f in fields(Report) if f.type in (int, "int"))


@cache
def session_report() -> TextClause:
    """One pass over a session's events (index ``lead_events_session_lead``)."""
    return text("""
WITH ev AS (
    SELECT id, lead_id, event, attempt, at, expires_at FROM lead_events WHERE session = :session
),
-- One row per lease: a lead's attempt number is handed out once.
leases AS (
    SELECT lead_id, attempt, min(at) AS leased_at
    FROM ev WHERE event = 'leased' GROUP BY lead_id, attempt
),
-- When each lease stopped being valid. An expiry ends it at the expiry the
-- sweeper found (renewals included), not at the sweep.
ends AS (
    SELECT lead_id, attempt,
           min(CASE WHEN event = 'expired' THEN coalesce(expires_at, at) ELSE at END) AS ended_at,
           bool_or(event = 'completed') AS completed
    FROM ev WHERE event IN ('completed', 'released', 'cancelled', 'expired')
    GROUP BY lead_id, attempt
),
spans AS (
    SELECT l.lead_id, l.attempt, l.leased_at, e.ended_at, coalesce(e.completed, false) AS completed,
           lead(l.leased_at) OVER (PARTITION BY l.lead_id ORDER BY l.attempt) AS next_leased_at
    FROM leases AS l LEFT JOIN ends AS e USING (lead_id, attempt)
),
-- Completions counted per lead between an operator's retries: failed, retried
-- and completed again is a dead-letter replay (SPEC invariant 4), not a double.
epochs AS (
    SELECT lead_id, event,
           count(*) FILTER (WHERE event = 'retried')
               OVER (PARTITION BY lead_id ORDER BY id) AS epoch
    FROM ev
),
completions AS (
    SELECT lead_id, epoch, count(*) AS n FROM epochs WHERE event = 'completed'
    GROUP BY lead_id, epoch
)
SELECT
    (SELECT count(DISTINCT lead_id) FROM ev) AS leads,
    (SELECT count(*) FROM ev WHERE event = 'pushed') AS pushed,
    (SELECT count(*) FROM spans) AS leases,
    (SELECT count(DISTINCT lead_id) FROM completions) AS completed,
    (SELECT coalesce(sum(n), 0) FROM completions) AS completions,
    (SELECT count(DISTINCT lead_id) FROM completions WHERE n > 1) AS double_completions,
    (SELECT count(*) FROM spans
     WHERE next_leased_at IS NOT NULL AND (ended_at IS NULL OR next_leased_at < ended_at))
        AS overlapping_leases,
    (SELECT count(*) FROM spans WHERE ended_at IS NOT NULL AND NOT completed) AS wasted_attempts,
    (SELECT count(*) FROM ev WHERE event = 'expired') AS expired,
    (SELECT count(*) FROM ev WHERE event = 'released') AS released,
    (SELECT count(*) FROM ev WHERE event = 'cancelled') AS cancelled,
    (SELECT count(*) FROM ev WHERE event = 'retried') AS retried
""")


@cache
def attempts_per_lead() -> TextClause:
    """Leads by the number of leases they took (a lead never leased: 0)."""
    return text("""
SELECT leases, count(*) AS leads FROM (
    SELECT lead_id, count(DISTINCT attempt) FILTER (WHERE event = 'leased') AS leases
    FROM lead_events WHERE session = :session GROUP BY lead_id
) AS per_lead
GROUP BY leases ORDER BY leases
""")


@cache
def owners() -> TextClause:
    """Per owner: leases handed out, completions written, leases that ended without one."""
    return text("""
WITH ev AS (
    SELECT lead_id, event, attempt, owner FROM lead_events WHERE session = :session
),
leases AS (
    SELECT lead_id, attempt, min(owner) AS owner FROM ev WHERE event = 'leased'
    GROUP BY lead_id, attempt
),
ends AS (
    SELECT lead_id, attempt, bool_or(event = 'completed') AS completed
    FROM ev WHERE event IN ('completed', 'released', 'cancelled', 'expired')
    GROUP BY lead_id, attempt
),
tally AS (
    SELECT l.owner, 1 AS leases, 0 AS completions,
           CASE WHEN e.lead_id IS NOT NULL AND NOT e.completed THEN 1 ELSE 0 END AS wasted
    FROM leases AS l LEFT JOIN ends AS e USING (lead_id, attempt)
    UNION ALL
    SELECT owner, 0, 1, 0 FROM ev WHERE event = 'completed'
)
SELECT coalesce(owner, '') AS owner, sum(leases) AS leases, sum(completions) AS completions,
       sum(wasted) AS wasted
FROM tally GROUP BY 1 ORDER BY 1
""")


async def report(queue: Queue, session: str) -> Report:
    """The ledger's audit of ``session`` (all zero for an unknown one). Raises InvalidInput."""
    validation.session(session)
    params = {"session": session}

    async def read(conn: AsyncConnection) -> list[list[Mapping[str, Any]]]:
        return [
            [cast(Mapping[str, Any], row._mapping) for row in await conn.execute(stmt, params)]
            for stmt in (session_report(), attempts_per_lead(), owners())
        ]

    # Through the queue's connection handling, so an outage is Unavailable here too.
    [[row], histogram, by_owner] = await queue.with_connection(read)
    return Report(
        **{name: int(row[name]) for name in COUNTERS},
        attempts_per_lead={int(r["leases"]): int(r["leads"]) for r in histogram},
        owners=[
            OwnerReport(str(r["owner"]), int(r["leases"]), int(r["completions"]), int(r["wasted"]))
            for r in by_owner
        ],
    )
