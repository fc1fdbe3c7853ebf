"""Counts and clocks: a session's counts, the oldest available lead per session, the kept
counts' upkeep, the database clock and its settings, one lead's events."""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.fragments import (
    NOW,
    PAUSED_UNTIL,
    TERMINAL,
    age_of,
    oldest_available_at,
    oldest_available_probes,
    only_session,
)


def _stats() -> str:
    return f"""
WITH counted AS (
    SELECT status, sum(n)::bigint AS n FROM lead_counts WHERE session = %(session)s
    GROUP BY status HAVING sum(n) <> 0
)
SELECT counted.status, counted.n, {age_of("oldest.at")} AS age_s,
       (SELECT {PAUSED_UNTIL} FROM session_settings WHERE session = %(session)s)
FROM (SELECT {oldest_available_at("%(session)s")} AS at) AS oldest LEFT JOIN counted ON true
"""


@statement(_stats)
def stats(*, session: str, now: datetime | None) -> None:
    """Lead counts by status in one session (the slots of ``lead_counts`` added up), each row
    with the age of its oldest available lead (``age_s``); no counts: one row of NULLs but it."""


def _stats_all() -> str:
    return """
SELECT session, status, sum(n)::bigint AS n FROM lead_counts
GROUP BY session, status HAVING sum(n) <> 0
"""


@statement(_stats_all)
def stats_all() -> None:
    """Lead counts by session and status (``lead_counts``: its cost follows the sessions, not
    the leads)."""


def _paused_all() -> str:
    return f"SELECT session, paused_until FROM session_settings WHERE paused_until > {NOW}"


@statement(_paused_all)
def paused_all(*, now: datetime | None) -> None:
    """The sessions paused now, and until when."""


def _fold_counts(scoped: bool) -> str:
    return f"""
WITH moving AS (
    SELECT session, status, slot FROM lead_counts WHERE slot <> 0 {only_session(scoped)}
    FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM lead_counts AS c USING moving AS m
    WHERE c.session = m.session AND c.status = m.status AND c.slot = m.slot
          {only_session(scoped, "c.session")}
    RETURNING c.session, c.status, c.n
),
folded AS (
    INSERT INTO lead_counts AS c (session, status, slot, n)
    SELECT session, status, 0, sum(n) FROM moved GROUP BY session, status
    ORDER BY session, status
    ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n
    RETURNING 1
)
SELECT count(*) AS folded FROM folded
"""


@statement(_fold_counts, scoped=BOTH)
def fold_counts(*, session: str | None = None, scoped: bool = False) -> None:
    """Add every other slot of ``lead_counts`` into slot 0, so the table keeps about one row
    per session and status however many backends wrote it; the pruner's, across sessions
    (or in one session, when scoped).

    SKIP LOCKED leaves a slot a statement is writing to a later pass, and slot 0 rows are
    upserted in (session, status) order as the triggers do, so no lock waits on another in
    a cycle. The sums are unchanged at every commit.
    """


def _forget_zero_counts(scoped: bool) -> str:
    return f"""
WITH zero AS (
    SELECT session, status FROM lead_counts WHERE slot = 0 AND n = 0 {only_session(scoped)}
    FOR UPDATE SKIP LOCKED
),
forgotten AS (
    DELETE FROM lead_counts AS c USING zero AS z
    WHERE c.session = z.session AND c.status = z.status AND c.slot = 0
          {only_session(scoped, "c.session")}
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten
"""


@statement(_forget_zero_counts, scoped=BOTH)
def forget_zero_counts(*, session: str | None = None, scoped: bool = False) -> None:
    """Delete the slot-0 counts that came to zero (a pruned session leaves no row behind); in
    one session when scoped."""


# The sessions an upkeep across sessions would change, for a Citus cluster, where it runs
# per session: a locking read across shards is refused there (docs/scaling.md).
_UPKEEP = {
    "expired": f"FROM leads WHERE status = 'leased' AND lease_expires_at <= {NOW}",
    "due": f"FROM leads WHERE scheduled AND available_at <= {NOW}",
    "counts": "FROM lead_counts WHERE slot <> 0 OR n = 0",
    "frees": "FROM lead_key_frees",
    "terminal": f"FROM leads WHERE status IN {TERMINAL} AND updated_at < {NOW}"
    " - make_interval(secs => %(older_than_s)s::float8)",
}


def _sessions_to_keep(of: str) -> str:
    return f"SELECT DISTINCT session {_UPKEEP[of]}"


@statement(_sessions_to_keep, of=tuple(_UPKEEP))
def sessions_to_keep(
    *, of: str, now: datetime | None = None, older_than_s: float | None = None
) -> None:
    """The sessions with expired leases (``sweep``), due scheduled leads (``promote``),
    counts to fold or forget (``fold_counts``, ``forget_zero_counts``), frees of keys
    (``forget_frees``) or terminal leads
    unchanged for ``older_than_s`` (``prune``): a read of every shard through the index each
    upkeep uses, without a lock."""


def _db_now() -> str:
    return "SELECT now() AS now"


@statement(_db_now)
def db_now() -> None:
    """The database clock."""


def _autovacuum() -> str:
    return "SELECT current_setting('autovacuum') = 'on' AS enabled"


@statement(_autovacuum)
def autovacuum() -> None:
    """Whether the server runs autovacuum (``SHOW autovacuum``): the reclaimer of churned rows."""


def _schema_revision() -> str:
    return "SELECT version_num FROM alembic_version"


@statement(_schema_revision)
def schema_revision() -> None:
    """The Alembic revision of the schema (raises UndefinedTable on a database without one)."""


def _oldest_available() -> str:
    # Each probe a lateral query of its own, with a FROM and joined on the session: Citus
    # runs the whole statement on each shard (a subquery without FROM it cannot correlate).
    ready, due, back = oldest_available_probes("c.session")
    return f"""
SELECT c.session, {age_of("least(ready.at, due.at, back.at)")} AS age_s
FROM (SELECT session FROM lead_counts WHERE status = 'queued'
      GROUP BY session HAVING sum(n) > 0) AS c
CROSS JOIN LATERAL ({ready}) AS ready
CROSS JOIN LATERAL ({due}) AS due
CROSS JOIN LATERAL ({back}) AS back
WHERE least(ready.at, due.at, back.at) IS NOT NULL
"""


@statement(_oldest_available)
def oldest_available(*, now: datetime | None) -> None:
    """Per session with queued leads, the age of its oldest lead that could be leased now
    (sessions with none left out): two index probes per such session, whatever the leads,
    and one per key of it that freed room for a parked lead since its last lease.
    The scaling signal, the dashboard's oldest age, and the fleet's view of who has work."""


# -- an operator's view of one lead, and the replay of a session's dead letters -------


def _lead_events() -> str:
    return """
SELECT id, event, status, attempt, owner, at, expires_at, total FROM (
    SELECT id, event, status, attempt, owner, at, expires_at, count(*) OVER () AS total
    FROM lead_events WHERE session = %(session)s AND lead_id = %(lead_id)s
    ORDER BY at DESC, id DESC LIMIT %(limit)s
) AS newest
ORDER BY at, id
"""


@statement(_lead_events)
def lead_events(*, session: str, lead_id: int, limit: int) -> None:
    """The newest ``limit`` events of one lead, oldest first, each with ``total``: how many the
    lead has. The session routes it to one shard (index ``lead_events_session_lead``).

    In the order of their instants, then of their ids: on a cluster a lead's ids follow
    its shard's node, so a shard moved to a node of a lower range would list later rows
    first by id alone (docs/scaling.md, "The ledger on a cluster")."""


def _one_snapshot() -> str:
    return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"


@statement(_one_snapshot)
def one_snapshot() -> None:
    """The first statement of a read-only transaction whose statements see one instant."""
