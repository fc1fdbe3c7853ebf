"""Fair share by time (docs/beyond.md#fair-share-by-time): how long the leases that ended lately
lasted, per session, measured on the database clock from the ledger.

A lease's time runs from its ``leased`` event to the event that ended it (``completed``,
``released`` or ``expired``: ``OUTCOME_EVENTS``), both written with the database's clock. The
fleet reads the ends written since it last looked (by ledger id, a range of the primary
key: the cost follows the leases that ended, never the backlog), each joined to its lease's
``leased`` event through ``lead_events_session_lead``.
"""

from __future__ import annotations

from app.store.statements._build import statement
from app.store.statements.fragments import OUTCOME_EVENTS, in_list, seconds_between


def _ledger_head() -> str:
    return "SELECT coalesce(max(id), 0) AS id FROM lead_events"


@statement(_ledger_head)
def ledger_head() -> None:
    """The ledger's last id (the primary key's last entry): where a measure starts."""


def _lease_seconds() -> str:
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
WHERE e.id > %(after_id)s AND e.id <= %(head_id)s AND e.event IN {in_list(OUTCOME_EVENTS)}
GROUP BY e.session
"""


@statement(_lease_seconds)
def lease_seconds(*, after_id: int, head_id: int) -> None:
    """Per session, the leases that ended in the ledger ids (after_id, head_id] and the
    seconds they lasted, from their lease to their end (the database's clock)."""
