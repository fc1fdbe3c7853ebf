"""Delayed leads kept apart from ready ones; lead counts kept by triggers.

``leads.scheduled``: true while a queued lead's ``available_at`` is in the
future (a push or release with a delay). The lease reads ready leads through
``leads_ready`` (``WHERE status = 'queued' AND NOT scheduled``), so it never
walks over delayed leads of higher priority; due scheduled leads are found
through ``leads_scheduled_due`` (by session and ``available_at``) and
promoted by the lease itself and by the sweeper (``leads_scheduled_at``,
across sessions). ``leads_ready`` replaces ``leads_queued``.
``leads_ready_age``: the oldest ready lead of a session, read by the
dashboard with one index probe; ``leads_failed_recent``: its latest failures,
read in order.

``lead_counts``: leads per session and status, kept by statement-level
triggers on ``leads`` (one upsert per statement and (session, status)
changed), so the dashboard and ``/stats`` cost the same with a million leads
as with a thousand. Each backend writes its own slot (``pg_backend_pid()``
modulo ``COUNT_SLOTS``) so concurrent statements rarely wait on one row;
readers add the slots up. The backfill counts the table once, under the lock
``CREATE TRIGGER`` takes (writes wait for it; reads go on).

The indexes are built ``CONCURRENTLY`` after that transaction (see 0002).

Frozen like every revision: nothing here reads ``app.db``.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-03
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COUNT_SLOTS = 64

INDEXES = {
    "leads_ready": (
        "ON leads (session, priority DESC, id) WHERE status = 'queued' AND NOT scheduled"
    ),
    "leads_ready_age": "ON leads (session, available_at) WHERE status = 'queued' AND NOT scheduled",
    "leads_scheduled_due": "ON leads (session, available_at) WHERE scheduled",
    "leads_scheduled_at": "ON leads (available_at) WHERE scheduled",
    "leads_failed_recent": "ON leads (updated_at DESC, id DESC) WHERE status = 'failed'",
}
OLD_INDEX = ("leads_queued", "ON leads (session, priority DESC, id) WHERE status = 'queued'")

COUNT_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_count_leads() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- One upsert per (session, status) the statement changed, in a fixed order (no deadlock
    -- between two statements of one slot), into this backend's slot.
    IF TG_OP = 'INSERT' THEN
        INSERT INTO lead_counts AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() % {COUNT_SLOTS}, count(*)
        FROM new_rows GROUP BY session, status ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO lead_counts AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() % {COUNT_SLOTS}, -count(*)
        FROM old_rows GROUP BY session, status ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'TRUNCATE' THEN
        DELETE FROM lead_counts;
    ELSE
        INSERT INTO lead_counts AS c (session, status, slot, n)
        SELECT session, status, pg_backend_pid() % {COUNT_SLOTS}, sum(d)
        FROM (SELECT session, status, 1 AS d FROM new_rows
              UNION ALL SELECT session, status, -1 FROM old_rows) AS changes
        GROUP BY session, status HAVING sum(d) <> 0 ORDER BY session, status
        ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n;
    END IF;
    RETURN NULL;
END
$$
"""

TRIGGERS = {
    "leads_count_insert": "AFTER INSERT ON leads REFERENCING NEW TABLE AS new_rows",
    "leads_count_update": (
        "AFTER UPDATE ON leads REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows"
    ),
    "leads_count_delete": "AFTER DELETE ON leads REFERENCING OLD TABLE AS old_rows",
    "leads_count_truncate": "AFTER TRUNCATE ON leads",
}


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
    op.add_column(
        "leads",
        sa.Column("scheduled", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    # A lead queued with a delay still ahead is scheduled (a push or release with delay_s).
    op.execute("UPDATE leads SET scheduled = true WHERE status = 'queued' AND available_at > now()")
    op.execute(
        "ALTER TABLE leads ADD CONSTRAINT leads_scheduled_queued "
        "CHECK (NOT scheduled OR status = 'queued')"
    )
    op.create_table(
        "lead_counts",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("slot", sa.Integer(), nullable=False),
        sa.Column("n", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("session", "status", "slot", name="lead_counts_pkey"),
    )
    op.execute(COUNT_FUNCTION)
    for name, when in TRIGGERS.items():
        op.execute(
            f"CREATE TRIGGER {name} {when} FOR EACH STATEMENT EXECUTE FUNCTION leaseq_count_leads()"
        )
    op.execute(
        "INSERT INTO lead_counts (session, status, slot, n) "
        "SELECT session, status, 0, count(*) FROM leads GROUP BY session, status"
    )
    with op.get_context().autocommit_block():
        for name, definition in INDEXES.items():
            if _invalid(name):
                op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {OLD_INDEX[0]}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        name, definition = OLD_INDEX
        if _invalid(name):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")
        for index in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {index}")
    for trigger in TRIGGERS:
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON leads")
    op.execute("DROP FUNCTION IF EXISTS leaseq_count_leads()")
    op.drop_table("lead_counts")
    op.drop_constraint("leads_scheduled_queued", "leads", type_="check")
    op.drop_column("leads", "scheduled")
