"""Create leads and the lead_events ledger.

This first revision builds the tables from their one definition in
``app.db``. A later schema change gets a revision of its own written with
explicit ``op`` calls; the migration test compares head with ``app.db``.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

from app.db import LEADS_STORAGE, lead_events, leads

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    bind = op.get_bind()
    leads.create(bind)
    lead_events.create(bind)
    storage = ", ".join(f"{name} = {value}" for name, value in LEADS_STORAGE.items())
    op.execute(f"ALTER TABLE leads SET ({storage})")


def downgrade() -> None:
    bind = op.get_bind()
    lead_events.drop(bind)
    leads.drop(bind)
