"""Concurrency keys at their cap: the ready leads of a full key parked, brought back on a free.

- ``lead_key_frees``: per session, concurrency key and writer's slot, how many leases of
  the key ended since a limited lease of the session last looked; written by the trigger
  ``leads_key_frees`` (once per statement on ``leads``, from its transition tables), read
  and deleted by the limited lease (``app.store.statements.parking``).
- ``leads.parked`` (only on a queued, scheduled lead: ``leads_parked_queued``), and
  ``leads_parked``: the parked leads of a session per key, best first. A parked lead is
  also kept as a blocked one is (``scheduled`` at 9999-12-31, its time in ``ready_at``), so
  no other reader meets it. The index is built ``CONCURRENTLY`` after the transaction (see
  0002); it holds no row until a lease parks one.

On a Citus cluster ``lead_key_frees`` is distributed by session, colocated with ``leads``,
and the trigger's function writes the colocated shard on the node where it fires (as
0006's counts do: a distributed statement inside a shard's trigger cannot run).

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-18
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

FREE_SLOTS = 64
PARKED = "status = 'queued' AND parked"
PARKED_INDEX = (
    "leads_parked",
    f"ON leads (session, concurrency_key, priority DESC, id) WHERE {PARKED}",
)

# The frees' upsert, into the table %1$s names (one PostgreSQL: lead_key_frees itself).
_UPSERT = f"""
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE status <> 'leased' AND concurrency_key IS NOT NULL) THEN
        RETURN NULL;
    END IF;{{find}}
    EXECUTE format($q$INSERT INTO %1$s AS f (session, concurrency_key, slot, n)
    SELECT o.session, o.concurrency_key, pg_backend_pid() %% {FREE_SLOTS}, count(*)
    FROM old_rows AS o JOIN new_rows AS n ON n.id = o.id
    WHERE o.status = 'leased' AND o.concurrency_key IS NOT NULL AND n.status <> 'leased'
    GROUP BY o.session, o.concurrency_key ORDER BY o.session, o.concurrency_key
    ON CONFLICT (session, concurrency_key, slot) DO UPDATE SET n = f.n + excluded.n$q$, frees);
    RETURN NULL;"""

FREES_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_key_frees() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- Most statements end no keyed lease: one look at the rows they changed.
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE status <> 'leased' AND concurrency_key IS NOT NULL) THEN
        RETURN NULL;
    END IF;
    INSERT INTO lead_key_frees AS f (session, concurrency_key, slot, n)
    SELECT o.session, o.concurrency_key, pg_backend_pid() % {FREE_SLOTS}, count(*)
    FROM old_rows AS o JOIN new_rows AS n ON n.id = o.id
    WHERE o.status = 'leased' AND o.concurrency_key IS NOT NULL AND n.status <> 'leased'
    GROUP BY o.session, o.concurrency_key ORDER BY o.session, o.concurrency_key
    ON CONFLICT (session, concurrency_key, slot) DO UPDATE SET n = f.n + excluded.n;
    RETURN NULL;
END
$$
"""

SHARD_FREES_FUNCTION = (
    """
CREATE OR REPLACE FUNCTION leaseq_key_frees() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    frees text;
BEGIN"""
    + _UPSERT.replace(
        "{find}",
        """
    -- This trigger fires on a shard of leads on its node; the frees go to the shard of
    -- lead_key_frees with the same hash range: colocated, so on this node.
    SELECT shard_name(theirs.logicalrelid, theirs.shardid) INTO frees
    FROM pg_dist_shard AS own
    JOIN pg_dist_shard AS theirs
      ON theirs.logicalrelid = to_regclass('lead_key_frees')
     AND theirs.shardminvalue = own.shardminvalue
    WHERE own.logicalrelid = to_regclass('leads')
      AND own.shardid = substring(TG_TABLE_NAME FROM '_([0-9]+)$')::bigint;
    IF frees IS NULL THEN
        RETURN NULL;  -- not a shard of leads (the coordinator's empty shell table)
    END IF;""",
    )
    + """
END
$$
"""
)

FREES_TRIGGER = (
    "CREATE TRIGGER leads_key_frees AFTER UPDATE ON leads "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_key_frees()"
)


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def _invalid(name: str) -> bool:
    """True when an earlier concurrent build of ``name`` failed half way."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
        {"name": name},
    )
    return found.scalar() is False


def upgrade() -> None:
    citus = _on_citus()
    # The function first: Citus refuses one after a distributed table's parallel copy.
    op.execute(SHARD_FREES_FUNCTION if citus else FREES_FUNCTION)
    op.add_column(
        "leads", sa.Column("parked", sa.Boolean(), server_default=sa.text("false"), nullable=False)
    )
    op.create_check_constraint(
        "leads_parked_queued", "leads", "NOT parked OR (status = 'queued' AND scheduled)"
    )
    op.create_table(
        "lead_key_frees",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("concurrency_key", sa.Text(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session", "concurrency_key", "slot", name="lead_key_frees_pkey"),
    )
    if citus:
        op.execute(
            "SELECT create_distributed_table('lead_key_frees', 'session', colocate_with => 'leads')"
        )
        # Citus refuses trigger DDL on a distributed table without it (as in 0006).
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    op.execute(FREES_TRIGGER)
    name, definition = PARKED_INDEX
    with op.get_context().autocommit_block():
        if _invalid(name):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")


def downgrade() -> None:
    # Parked leads go back to ready first: without the lease that brings them back, they
    # would wait for ever.
    op.execute(
        "UPDATE leads SET parked = false, scheduled = ready_at > now(), available_at = ready_at "
        f"WHERE {PARKED}"
    )
    if _on_citus():
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
    op.execute("DROP TRIGGER IF EXISTS leads_key_frees ON leads")
    op.execute("DROP FUNCTION IF EXISTS leaseq_key_frees()")
    op.execute(f"DROP INDEX IF EXISTS {PARKED_INDEX[0]}")
    op.drop_table("lead_key_frees")
    op.drop_constraint("leads_parked_queued", "leads", type_="check")
    op.drop_column("leads", "parked")
