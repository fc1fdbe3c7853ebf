"""Create leads and the lead_events ledger.

Frozen: every table, column, constraint, index and storage parameter is
spelled out here, so this revision builds the same schema whatever ``app.db``
later says. ``tests/integration/test_migrations.py`` compares what it builds with the
catalog snapshot ``tests/fixtures/schema_0001.json``, taken from the revision
as first released. Schema changes go in later revisions.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TIMESTAMPTZ = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "leads",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("priority", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column(
            "payload",
            postgresql.JSONB(),
            server_default=sa.text("'{}'::jsonb"),
            nullable=False,
        ),
        sa.Column("key", sa.Text(), nullable=True),
        sa.Column("depth", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("parent_id", sa.BigInteger(), nullable=True),
        sa.Column("status", sa.Text(), server_default=sa.text("'queued'"), nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("lease_token", sa.Text(), nullable=True),
        sa.Column("attempts", sa.Integer(), server_default=sa.text("0"), nullable=False),
        sa.Column("max_attempts", sa.Integer(), server_default=sa.text("5"), nullable=False),
        sa.Column("available_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("lease_expires_at", TIMESTAMPTZ, nullable=True),
        sa.Column("result", postgresql.JSONB(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.Column("updated_at", TIMESTAMPTZ, server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name="leads_pkey"),
        sa.CheckConstraint(
            "status IN ('queued', 'leased', 'done', 'failed', 'cached')",
            name="leads_status_valid",
        ),
        sa.CheckConstraint(
            "session ~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'", name="leads_session_valid"
        ),
        sa.CheckConstraint("attempts >= 0", name="leads_attempts_nonnegative"),
        sa.CheckConstraint("max_attempts >= 1", name="leads_max_attempts_positive"),
        sa.CheckConstraint("depth >= 0", name="leads_depth_nonnegative"),
        sa.CheckConstraint("jsonb_typeof(payload) = 'object'", name="leads_payload_object"),
        sa.CheckConstraint(
            "(status = 'leased') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)",
            name="leads_lease_complete",
        ),
    )
    op.create_index(
        "leads_session_key",
        "leads",
        ["session", "key"],
        unique=True,
        postgresql_where=sa.text("key IS NOT NULL"),
    )
    op.create_index(
        "leads_queued",
        "leads",
        ["session", sa.text("priority DESC"), "id"],
        postgresql_where=sa.text("status = 'queued'"),
    )
    op.create_index(
        "leads_leased_expiry",
        "leads",
        ["lease_expires_at"],
        postgresql_where=sa.text("status = 'leased'"),
    )
    op.create_index("leads_session_status", "leads", ["session", "status"])

    op.create_table(
        "lead_events",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("lead_id", sa.BigInteger(), nullable=False),
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("event", sa.Text(), nullable=False),
        sa.Column("status", sa.Text(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("owner", sa.Text(), nullable=True),
        sa.Column("at", TIMESTAMPTZ, nullable=False),
        sa.Column("expires_at", TIMESTAMPTZ, nullable=True),
        sa.PrimaryKeyConstraint("id", name="lead_events_pkey"),
        sa.CheckConstraint(
            "event IN ('pushed', 'leased', 'released', 'completed', 'expired', "
            "'cancelled', 'retried')",
            name="lead_events_event_valid",
        ),
    )
    op.create_index("lead_events_session_lead", "lead_events", ["session", "lead_id", "id"])
    op.create_index("lead_events_lead", "lead_events", ["lead_id"])

    # leads churns (every lead is updated three or more times): room in each
    # page for updated versions, and autovacuum after 1% of the rows died.
    op.execute(
        "ALTER TABLE leads SET (fillfactor = 70, autovacuum_vacuum_scale_factor = 0.01, "
        "autovacuum_vacuum_threshold = 1000, autovacuum_analyze_scale_factor = 0.02, "
        "autovacuum_vacuum_cost_delay = 1)"
    )


def downgrade() -> None:
    op.drop_table("lead_events")
    op.drop_table("leads")
