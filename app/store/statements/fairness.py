"""Fair share by time (docs/beyond.md#fair-share-by-time): how long the leases that ended lately
lasted, per session, measured on the database clock from the ledger.

A lease's time runs from its ``leased`` event to the event that ended it (``completed``,
``released`` or ``expired``: ``OUTCOME_EVENTS``), both written with the database's clock. The
fleet reads the ends written since it last looked (by ledger id, a range of the primary
key: the cost follows the leases that ended, never the backlog), each joined to its lease's
``leased`` event through ``lead_events_session_lead``. The dashboard and ``/metrics`` read the
same sum over the ends of the last minute instead (``lease_seconds_recent``: a range of
``lead_events_outcomes_at``, as the dashboard's throughput reads): each session's share of the
workers' time.
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import statement
from app.store.statements.fragments import (
    NOW,
    OUTCOME_EVENTS,
    in_list,
    plus_seconds,
    seconds_between,
)


def _ledger_head() -> str:
    return "SELECT coalesce(max(id), 0) AS id FROM lead_events"


@statement(_ledger_head)
def ledger_head() -> None:
    """The ledger's last id (the primary key's last entry): where a measure starts."""


def _summed(ends: str) -> str:
    """Per session, the ends of leases that ``ends`` selects (of ``lead_events AS e``), each
    joined to its ``leased`` event: how many, and the seconds they lasted."""
    return f"""
SELECT e.session, count(*)::bigint AS ended,
       sum(greatest(0, {seconds_between("l.at", "e.at")}))::float8 AS seconds
FROM lead_events AS e
CROSS JOIN LATERAL (
    SELECT s.at FROM lead_events AS s
    WHERE s.session = e.session AND s.lead_id = e.lead_id AND s.id < e.id
      AND s.event = 'leased' AND s.attempt = e.attempt
    ORDER BY s.id DESC
    LIMIT 1
) AS l
WHERE {ends} AND e.event IN {in_list(OUTCOME_EVENTS)}
GROUP BY e.session
"""


def _lease_seconds() -> str:
    return _summed("e.id > %(after_id)s AND e.id <= %(head_id)s")


@statement(_lease_seconds)
def lease_seconds(*, after_id: int, head_id: int) -> None:
    """Per session, the leases that ended in the ledger ids (after_id, head_id] and the
    seconds they lasted, from their lease to their end (the database's clock)."""


def _lease_seconds_recent() -> str:
    return _summed(f"e.at > {plus_seconds(NOW, '-%(window_s)s::float8')} AND e.at <= {NOW}")


@statement(_lease_seconds_recent)
def lease_seconds_recent(*, window_s: float, now: datetime | None) -> None:
    """Per session, the leases that ended in the last ``window_s`` seconds of the database
    clock and the seconds they lasted (sessions with none are left out). The event filter is
    the predicate of index ``lead_events_outcomes_at``."""
