"""Fleets: settings per session (weight, cap, rate) and checkpoints on leads.

``session_settings``: one row per session an operator configured (``PUT
/sessions/{s}/settings``): its ``weight`` in the fair share of a lease
across sessions, ``max_leased`` (a cap on its leads leased at once) and
``rate_per_s`` with ``burst`` (a token bucket on the leases it is granted,
whose level is ``tokens`` at ``refilled_at`` on the database clock). A
session without a row has the defaults: weight 1, no limits. A lease of a
session with a cap or a rate locks its row (``app.sql.lock_settings``), so
such leases take turns and count what is held after the lock.

``leads.checkpoint``: the JSON a holder's renewal last carried, handed to the
next holder in its lease. Added without a default: no table rewrite.

Frozen like every revision: nothing here reads ``app.db``.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-05
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SESSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"


def upgrade() -> None:
    op.add_column("leads", sa.Column("checkpoint", JSONB(), nullable=True))
    op.create_table(
        "session_settings",
        sa.Column("session", sa.Text(), nullable=False),
        sa.Column("weight", sa.Double(), server_default=sa.text("1"), nullable=False),
        sa.Column("max_leased", sa.Integer(), nullable=True),
        sa.Column("rate_per_s", sa.Double(), nullable=True),
        sa.Column("burst", sa.Integer(), nullable=True),
        sa.Column("tokens", sa.Double(), nullable=True),
        sa.Column("refilled_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(f"session ~ '{SESSION_PATTERN}'", name="session_settings_session_valid"),
        sa.CheckConstraint("weight > 0", name="session_settings_weight_positive"),
        sa.CheckConstraint("max_leased >= 0", name="session_settings_max_leased_nonnegative"),
        sa.CheckConstraint("rate_per_s > 0", name="session_settings_rate_positive"),
        sa.CheckConstraint(
            "burst IS NULL OR (burst >= 1 AND rate_per_s IS NOT NULL)",
            name="session_settings_burst_with_rate",
        ),
        sa.PrimaryKeyConstraint("session", name="session_settings_pkey"),
    )


def downgrade() -> None:
    op.drop_table("session_settings")
    op.drop_column("leads", "checkpoint")
