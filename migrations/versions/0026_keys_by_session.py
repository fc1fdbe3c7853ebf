"""Idempotency keys kept with the session their request names: on a cluster, on its shard.

``idempotency_keys`` gets ``session``: the session a key's request names (a push's, a
lease's of one session), ``''`` for a lease across sessions. The statements of a keyed
push or lease name it, so on a Citus cluster the key's row is read and written on the
shard of the request's session, in the statement (or transaction) of its work: a router
statement, where revision 0006 distributed the keys by ``key`` and made every keyed push
and lease a two-shard one.

- On one PostgreSQL the primary key stays ``(verb, key)``: a key names one request whatever
  its session, and one sent again for another session is refused as before. The rows made
  before this revision have ``session = ''``; a retry of one finds it by ``(verb, key)``
  when the claim in its session is refused (``app.domain.idempotency``).
- On a cluster the table is brought back to the coordinator (``undistribute_table``; it
  has no identity column), its primary key becomes ``(session, verb, key)`` (Citus wants
  the distribution column in every unique key), and it is distributed again by ``session``,
  colocated with ``leads``. A key is then one per session: the same key sent for two
  sessions names two requests. The keys made before keep ``session = ''`` (one shard) and
  are pruned as ever; a request sent before the upgrade and retried after it is not
  recognised on a cluster (docs/scaling.md: upgrade with the producers stopped, or wait
  ``LEASEQ_IDEMPOTENCY_TTL_S``).

``downgrade`` drops the column (on a cluster after distributing the table by ``key``
again, with the primary key of 0003).

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0026
Revises: 0025
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0026"
down_revision: str | None = "0025"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

TABLE = "idempotency_keys"
KEY = "idempotency_keys_pkey"


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def _distributed() -> bool:
    """Whether the keys are distributed (a cluster migrated through 0006)."""
    found = op.get_bind().execute(
        sa.text(
            "SELECT EXISTS (SELECT FROM pg_dist_partition"
            f" WHERE logicalrelid = to_regclass('{TABLE}'))"
        )
    )
    return bool(found.scalar())


def upgrade() -> None:
    citus = _on_citus() and _distributed()
    if citus:
        op.execute(f"SELECT undistribute_table('{TABLE}')")
    op.execute(f"ALTER TABLE {TABLE} ADD COLUMN session text NOT NULL DEFAULT ''")
    if not citus:
        return
    op.execute(
        f"ALTER TABLE {TABLE} DROP CONSTRAINT {KEY}, "
        f"ADD CONSTRAINT {KEY} PRIMARY KEY (session, verb, key)"
    )
    op.execute(f"SELECT create_distributed_table('{TABLE}', 'session', colocate_with => 'leads')")
    op.execute(f"SELECT truncate_local_data_after_distributing_table('{TABLE}')")


def downgrade() -> None:
    citus = _on_citus() and _distributed()
    if citus:
        op.execute(f"SELECT undistribute_table('{TABLE}')")
        # Two sessions' rows of one key become one: the newest is kept.
        op.execute(
            f"DELETE FROM {TABLE} AS k USING {TABLE} AS newer"
            " WHERE newer.verb = k.verb AND newer.key = k.key"
            " AND (newer.created_at, newer.session) > (k.created_at, k.session)"
        )
        op.execute(
            f"ALTER TABLE {TABLE} DROP CONSTRAINT {KEY}, "
            f"ADD CONSTRAINT {KEY} PRIMARY KEY (verb, key)"
        )
    op.execute(f"ALTER TABLE {TABLE} DROP COLUMN session")
    if citus:
        op.execute(f"SELECT create_distributed_table('{TABLE}', 'key', colocate_with => 'none')")
        op.execute(f"SELECT truncate_local_data_after_distributing_table('{TABLE}')")
