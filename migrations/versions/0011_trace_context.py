"""Trace context: the W3C ``traceparent`` a lead was pushed with.

``leads.traceparent``: the lead's own value, or the push's ``traceparent`` header, or NULL;
a lead object carries it and a worker runs the handler in a span whose parent it is. A
column on ``leads`` only: on a Citus cluster it follows the distributed table, nothing to
do; nothing to backfill (older leads have none).

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-11
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TRACEPARENT_PATTERN = r"^[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$"


def upgrade() -> None:
    op.add_column("leads", sa.Column("traceparent", sa.Text(), nullable=True))
    op.create_check_constraint(
        "leads_traceparent_valid", "leads", f"traceparent ~ '{TRACEPARENT_PATTERN}'"
    )


def downgrade() -> None:
    op.drop_constraint("leads_traceparent_valid", "leads", type_="check")
    op.drop_column("leads", "traceparent")
