"""Scoped API tokens kept in the database, and the operators' audit trail.

``api_tokens``: a token's name, role, session pattern and SHA-256 (never the
token), when it was created, when it expires (NULL: never), when it was last
used (written at most once a minute) and when it was revoked. A revoked
token's row stays, for the audit; a live token's name is unique, so a name
can be given again once its token is revoked. ``operator_actions``: which
token (by name) took each operator action (cancel, retry, settings, sweep,
token changes), at the database's clock. New tables only: nothing to backfill.

Frozen like every revision: the patterns are written out, not imported.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-08
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = "^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$"
PATTERN = r"^(\*|[A-Za-z0-9][A-Za-z0-9._:-]{0,127}\*?)$"
ROLES = "('producer', 'worker', 'operator', 'reader')"
NOW = sa.text("now()")


def upgrade() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("role", sa.Text(), nullable=False),
        sa.Column("sessions", sa.Text(), nullable=False),
        sa.Column("hash", sa.Text(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint(f"name ~ '{NAME}'", name="api_tokens_name_valid"),
        sa.CheckConstraint(f"role IN {ROLES}", name="api_tokens_role_valid"),
        sa.CheckConstraint(f"sessions ~ '{PATTERN}'", name="api_tokens_sessions_valid"),
        sa.PrimaryKeyConstraint("id", name="api_tokens_pkey"),
        sa.UniqueConstraint("hash", name="api_tokens_hash_key"),
    )
    op.create_index(
        "api_tokens_live_name",
        "api_tokens",
        ["name"],
        unique=True,
        postgresql_where=sa.text("revoked_at IS NULL"),
    )
    op.create_table(
        "operator_actions",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=True), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("token", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), nullable=False),
        sa.Column("session", sa.Text(), nullable=True),
        sa.Column("lead_id", sa.BigInteger(), nullable=True),
        sa.Column("detail", JSONB(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="operator_actions_pkey"),
    )
    op.create_index("operator_actions_at", "operator_actions", ["at"])
    if _on_citus():  # small tables every node may read: reference tables on a cluster
        for table in ("api_tokens", "operator_actions"):
            op.execute(f"SELECT create_reference_table('{table}')")


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def downgrade() -> None:
    op.drop_table("operator_actions")
    op.drop_table("api_tokens")
