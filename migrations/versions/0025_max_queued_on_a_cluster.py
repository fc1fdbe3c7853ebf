"""Backpressure on a Citus cluster: ``leads_max_queued`` on every shard of ``leads``.

Revision 0019's trigger reads ``session_settings``, ``lead_counts`` and ``leaseq_config`` by
their names; inside a shard's trigger those are distributed tables, which a worker node
cannot query from there, so 0019 left the trigger out on a cluster and ``max_queued`` was
stored but not enforced. Here the trigger fires on the shard, on the worker node that holds
it, and reads the shards it needs there, by their shard names, as the counting trigger of
revision 0006 writes its counts:

- the shard of ``session_settings`` and the shard of ``lead_counts`` with the same hash
  range as the shard of ``leads`` that fired (colocated: on this node), for the session's
  ``max_queued`` and its queued count;
- the node's placement of ``leaseq_config`` (a reference table: a copy on every node), for
  the service's default.

The decision is the one of one PostgreSQL, on the shard's node: every push of a session
inserts into that session's one shard, so they all take the same advisory lock, on the same
node, held to the commit of the push's transaction there (a prepared transaction of a
two-phase commit keeps it until it is committed too); the count read after the lock (a new
snapshot) holds every push committed before and this statement's own rows
(``leads_count_insert`` fires first, as triggers of one event fire in name order, and
Citus names a shard's triggers after theirs with the shard's id). Past the bound it raises
SQLSTATE ``LQ429``, which the coordinator re-raises as the worker's, so the whole push is
undone. A trigger that fires on no shard (the coordinator's empty shell table) decides
nothing.

On one PostgreSQL this revision changes nothing (0019's trigger holds there).

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-21
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0025"
down_revision: str | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHARD_MAX_QUEUED_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_max_queued() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    counts text;
    settings text;
    config text;
    fallback integer;
    bound record;
    queued bigint;
BEGIN
    -- The shards of lead_counts and session_settings with this shard's hash range
    -- (colocated: on this node), and this node's copy of the reference table leaseq_config.
    SELECT shard_name(c.logicalrelid, c.shardid), shard_name(s.logicalrelid, s.shardid)
    INTO counts, settings
    FROM pg_dist_shard AS own
    JOIN pg_dist_shard AS c
      ON c.logicalrelid = to_regclass('lead_counts') AND c.shardminvalue = own.shardminvalue
    JOIN pg_dist_shard AS s
      ON s.logicalrelid = to_regclass('session_settings') AND s.shardminvalue = own.shardminvalue
    WHERE own.logicalrelid = to_regclass('leads')
      AND own.shardid = substring(TG_TABLE_NAME FROM '_([0-9]+)$')::bigint;
    SELECT shard_name(logicalrelid, shardid) INTO config
    FROM pg_dist_shard WHERE logicalrelid = to_regclass('leaseq_config');
    IF counts IS NULL OR settings IS NULL OR config IS NULL THEN
        RETURN NULL;  -- not a shard of leads (the coordinator's shell table)
    END IF;
    EXECUTE format('SELECT value::integer FROM %s WHERE name = $1', config)
        INTO fallback USING 'max_queued';
    FOR bound IN EXECUTE format($q$
        SELECT pushed.session, pushed.n, coalesce(s.max_queued, $1) AS cap
        FROM (SELECT session, count(*) AS n FROM new_rows WHERE status = 'queued'
              GROUP BY session) AS pushed
        LEFT JOIN %s AS s ON s.session = pushed.session
        WHERE coalesce(s.max_queued, $1) IS NOT NULL
        ORDER BY pushed.session$q$, settings) USING fallback
    LOOP
        -- One push of a bounded session at a time from here to its commit on this node: the
        -- count read next (a new snapshot) holds every push committed before, and this one's.
        PERFORM pg_advisory_xact_lock(
            hashtextextended('leaseq.max_queued ' || bound.session, 0));
        EXECUTE format($q$SELECT coalesce(sum(c.n), 0) FROM %s AS c
                          WHERE c.session = $1 AND c.status = 'queued'$q$, counts)
            INTO queued USING bound.session;
        IF queued > bound.cap THEN
            RAISE EXCEPTION 'a push of % would pass the max_queued % of session % (% queued)',
                bound.n, bound.cap, bound.session, queued - bound.n
                USING ERRCODE = 'LQ429';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$
"""

MAX_QUEUED_TRIGGER = (
    "CREATE TRIGGER leads_max_queued AFTER INSERT ON leads REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_max_queued()"
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
    # The function first: on a Citus cluster a function is not created in a transaction
    # that has already altered a distributed table (as in 0016).
    op.execute(SHARD_MAX_QUEUED_FUNCTION)
    # Citus refuses trigger DDL on a distributed table without it (as in 0006).
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    op.execute(MAX_QUEUED_TRIGGER)


def downgrade() -> None:
    if _on_citus():
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        op.execute("DROP TRIGGER IF EXISTS leads_max_queued ON leads")
        op.execute("DROP FUNCTION IF EXISTS leaseq_max_queued()")
