"""Schedules, and the notification of leads that ended for requests waiting on them.

``schedules``: one row per schedule (``PUT /schedules/{name}``): the session
its leads go to, its cron expression and time zone, the lead pushed at each
tick (as JSON), and ``next_tick``, the next tick due on the database clock.
A tick is pushed by the transaction whose guarded UPDATE moves ``next_tick``
on (``app.store.statements.schedules``), so one process pushes it.

``lead_waits`` and the trigger ``leads_ended``: a request held by ``GET
/leads/{id}?wait_s=n`` writes a row while it waits; a statement that makes
one of those leads terminal sends one NOTIFY on ``leaseq_ended`` naming them
(``app.store.statements.outcomes``). With no row in ``lead_waits`` the trigger sends
nothing. On a Citus cluster the trigger is left out (a shard's trigger could
not read a table of the coordinator): waiters there look again every
``poll_interval_s``.

New tables and a function only: nothing to backfill. Frozen like every
revision: nothing here reads ``app``.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-10
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB, UUID

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SESSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"

ENDED_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_notify_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    ids text;
BEGIN
    -- Nobody waits for any lead: nothing to say (one look at an empty table).
    IF NOT EXISTS (SELECT FROM lead_waits) THEN
        RETURN NULL;
    END IF;
    SELECT count(*), string_agg(ended.id::text, ' ') INTO n, ids
    FROM (SELECT DISTINCT e.id FROM new_rows AS e JOIN lead_waits AS w ON w.lead_id = e.id
          WHERE e.status IN ('done', 'failed', 'cached') LIMIT 351) AS ended;
    IF n > 350 THEN
        PERFORM pg_notify('leaseq_ended', '*');
    ELSIF n > 0 THEN
        PERFORM pg_notify('leaseq_ended', ids);
    END IF;
    RETURN NULL;
END
$$
"""

ENDED_TRIGGER = (
    "CREATE TRIGGER leads_ended AFTER UPDATE ON leads REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_notify_ended()"
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
    now = sa.text("now()")
    op.create_table(
        "schedules",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("cron", sa.Text(), nullable=False),
        sa.Column("timezone", sa.Text(), nullable=False),
        sa.Column("lead", JSONB(), nullable=False),
        sa.Column("next_tick", sa.DateTime(timezone=True), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), server_default=now, nullable=False),
        sa.PrimaryKeyConstraint("name", name="schedules_pkey"),
        sa.CheckConstraint(f"name ~ '{SESSION_PATTERN}'", name="schedules_name_valid"),
        sa.CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="schedules_session_valid"),
        sa.CheckConstraint("jsonb_typeof(lead) = 'object'", name="schedules_lead_object"),
    )
    op.create_index("schedules_next_tick", "schedules", ["next_tick"])
    op.create_table(
        "lead_waits",
        sa.Column("id", UUID(), nullable=False),
        sa.Column("lead_id", sa.BigInteger(), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="lead_waits_pkey"),
    )
    op.create_index("lead_waits_lead", "lead_waits", ["lead_id"])
    op.execute(ENDED_FUNCTION)
    if not _on_citus():
        op.execute(ENDED_TRIGGER)
        return
    # On a cluster: small tables, read by every node's statements, as reference tables.
    for table in ("schedules", "lead_waits"):
        op.execute(f"SELECT create_reference_table('{table}')")


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS leads_ended ON leads")
    op.execute("DROP FUNCTION IF EXISTS leaseq_notify_ended()")
    op.drop_table("lead_waits")
    op.drop_table("schedules")
