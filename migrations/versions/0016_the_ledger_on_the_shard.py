"""The ledger on a Citus cluster is written on the lead's shard, by a row trigger.

A statement writes its ledger rows with a data-modifying CTE (``INSERT INTO lead_events …
SELECT … FROM`` the rows it changed). Citus cannot route such a statement: it plans each of
its CTEs apart and sends their results to every worker node, so with one node stopped no
session could lease (docs/scaling.md, "The ledger on a cluster").

``leads.ledger_event``: the event a statement names for the row it changes (``pushed``,
``leased``, ``completed``, ``released``, ``expired``, ``cancelled``, ``retried``); NULL at
rest. On a cluster the service, once it knows the database is sharded, sends its statements
without the CTE and with that column set, and two row triggers on every shard of ``leads``
write the row into the colocated shard of ``lead_events``, on the same node, in the
statement's own transaction:

- ``leads_ledger_update``, ``BEFORE UPDATE … WHEN (NEW.ledger_event IS NOT NULL)``: writes
  the row when the statement named an event (the column differs from the one at rest) and
  sets it back to NULL, so a later statement that names none (a renewal) writes nothing;
- ``leads_ledger_insert``, ``AFTER INSERT … WHEN (NEW.ledger_event IS NOT NULL)``: the
  ``pushed`` row, for the leads a push inserted (after the insert, so a key already in the
  session, skipped by ``ON CONFLICT``, writes none). The column keeps ``pushed`` until the
  lead's first update, which the update trigger then tells from an event named anew.

The row is the one the CTE would write: the lead's status, attempts and owner after the
change, at its ``updated_at`` (every such statement sets it to its clock), and the lease's
expiry for ``leased`` (the new one) and ``expired`` (the one that ran out). A shard's ``id``
has no default: ids come from the node's copy of the sequence, as in revision 0015.

On one PostgreSQL only the column is added (nullable, no default: no rewrite), and stays
NULL: the statements write their rows in their CTEs.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-16
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHARD_LEDGER_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_ledger_row() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    events text;
BEGIN
    IF TG_OP = 'UPDATE' AND NEW.ledger_event IS NOT DISTINCT FROM OLD.ledger_event THEN
        NEW.ledger_event := NULL;  -- the push's, left at rest: no event named now
        RETURN NEW;
    END IF;
    -- The shard of lead_events with this shard's hash range: colocated, on this node.
    SELECT shard_name(e.logicalrelid, e.shardid) INTO events
    FROM pg_dist_shard AS own
    JOIN pg_dist_shard AS e
      ON e.logicalrelid = to_regclass('lead_events') AND e.shardminvalue = own.shardminvalue
    WHERE own.logicalrelid = to_regclass('leads')
      AND own.shardid = substring(TG_TABLE_NAME FROM '_([0-9]+)$')::bigint;
    IF events IS NOT NULL THEN
        EXECUTE format(
            'INSERT INTO %s (id, lead_id, session, event, status, attempt, owner, at, expires_at)'
            ' OVERRIDING SYSTEM VALUE VALUES (nextval(%L), $1, $2, $3, $4, $5, $6, $7, $8)',
            events, pg_get_serial_sequence('lead_events', 'id'))
        USING NEW.id, NEW.session, NEW.ledger_event, NEW.status, NEW.attempts, NEW.owner,
              NEW.updated_at,
              CASE NEW.ledger_event WHEN 'leased' THEN NEW.lease_expires_at
                                    WHEN 'expired' THEN OLD.lease_expires_at END;
    END IF;
    IF TG_OP = 'UPDATE' THEN
        NEW.ledger_event := NULL;
    END IF;
    RETURN NEW;
END
$$
"""

TRIGGERS = (
    "CREATE TRIGGER leads_ledger_update BEFORE UPDATE ON leads FOR EACH ROW "
    "WHEN (NEW.ledger_event IS NOT NULL) EXECUTE FUNCTION leaseq_ledger_row()",
    "CREATE TRIGGER leads_ledger_insert AFTER INSERT ON leads FOR EACH ROW "
    "WHEN (NEW.ledger_event IS NOT NULL) EXECUTE FUNCTION leaseq_ledger_row()",
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
    if citus:
        # The function first: on a Citus cluster a function is not created in a transaction
        # that has already altered a distributed table (as in 0012).
        op.execute(SHARD_LEDGER_FUNCTION)
    op.add_column("leads", sa.Column("ledger_event", sa.Text(), nullable=True))
    if citus:
        # Citus refuses trigger DDL on a distributed table without it (as in 0006).
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        for trigger in TRIGGERS:
            op.execute(trigger)


def downgrade() -> None:
    if _on_citus():
        op.execute("SET LOCAL citus.enable_unsafe_triggers = on")
        op.execute("DROP TRIGGER IF EXISTS leads_ledger_update ON leads")
        op.execute("DROP TRIGGER IF EXISTS leads_ledger_insert ON leads")
        op.execute("DROP FUNCTION IF EXISTS leaseq_ledger_row()")
    op.drop_column("leads", "ledger_event")
