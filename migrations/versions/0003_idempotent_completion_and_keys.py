"""A finished lead keeps the token that completed it; the answers of idempotency keys.

``leads_lease_state`` replaces ``leads_lease_complete``: a completed lead
keeps the token of the lease that finished it (never shown), so the same
completion sent again, a worker retrying after a lost answer, is recognised
and answered as the first was (SPEC: ``/complete`` is idempotent). A queued
lead still has no token, and only a leased lead has an expiry. The new
check is added ``NOT VALID`` and validated after, so the scan of a live
table takes no lock that stops the queue's writes.

``idempotency_keys`` remembers the answer of each push and lease sent with an
``Idempotency-Key``, so a retried request gets it instead of a second effect;
the background pruner deletes keys older than ``LEASEQ_IDEMPOTENCY_TTL_S``.

Frozen like every revision: nothing here reads ``app.db``.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

LEASE_STATE = (
    "CASE status WHEN 'leased' THEN lease_token IS NOT NULL AND lease_expires_at IS NOT NULL "
    "WHEN 'queued' THEN lease_token IS NULL AND lease_expires_at IS NULL "
    "ELSE lease_expires_at IS NULL END"
)
LEASE_COMPLETE = "(status = 'leased') = (lease_token IS NOT NULL AND lease_expires_at IS NOT NULL)"


def upgrade() -> None:
    op.execute(
        f"ALTER TABLE leads ADD CONSTRAINT leads_lease_state CHECK ({LEASE_STATE}) NOT VALID"
    )
    op.execute("ALTER TABLE leads VALIDATE CONSTRAINT leads_lease_state")
    op.drop_constraint("leads_lease_complete", "leads", type_="check")
    op.create_table(
        "idempotency_keys",
        sa.Column("verb", sa.Text(), nullable=False),
        sa.Column("key", sa.Text(), nullable=False),
        sa.Column("request", sa.Text(), nullable=False),
        sa.Column("answer", postgresql.JSONB(), nullable=True),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("verb", "key", name="idempotency_keys_pkey"),
        sa.CheckConstraint("verb IN ('push', 'lease')", name="idempotency_keys_verb_valid"),
    )
    op.create_index("idempotency_keys_created", "idempotency_keys", ["created_at"])


def downgrade() -> None:
    op.drop_table("idempotency_keys")
    # Finished leads forget their completing token, as 0002 had it.
    op.execute("UPDATE leads SET lease_token = NULL WHERE status <> 'leased'")
    op.execute(
        f"ALTER TABLE leads ADD CONSTRAINT leads_lease_complete CHECK ({LEASE_COMPLETE}) NOT VALID"
    )
    op.execute("ALTER TABLE leads VALIDATE CONSTRAINT leads_lease_complete")
    op.drop_constraint("leads_lease_state", "leads", type_="check")
