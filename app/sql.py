"""Every statement the queue runs, one small function per verb.

Rules that hold for every statement here:

* One statement per operation: the ledger row is written by a data-modifying
  CTE in the same statement, so a transition and its event commit together.
* Every guarded statement re-checks the lease in its own WHERE clause —
  status, token and expiry against the database clock — never by reading first
  and writing after. "No row matched" is how a lost lease shows.
* ``NOW`` is the database clock, or an injected instant in tests
  (``coalesce(:now, now())``, as River does). Inside one statement ``now()`` is
  constant, so a statement reaches one verdict.
* No SQL is built from input: only constants are interpolated; values are
  bound parameters.

Knows nothing of HTTP; does not import ``app.queue``.
"""

from __future__ import annotations

from functools import cache

from sqlalchemy import TextClause, text

NOW = "coalesce(CAST(:now AS timestamptz), now())"
NOTIFY_CHANNEL = "leaseq_queued"

LEAD_COLUMNS = (
    "id, session, priority, payload, key, depth, parent_id, status, owner, attempts, "
    "max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at"
)

_EVENT_COLUMNS = "lead_id, session, event, status, attempt, owner, at, expires_at"


def _ledger(source: str, event: str, *, expires_at: str = "NULL", enabled: bool) -> str:
    """A CTE that appends one lead_events row per row of ``source``; empty when off."""
    if not enabled:
        return ""
    return f""",
ledger AS (
    INSERT INTO lead_events ({_EVENT_COLUMNS})
    SELECT id, session, '{event}', status, attempts, owner, {NOW}, {expires_at} FROM {source}
)"""


@cache
def push(ledger: bool) -> TextClause:
    """Insert a batch; keys already in the session are skipped (ON CONFLICT DO NOTHING).

    Ids are drawn in input order, so they ascend in that order; the caller maps
    returned ids back to input positions by that. Rows are inserted in key
    order: an insert waits for a concurrent one of the same key, so two pushes
    taking shared keys in different orders would wait on each other (deadlock).
    """
    return text(f"""
WITH input AS (
    SELECT * FROM unnest(
        CAST(:priorities AS int[]), CAST(:payloads AS text[]), CAST(:keys AS text[]),
        CAST(:depths AS int[]), CAST(:parent_ids AS bigint[]), CAST(:max_attempts AS int[]),
        CAST(:delays AS float8[])
    ) WITH ORDINALITY AS t(priority, payload, key, depth, parent_id, max_attempts, delay_s, ord)
),
numbered AS (
    -- A volatile output column is computed after the sort, so ids follow ord.
    SELECT nextval('leads_id_seq') AS id, * FROM input ORDER BY ord
),
inserted AS (
    INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                       available_at, created_at, updated_at)
    OVERRIDING SYSTEM VALUE
    SELECT id, :session, priority, CAST(payload AS jsonb), key, depth, parent_id, max_attempts,
           {NOW} + make_interval(secs => delay_s), {NOW}, {NOW}
    FROM numbered ORDER BY key
    ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id, key, session, status, attempts, owner
){_ledger("inserted", "pushed", enabled=ledger)}
-- The uncorrelated subquery runs once, and only when something was inserted.
SELECT id, key, (SELECT pg_notify('{NOTIFY_CHANNEL}', :session)) AS notified
FROM inserted ORDER BY id
""")


@cache
def existing_keys() -> TextClause:
    """Ids of keys already present in a session (the duplicates of a push)."""
    return text(
        "SELECT key, id FROM leads WHERE session = :session AND key = ANY(CAST(:keys AS text[]))"
    )


@cache
def lease_next(ledger: bool) -> TextClause:
    """Lease up to :max available leads of a session, highest priority then oldest first.

    The ids are chosen in a CTE, which PostgreSQL evaluates exactly once, then
    updated — never ``WHERE id IN (SELECT … LIMIT n)``, which the planner may
    re-run and so update more than n rows (PostgreSQL bug #15715). The CTE's
    WHERE and ORDER BY match the partial index ``leads_queued``.
    """
    return text(f"""
WITH picked AS (
    SELECT id FROM leads
    WHERE session = :session AND status = 'queued' AND available_at <= {NOW}
    ORDER BY priority DESC, id
    LIMIT :max
    FOR UPDATE SKIP LOCKED
),
numbered AS (
    SELECT id, row_number() OVER (ORDER BY id) AS n FROM picked
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = :owner, lease_token = (CAST(:tokens AS text[]))[numbered.n],
        attempts = l.attempts + 1,
        lease_expires_at = {NOW} + make_interval(secs => CAST(:ttl_s AS float8)),
        updated_at = {NOW}
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = :session
    RETURNING l.*
){_ledger("leased", "leased", expires_at="lease_expires_at", enabled=ledger)}
SELECT {LEAD_COLUMNS}, lease_token FROM leased ORDER BY priority DESC, id
""")


_VALID_LEASE = f"l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > {NOW}"


@cache
def renew_many() -> TextClause:
    """Extend each valid lease of the batch; the rows returned are the ones that were valid."""
    return text(f"""
WITH req AS (
    SELECT * FROM unnest(CAST(:ids AS bigint[]), CAST(:tokens AS text[]), CAST(:ttls AS float8[]))
        AS r(lead_id, token, ttl_s)
)
UPDATE leads AS l
SET lease_expires_at = {NOW} + make_interval(secs => req.ttl_s), updated_at = {NOW}
FROM req
WHERE l.id = req.lead_id AND {_VALID_LEASE}
RETURNING l.id, req.token, l.lease_expires_at
""")


@cache
def complete_many(ledger: bool, *, lean: bool = False) -> TextClause:
    """Finish each valid lease of the batch with its status; returns the leads that finished.

    A lease given twice in one batch counts once, at its first item (``item``,
    from 0): an UPDATE joined to two matching rows would apply either one.
    ``lean`` returns only ``item``, for callers that need no lead back (a quarter
    less time per batch of 100 than reading every column back).
    """
    columns = "item" if lean else f"{LEAD_COLUMNS}, item"
    return text(f"""
WITH req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM unnest(
        CAST(:ids AS bigint[]), CAST(:tokens AS text[]), CAST(:statuses AS text[]),
        CAST(:results AS text[]), CAST(:errors AS text[])
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
    ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_token = NULL, lease_expires_at = NULL, updated_at = {NOW}
    FROM req
    WHERE l.id = req.lead_id AND {_VALID_LEASE}
    RETURNING l.*, req.ord - 1 AS item
){_ledger("completed", "completed", enabled=ledger)}
SELECT {columns} FROM completed
""")


@cache
def release(ledger: bool) -> TextClause:
    """Give a valid lease back: queued again after :delay_s, the attempt already counted."""
    return text(f"""
WITH req AS (SELECT CAST(:lead_id AS bigint) AS lead_id, CAST(:token AS text) AS token),
released AS (
    UPDATE leads AS l
    SET status = 'queued', lease_token = NULL, lease_expires_at = NULL,
        available_at = {NOW} + make_interval(secs => CAST(:delay_s AS float8)), updated_at = {NOW}
    FROM req
    WHERE l.id = req.lead_id AND {_VALID_LEASE}
    RETURNING l.*
){_ledger("released", "released", enabled=ledger)}
SELECT {LEAD_COLUMNS}, (SELECT pg_notify('{NOTIFY_CHANNEL}', session)) AS notified FROM released
""")


@cache
def sweep(ledger: bool, *, scoped: bool) -> TextClause:
    """Requeue up to :limit expired leases (one session's when scoped); fail them at max_attempts.

    SKIP LOCKED: a lease whose row a completion holds is left to that
    completion; the UPDATE re-checks status and expiry so a lease completed
    just before is never moved back (River #1302).
    """
    session_filter = "AND session = :session" if scoped else ""
    # The session routes the UPDATE to one partition or shard too (docs/scaling.md).
    update_filter = "AND l.session = :session" if scoped else ""
    return text(f"""
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= {NOW} {session_filter}
    ORDER BY lease_expires_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts >= l.max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts >= l.max_attempts
                     THEN 'lease expired on attempt ' || l.attempts || ' of ' || l.max_attempts
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = {NOW}, updated_at = {NOW}
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= {NOW}
          {update_filter}
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
){_ledger("swept", "expired", expires_at="expired_at", enabled=ledger)}
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('{NOTIFY_CHANNEL}', s.session))
     FROM (SELECT DISTINCT session FROM swept WHERE status = 'queued') AS s) AS notified
FROM swept
""")


@cache
def cancel(ledger: bool) -> TextClause:
    """An operator fails a queued or leased lead; its holder's next renew or complete loses."""
    return text(f"""
WITH cancelled AS (
    UPDATE leads
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        updated_at = {NOW}
    WHERE id = :lead_id AND status IN ('queued', 'leased')
    RETURNING *
){_ledger("cancelled", "cancelled", enabled=ledger)}
SELECT {LEAD_COLUMNS} FROM cancelled
""")


@cache
def retry(ledger: bool) -> TextClause:
    """Dead-letter replay: a failed lead is queued again with room for one more attempt.

    ``attempts`` is a fencing number and never goes down; ``max_attempts`` is
    raised when needed so the replayed lead gets its attempt.
    """
    return text(f"""
WITH retried AS (
    UPDATE leads
    SET status = 'queued', error = NULL, result = NULL, available_at = {NOW},
        max_attempts = greatest(max_attempts, attempts + 1), updated_at = {NOW}
    WHERE id = :lead_id AND status = 'failed'
    RETURNING *
){_ledger("retried", "retried", enabled=ledger)}
SELECT {LEAD_COLUMNS}, (SELECT pg_notify('{NOTIFY_CHANNEL}', session)) AS notified FROM retried
""")


TERMINAL_STATUSES = "('done', 'failed', 'cached')"


@cache
def prune(*, scoped: bool) -> TextClause:
    """Delete up to :limit terminal leads last changed before now - :older_than_s, and their events.

    Retention, one batch per statement. SKIP LOCKED leaves a row someone holds
    (an operator's retry) for a later batch, so pruning never waits on a lock
    and holds at most :limit row locks. Queued and leased leads never match.
    The predicate and order are those of index ``leads_terminal_updated``: a
    batch reads the oldest terminal leads, never the live ones.
    """
    session_filter = "AND session = :session" if scoped else ""
    return text(f"""
WITH doomed AS (
    SELECT id FROM leads
    WHERE status IN {TERMINAL_STATUSES}
      AND updated_at < {NOW} - make_interval(secs => CAST(:older_than_s AS float8))
      {session_filter}
    ORDER BY updated_at
    LIMIT :limit
    FOR UPDATE SKIP LOCKED
),
events AS (
    DELETE FROM lead_events WHERE lead_id IN (SELECT id FROM doomed)
),
pruned AS (
    DELETE FROM leads WHERE id IN (SELECT id FROM doomed) RETURNING id
)
SELECT count(*) AS pruned FROM pruned
""")


@cache
def get() -> TextClause:
    """One lead by id."""
    return text(f"SELECT {LEAD_COLUMNS} FROM leads WHERE id = :lead_id")


@cache
def stats() -> TextClause:
    """Lead counts by status in one session."""
    return text("SELECT status, count(*) AS n FROM leads WHERE session = :session GROUP BY status")


@cache
def stats_all() -> TextClause:
    """Lead counts by session and status."""
    return text("SELECT session, status, count(*) AS n FROM leads GROUP BY session, status")


@cache
def db_now() -> TextClause:
    """The database clock."""
    return text("SELECT now() AS now")


@cache
def autovacuum() -> TextClause:
    """Whether the server runs autovacuum (``SHOW autovacuum``): the reclaimer of churned rows."""
    return text("SELECT current_setting('autovacuum') = 'on' AS enabled")
