"""On a Citus cluster: every per-session table distributed by session, colocated with leads.

Only where the database has the ``citus`` extension (the coordinator of a
cluster whose workers were added: docs/scaling.md); on one PostgreSQL this
revision changes nothing.

- ``leads``, ``lead_events``, ``lead_counts`` and ``session_settings`` are
  distributed by ``session``, colocated (one session's rows of every table on
  one shard's node), so every statement that names one session is a router
  statement. ``leads`` goes first: the others colocate with it.
- Citus wants the distribution column in every unique key: the primary keys
  of ``leads`` and ``lead_events`` become ``(session, id)``; ``leads_id`` (a
  plain index on ``id``) keeps lookups by id alone (renew, complete, get) an
  index probe on each shard. The other keys include ``session`` already.
- ``idempotency_keys`` has no session: distributed by its own ``key``.
- ``alembic_version`` becomes a reference table (a copy on every node), so any
  node reads the schema's revision.
- The counting triggers stay (``citus.enable_unsafe_triggers``: they fire per
  shard, on the worker). The function is replaced by one that writes the
  colocated shard of ``lead_counts``, a plain table on the same node, in the
  statement's own local transaction; the first body's ``INSERT INTO
  lead_counts`` would be a distributed statement inside a shard's trigger,
  which Citus cannot run ("could not find named tuplestore"). A trigger that
  fires on no shard (the coordinator's empty shell table, or while
  ``create_distributed_table`` copies rows before ``lead_counts`` is
  distributed) counts nothing: the rows it sees are counted already.

Existing rows move to the workers (``create_distributed_table`` copies them,
under a lock that holds writes for the time of the copy) and the local copies
are truncated. On a cluster ``downgrade`` refuses: ``undistribute_table``
refuses tables with an identity column.

Frozen like every revision: nothing here reads ``app.db``.

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-06
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNT_SLOTS = 64

# Distributed by session, colocated with the first.
BY_SESSION = ("leads", "lead_events", "lead_counts", "session_settings")
# Distributed by a key of their own.
BY_OWN_KEY = {"idempotency_keys": "key"}
REFERENCE = ("alembic_version",)
# Primary keys on id alone, which must include the distribution column.
ID_KEYS = {"leads": "leads_pkey", "lead_events": "lead_events_pkey"}
ID_INDEX = "leads_id"

# The counts' upserts of revision 0004, into the table %1$s names.
_UPSERTS = f"""
    IF TG_OP = 'INSERT' THEN
        EXECUTE format($q$INSERT INTO %1$s AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() %% {COUNT_SLOTS}, count(*)
        FROM new_rows GROUP BY session, status ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n$q$, counts);
    ELSIF TG_OP = 'DELETE' THEN
        EXECUTE format($q$INSERT INTO %1$s AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() %% {COUNT_SLOTS}, -count(*)
        FROM old_rows GROUP BY session, status ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n$q$, counts);
    ELSIF TG_OP = 'TRUNCATE' THEN
        EXECUTE format('DELETE FROM %1$s', counts);
    ELSE
        EXECUTE format($q$INSERT INTO %1$s AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() %% {COUNT_SLOTS}, sum(d)
        FROM (SELECT session, status, 1 AS d FROM new_rows
              UNION ALL SELECT session, status, -1 FROM old_rows) AS changes
        GROUP BY session, status HAVING sum(d) <> 0 ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n$q$, counts);
    END IF;"""

SHARD_COUNT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_count_leads() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    counts text;
BEGIN
    -- This trigger fires on a shard of leads (leads_<shard id>) on its node. Its counts go
    -- to the shard of lead_counts with the same hash range: colocated, so on this node.
    -- (to_regclass: NULL on a worker that has no lead_counts yet, while leads is copied.)
    SELECT shard_name(theirs.logicalrelid, theirs.shardid) INTO counts
    FROM pg_dist_shard AS own
    JOIN pg_dist_shard AS theirs
      ON theirs.logicalrelid = to_regclass('lead_counts')
     AND theirs.shardminvalue = own.shardminvalue
    WHERE own.logicalrelid = to_regclass('leads')
      AND own.shardid = substring(TG_TABLE_NAME FROM '_([0-9]+)$')::bigint;
    IF counts IS NULL THEN
        RETURN NULL;  -- not a shard of leads, or lead_counts not distributed yet (module doc)
    END IF;{_UPSERTS}
    RETURN NULL;
END
$$
"""


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
    # Citus refuses tables with triggers, and trigger DDL on distributed tables, without it.
    op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    for table, key in ID_KEYS.items():
        op.execute(
            f"ALTER TABLE {table} DROP CONSTRAINT {key}, "
            f"ADD CONSTRAINT {key} PRIMARY KEY (session, id)"
        )
    op.execute(f"CREATE INDEX {ID_INDEX} ON leads (id)")
    op.execute(SHARD_COUNT_FUNCTION)
    first, *others = BY_SESSION
    op.execute(f"SELECT create_distributed_table('{first}', 'session')")
    for table in others:
        op.execute(
            f"SELECT create_distributed_table('{table}', 'session', colocate_with => '{first}')"
        )
    for table, column in BY_OWN_KEY.items():
        op.execute(
            f"SELECT create_distributed_table('{table}', '{column}', colocate_with => 'none')"
        )
    for table in REFERENCE:
        op.execute(f"SELECT create_reference_table('{table}')")
    # The rows copied to the shards stay on the coordinator's disk until truncated; the
    # counting trigger of the shell table counts nothing (see above).
    for table in (*BY_SESSION, *BY_OWN_KEY, *REFERENCE):
        op.execute(f"SELECT truncate_local_data_after_distributing_table('{table}')")


def downgrade() -> None:
    if not _on_citus():
        return
    # undistribute_table refuses tables with an identity column (leads, lead_events), so
    # the rows cannot be brought back here: say so rather than half undo the revision.
    raise RuntimeError(
        "revision 0006 cannot be undone on a Citus cluster (undistribute_table refuses tables "
        "with identity columns): copy the rows out (pg_dump --data-only) into a database at 0005"
    )
