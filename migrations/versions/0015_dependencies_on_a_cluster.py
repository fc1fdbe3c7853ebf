"""Dependencies on a Citus cluster: the trigger ``leads_dependents`` on every shard of leads.

Revisions 0012 and 0014 left the trigger out on a cluster: its statement names ``leads``,
``lead_dependencies`` and ``lead_events``, and inside a shard's trigger each of those would
be a distributed statement, which Citus cannot run there (as 0006 found for the counts).
Every lead a dependency joins is of one session (docs/contract.md#dependencies), and a
session's rows of all three tables are on one shard's node (colocated, 0006, 0012): so the
function below, on a shard of leads (``leads_<shard id>``), finds the shards of
``lead_dependencies`` and ``lead_events`` with the same hash range and runs 0014's statement
on those three shards, locally, in the firing statement's own transaction. What it does is
0014's: the same locks in id order, the same errors, the same ``failed`` rows. A trigger that
fires on no shard (the coordinator's empty shell table) does nothing.

One difference: it sends no NOTIFY for the leads it makes available. It runs on a worker
node, and the service listens on the coordinator; a notification is a hint there as here,
and a waiting lease finds those leads at its next poll (``LEASEQ_POLL_INTERVAL_S``).

On one PostgreSQL this revision changes nothing.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-15
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# 0014's statement, on the shards %1$s (leads), %2$s (lead_dependencies) and %3$s
# (lead_events); $1 is the statement's instant. A shard's ``id`` has no default: the ledger's
# ids come from the node's copy of its sequence (%4$L), as the node's own inserts take them
# (Citus gives each node a range of its own).
_SHARD_STATEMENT = """
    WITH RECURSIVE ended AS (
        SELECT n.session, n.id, n.status = 'failed' AS failed
        FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
        WHERE n.has_dependents AND n.status IN ('done', 'cached', 'failed')
          AND o.status IS DISTINCT FROM n.status
    ),
    failing (session, id, cause) AS (
        SELECT c.session, c.id, e.id FROM ended AS e
        JOIN %2$s AS d ON d.session = e.session AND d.after_id = e.id
        JOIN %1$s AS c ON c.session = d.session AND c.id = d.lead_id
        WHERE e.failed AND c.status = 'queued' AND c.waiting_on > 0
        UNION
        SELECT c.session, c.id, f.id FROM failing AS f
        JOIN %2$s AS d ON d.session = f.session AND d.after_id = f.id
        JOIN %1$s AS c ON c.session = d.session AND c.id = d.lead_id
        WHERE c.status = 'queued' AND c.waiting_on > 0
    ),
    counted AS (
        SELECT d.session, d.lead_id AS id, count(*) AS hits FROM ended AS e
        JOIN %2$s AS d ON d.session = e.session AND d.after_id = e.id
        WHERE NOT e.failed GROUP BY d.session, d.lead_id
    ),
    below AS (
        SELECT session, id, min(cause) AS cause, NULL::bigint AS hits
        FROM failing GROUP BY session, id
        UNION ALL
        SELECT session, id, NULL, hits FROM counted AS c
        WHERE NOT EXISTS (SELECT FROM failing AS f WHERE f.session = c.session AND f.id = c.id)
    ),
    locked AS MATERIALIZED (
        SELECT b.session, b.id, b.cause, b.hits FROM below AS b
        JOIN %1$s AS c ON c.session = b.session AND c.id = b.id
        WHERE c.status = 'queued' AND c.waiting_on > 0
        ORDER BY c.id
        FOR UPDATE OF c
    ),
    failed AS (
        UPDATE %1$s AS c
        SET status = 'failed', error = 'dependency ' || l.cause || ' failed', waiting_on = 0,
            scheduled = false, available_at = coalesce(c.ready_at, $1), updated_at = $1
        FROM locked AS l
        WHERE l.cause IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.id, c.session, c.status, c.attempts, c.owner
    ),
    ledger AS (
        INSERT INTO %3$s (id, lead_id, session, event, status, attempt, owner, at)
        OVERRIDING SYSTEM VALUE
        SELECT nextval(%4$L), f.id, f.session, 'failed', f.status, f.attempts, f.owner, $1
        FROM failed AS f
        WHERE EXISTS (SELECT FROM %3$s AS e WHERE e.session = f.session AND e.lead_id = f.id)
    ),
    counted_down AS (
        UPDATE %1$s AS c
        SET waiting_on = greatest(c.waiting_on - l.hits, 0),
            scheduled = CASE WHEN c.waiting_on <= l.hits THEN c.ready_at > $1
                        ELSE c.scheduled END,
            available_at = CASE WHEN c.waiting_on <= l.hits THEN greatest(c.ready_at, $1)
                           ELSE c.available_at END,
            updated_at = $1
        FROM locked AS l
        WHERE l.hits IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.id
    )
    SELECT count(*) FROM counted_down"""

SHARD_DEPENDENTS_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stamp timestamptz := statement_timestamp();
    edges text;
    events text;
BEGIN
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE has_dependents AND status IN ('done', 'cached', 'failed')) THEN
        RETURN NULL;
    END IF;
    -- The shards of lead_dependencies and lead_events with this shard's hash range.
    SELECT shard_name(d.logicalrelid, d.shardid), shard_name(e.logicalrelid, e.shardid)
    INTO edges, events
    FROM pg_dist_shard AS own
    JOIN pg_dist_shard AS d
      ON d.logicalrelid = to_regclass('lead_dependencies') AND d.shardminvalue = own.shardminvalue
    JOIN pg_dist_shard AS e
      ON e.logicalrelid = to_regclass('lead_events') AND e.shardminvalue = own.shardminvalue
    WHERE own.logicalrelid = to_regclass('leads')
      AND own.shardid = substring(TG_TABLE_NAME FROM '_([0-9]+)$')::bigint;
    IF edges IS NULL THEN
        RETURN NULL;  -- not a shard of leads (module doc)
    END IF;
    EXECUTE format($q${_SHARD_STATEMENT}$q$,
                   quote_ident(TG_TABLE_SCHEMA) || '.' || quote_ident(TG_TABLE_NAME),
                   edges, events, pg_get_serial_sequence('lead_events', 'id'))
    USING stamp;
    RETURN NULL;
END
$$
"""

DEPENDENTS_TRIGGER = (
    "CREATE TRIGGER leads_dependents AFTER UPDATE ON leads "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_dependents()"
)


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def upgrade() -> None:
    if not _on_citus():
        return
    op.execute(SHARD_DEPENDENTS_FUNCTION)
    # Citus refuses trigger DDL on a distributed table without it (as in 0006).
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    op.execute(DEPENDENTS_TRIGGER)


def downgrade() -> None:
    if not _on_citus():
        return
    # 0014's state on a cluster: no trigger (its function is 0014's again at its downgrade).
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    op.execute("DROP TRIGGER IF EXISTS leads_dependents ON leads")
