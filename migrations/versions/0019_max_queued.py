"""Backpressure: a session's ``max_queued``, enforced on every insert into ``leads``.

- ``session_settings.max_queued`` (null: none; at least 1): the most leads of the session
  that are queued (not leased, not terminal) once a push commits.
- ``leaseq_config``: settings of the service kept in the database, for what runs without
  an API process (``leaseq_push`` in a producer's transaction): ``max_queued`` is the
  service's ``LEASEQ_MAX_QUEUED``, the default of sessions without their own, written by
  each API process as it starts.
- The trigger ``leads_max_queued`` (after each insert statement on ``leads``, so after the
  push of the API, of ``leaseq_push`` and of a schedule's tick alike): for each session of
  the inserted rows that has a bound, it takes that session's advisory lock (held to the
  commit: pushes of a bounded session commit one after another), reads the session's queued
  count (``lead_counts``: a new snapshot, so every push committed before is in it, and this
  statement's own rows, counted by ``leads_count_insert``, which fires first: triggers of
  one event fire in name order) and raises SQLSTATE ``LQ429`` when it passes the bound, so
  none of the statement's rows is stored. Concurrent pushes cannot overshoot: the second
  reads the count after the first committed.

On a Citus cluster the trigger is not created (a shard's trigger cannot read the
distributed ``session_settings``): ``max_queued`` is stored but not enforced there.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-19
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

MAX_QUEUED_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_max_queued() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    fallback integer;
    bound record;
    queued bigint;
BEGIN
    SELECT value::integer INTO fallback FROM leaseq_config WHERE name = 'max_queued';
    FOR bound IN
        SELECT pushed.session, pushed.n, coalesce(s.max_queued, fallback) AS cap
        FROM (SELECT session, count(*) AS n FROM new_rows WHERE status = 'queued'
              GROUP BY session) AS pushed
        LEFT JOIN session_settings AS s ON s.session = pushed.session
        WHERE coalesce(s.max_queued, fallback) IS NOT NULL
        ORDER BY pushed.session
    LOOP
        -- One push of a bounded session at a time from here to its commit: the count read
        -- next (a new snapshot) holds every push committed before, and this one's rows.
        PERFORM pg_advisory_xact_lock(
            hashtextextended('leaseq.max_queued ' || bound.session, 0));
        SELECT coalesce(sum(c.n), 0) INTO queued FROM lead_counts AS c
        WHERE c.session = bound.session AND c.status = 'queued';
        IF queued > bound.cap THEN
            RAISE EXCEPTION 'a push of % would pass the max_queued % of session % (% queued)',
                bound.n, bound.cap, bound.session, queued - bound.n
                USING ERRCODE = 'LQ429';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$
"""

MAX_QUEUED_TRIGGER = (
    "CREATE TRIGGER leads_max_queued AFTER INSERT ON leads REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_max_queued()"
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
    citus = _on_citus()
    op.add_column("session_settings", sa.Column("max_queued", sa.Integer(), nullable=True))
    op.create_check_constraint(
        "session_settings_max_queued_positive", "session_settings", "max_queued >= 1"
    )
    op.create_table(
        "leaseq_config",
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.Column(
            "updated_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.PrimaryKeyConstraint("name", name="leaseq_config_pkey"),
    )
    if citus:
        op.execute("SELECT create_reference_table('leaseq_config')")
        return
    op.execute(MAX_QUEUED_FUNCTION)
    op.execute(MAX_QUEUED_TRIGGER)


def downgrade() -> None:
    op.execute("DROP TRIGGER IF EXISTS leads_max_queued ON leads")
    op.execute("DROP FUNCTION IF EXISTS leaseq_max_queued()")
    op.drop_table("leaseq_config")
    op.drop_constraint("session_settings_max_queued_positive", "session_settings", type_="check")
    op.drop_column("session_settings", "max_queued")
