"""An operator's list of a session's leads: ``leads_session_status_id`` (session, status, id).

``GET /sessions/{session}/leads`` and the bulk retry and cancel walk a session's leads of one
status in id order from a cursor (``app.store.statements.listing``), which this index gives
without a sort, a page at a time, however many leads the session holds. It replaces
``leads_session_status`` (session, status), whose every use it serves as well, so a write
to ``leads`` maintains no more indexes than before. Both are built and dropped
``CONCURRENTLY``, after the transaction (see 0002): a push or a lease never waits on them.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-22
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NEW = ("leads_session_status_id", "ON leads (session, status, id)")
OLD = ("leads_session_status", "ON leads (session, status)")


def _invalid(name: str) -> bool:
    """True when an earlier concurrent build of ``name`` failed half way."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT indisvalid FROM pg_index WHERE indexrelid = to_regclass(:name)"),
        {"name": name},
    )
    return found.scalar() is False


def _swap(build: tuple[str, str], drop: tuple[str, str]) -> None:
    name, definition = build
    with op.get_context().autocommit_block():
        if _invalid(name):
            op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {name}")
        op.execute(f"CREATE INDEX CONCURRENTLY IF NOT EXISTS {name} {definition}")
        op.execute(f"DROP INDEX CONCURRENTLY IF EXISTS {drop[0]}")


def upgrade() -> None:
    _swap(NEW, OLD)


def downgrade() -> None:
    _swap(OLD, NEW)
