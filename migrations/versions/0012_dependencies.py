"""Dependencies: a lead pushed ``after`` others waits until each of them is done or cached,
and fails when one of them fails.

``leads.after``: the ids the lead waits on, as pushed (``{}``: none). ``leads.waiting_on``:
how many of them are not yet done or cached; while it is above 0 the lead is queued and
``scheduled``, with ``available_at`` at 9999-12-31, so neither ``leads_ready`` nor
``leads_scheduled_due`` holds it and no lease statement reads it. ``leads.ready_at``: the
``available_at`` it was pushed with, kept for when it is unblocked. ``leads.has_dependents``:
some lead waits on this one; the trigger ``leads_dependents`` fires only for such a lead
(its WHEN), so a lead without dependents costs nothing more.

``lead_dependencies``: one row per edge, ``(session, after_id, lead_id)``; on a Citus
cluster distributed by session, colocated with ``leads``. The trigger is left out on a
cluster (a shard's trigger would update another shard's rows): there a lead pushed with
``after`` would wait for ever, so dependencies are for one PostgreSQL.

``leaseq_dependents()``: when a lead with dependents becomes done or cached, each queued
lead waiting on it counts one less, and the one that reaches 0 becomes available (a NOTIFY
wakes waiting leases); when it becomes failed, each queued lead waiting on it fails with
the error ``dependency <id> failed``, which fires the trigger again, down the chain.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-12
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import ARRAY

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEPENDENTS_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stamp timestamptz := statement_timestamp();
    n bigint;
BEGIN
    IF NEW.status = 'failed' THEN
        UPDATE leads AS c
        SET status = 'failed', error = 'dependency ' || NEW.id || ' failed', waiting_on = 0,
            scheduled = false, available_at = coalesce(c.ready_at, stamp), updated_at = stamp
        FROM lead_dependencies AS d
        WHERE d.session = NEW.session AND d.after_id = NEW.id
          AND c.session = d.session AND c.id = d.lead_id
          AND c.status = 'queued' AND c.waiting_on > 0;
        RETURN NULL;
    END IF;
    WITH counted AS (
        UPDATE leads AS c
        SET waiting_on = c.waiting_on - 1,
            scheduled = CASE WHEN c.waiting_on = 1 THEN c.ready_at > stamp ELSE c.scheduled END,
            available_at = CASE WHEN c.waiting_on = 1 THEN greatest(c.ready_at, stamp)
                           ELSE c.available_at END,
            updated_at = stamp
        FROM lead_dependencies AS d
        WHERE d.session = NEW.session AND d.after_id = NEW.id
          AND c.session = d.session AND c.id = d.lead_id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.waiting_on, c.scheduled
    )
    SELECT count(*) INTO n FROM counted WHERE waiting_on = 0 AND NOT scheduled;
    IF n > 0 THEN
        PERFORM pg_notify('leaseq_queued', NEW.session || ' ' || n);
    END IF;
    RETURN NULL;
END
$$
"""

DEPENDENTS_TRIGGER = (
    "CREATE TRIGGER leads_dependents AFTER UPDATE OF status ON leads FOR EACH ROW "
    "WHEN (NEW.has_dependents AND NEW.status IN ('done', 'cached', 'failed') "
    "AND OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION leaseq_dependents()"
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
    # The function first: on a Citus cluster a function is not created in a transaction
    # that has already altered a distributed table (``leads``) in parallel.
    op.execute(DEPENDENTS_FUNCTION)
    op.add_column(
        "leads",
        sa.Column("after", ARRAY(sa.BigInteger()), server_default=sa.text("'{}'"), nullable=False),
    )
    op.add_column(
        "leads", sa.Column("waiting_on", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.add_column(
        "leads",
        sa.Column("has_dependents", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column("leads", sa.Column("ready_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint(
        "leads_waiting_on_valid", "leads", "waiting_on >= 0 AND (waiting_on = 0 OR scheduled)"
    )
    op.create_index(
        "leads_blocked",
        "leads",
        ["session"],
        postgresql_where=sa.text("status = 'queued' AND waiting_on > 0"),
    )
    op.create_table(
        "lead_dependencies",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("after_id", sa.BigInteger(), nullable=False),
        sa.Column("lead_id", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session", "after_id", "lead_id", name="lead_dependencies_pkey"),
    )
    if not _on_citus():
        op.execute(DEPENDENTS_TRIGGER)
        return
    op.execute(
        "SELECT create_distributed_table('lead_dependencies', 'session', colocate_with => 'leads')"
    )


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS leads_dependents ON leads")
    op.execute("DROP FUNCTION IF EXISTS leaseq_dependents()")
    op.drop_table("lead_dependencies")
    op.drop_index("leads_blocked", table_name="leads")
    op.drop_constraint("leads_waiting_on_valid", "leads", type_="check")
    for column in ("ready_at", "has_dependents", "waiting_on", "after"):
        op.drop_column("leads", column)
