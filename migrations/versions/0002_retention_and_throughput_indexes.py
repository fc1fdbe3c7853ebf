"""Indexes for pruning and for the dashboard's throughput chart.

``leads_terminal_updated``: terminal leads by ``updated_at``, the prune
statement's predicate and order, so a batch reads the oldest terminal leads
instead of scanning the table past every queued and leased one.
``lead_events_outcomes_at``: ledger ends of attempts (completed, expired,
released) by ``at``, the dashboard's last-minutes window.

Both are built with ``CREATE INDEX CONCURRENTLY``: a queue being upgraded
keeps pushing, leasing and completing while they build (a plain ``CREATE
INDEX`` would block every write to the table for the whole build). That
cannot run in a transaction, so each statement runs in an autocommit block;
if a build fails or is cancelled it leaves an invalid index behind, which the
next upgrade drops and builds again.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-29
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

INDEXES = {
    "leads_terminal_updated": (
        "ON leads (updated_at) WHERE status IN ('done', 'failed', 'cached')"
    ),
    "lead_events_outcomes_at": (
        "ON lead_events (at) WHERE event IN ('completed', 'expired', 'released')"
    ),
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
    with op.get_context().autocommit_block():
        for name, definition in INDEXES.items():
            if _invalid(name):
                op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
            op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")


def downgrade() -> None:
    with op.get_context().autocommit_block():
        for name in INDEXES:
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
