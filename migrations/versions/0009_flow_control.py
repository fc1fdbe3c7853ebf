"""Flow control: pausing a session, a worker's cooldown, concurrency keys, a maximum runtime.

``session_settings.paused_until``: no lease of the session begins before it (database
clock); set by ``POST /sessions/{s}/pause`` and by a throttled release, cleared by
``/resume``. Not a setting: a ``PUT`` of the settings leaves it alone.
``session_settings.max_leased_per_key``: at most this many leads of one
``concurrency_key`` leased at once in the session (leased under the session's lock,
as a cap is). ``session_settings.max_runtime_s``: the default of ``leads.max_runtime_s``.

``leads.throttles``: the leases of the lead that ended in a throttled release, which do
not count against ``max_attempts``. ``leads.runtime_ends_at``: the instant the current
attempt's maximum runtime ends (its lease is never renewed past it; NULL: no maximum).
``leads.concurrency_key`` and ``leads.max_runtime_s``: as pushed.

``leads_leased_keys`` covers the count of a session's leased leads per key, so a keyed
lease reads the leased leads of its session, never the waiting ones.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-09
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
# The revision this one follows: the one line to change when another is put before it.
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_RUNTIME_S = 86400
MAX_KEY_CHARS = 128


def upgrade() -> None:
    op.add_column(
        "session_settings", sa.Column("paused_until", sa.DateTime(timezone=True), nullable=True)
    )
    op.add_column("session_settings", sa.Column("max_leased_per_key", sa.Integer(), nullable=True))
    op.add_column("session_settings", sa.Column("max_runtime_s", sa.Integer(), nullable=True))
    op.create_check_constraint(
        "session_settings_max_leased_per_key_positive",
        "session_settings",
        "max_leased_per_key >= 1",
    )
    op.create_check_constraint(
        "session_settings_max_runtime_valid",
        "session_settings",
        f"max_runtime_s BETWEEN 1 AND {MAX_RUNTIME_S}",
    )
    op.add_column(
        "leads", sa.Column("throttles", sa.Integer(), server_default=sa.text("0"), nullable=False)
    )
    op.add_column("leads", sa.Column("concurrency_key", sa.Text(), nullable=True))
    op.add_column("leads", sa.Column("max_runtime_s", sa.Integer(), nullable=True))
    op.add_column("leads", sa.Column("runtime_ends_at", sa.DateTime(timezone=True), nullable=True))
    op.create_check_constraint(
        "leads_throttles_valid", "leads", "throttles >= 0 AND throttles <= attempts"
    )
    op.create_check_constraint(
        "leads_concurrency_key_valid",
        "leads",
        f"char_length(concurrency_key) BETWEEN 1 AND {MAX_KEY_CHARS}",
    )
    op.create_check_constraint(
        "leads_max_runtime_valid", "leads", f"max_runtime_s BETWEEN 1 AND {MAX_RUNTIME_S}"
    )
    op.create_index(
        "leads_leased_keys",
        "leads",
        ["session", "concurrency_key"],
        postgresql_where=sa.text("status = 'leased' AND concurrency_key IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("leads_leased_keys", table_name="leads")
    for name in ("leads_max_runtime_valid", "leads_concurrency_key_valid", "leads_throttles_valid"):
        op.drop_constraint(name, "leads", type_="check")
    for column in ("runtime_ends_at", "max_runtime_s", "concurrency_key", "throttles"):
        op.drop_column("leads", column)
    for name in (
        "session_settings_max_runtime_valid",
        "session_settings_max_leased_per_key_positive",
    ):
        op.drop_constraint(name, "session_settings", type_="check")
    for column in ("max_runtime_s", "max_leased_per_key", "paused_until"):
        op.drop_column("session_settings", column)
