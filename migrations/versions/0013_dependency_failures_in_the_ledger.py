"""A failure down a chain of dependencies is in the ledger: one ``failed`` event per lead.

Before, a lead failed with ``dependency <id> failed`` by the trigger ``leads_dependents``
(revision 0012) wrote no ``lead_events`` row, so its timeline ended at ``pushed`` while the
lead was failed, and the session's report could not tell. ``lead_events_event_valid`` now
takes the event ``failed``: the one event no lease, worker or operator caused (the lead
failed because a lead it waits on did; it takes no attempt and ends no lease).

``leaseq_dependents()`` is replaced: each lead it fails gets a ``failed`` row at the
statement's instant (the one its ``updated_at`` takes), with its status, attempts and owner,
when that lead has rows in the ledger already (its ``pushed``). A trigger cannot read the
service's ``LEASEQ_LEDGER``: a lead pushed with the ledger off has none, and gets none.
The probe is one look at ``lead_events_session_lead`` per lead failed, only on a failure.

The downgrade puts 0012's function back and deletes the ``failed`` rows, which 0012's
constraint refuses.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-14
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

EVENTS_0012 = "('pushed', 'leased', 'released', 'completed', 'expired', 'cancelled', 'retried')"
EVENTS = (
    "('pushed', 'leased', 'released', 'completed', 'expired', 'cancelled', 'retried', 'failed')"
)

DEPENDENTS_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stamp timestamptz := statement_timestamp();
    n bigint;
BEGIN
    IF NEW.status = 'failed' THEN
        WITH failed AS (
            UPDATE leads AS c
            SET status = 'failed', error = 'dependency ' || NEW.id || ' failed', waiting_on = 0,
                scheduled = false, available_at = coalesce(c.ready_at, stamp), updated_at = stamp
            FROM lead_dependencies AS d
            WHERE d.session = NEW.session AND d.after_id = NEW.id
              AND c.session = d.session AND c.id = d.lead_id
              AND c.status = 'queued' AND c.waiting_on > 0
            RETURNING c.id, c.session, c.status, c.attempts, c.owner
        )
        INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at)
        SELECT f.id, f.session, 'failed', f.status, f.attempts, f.owner, stamp FROM failed AS f
        WHERE EXISTS (SELECT FROM lead_events AS e
                      WHERE e.session = f.session AND e.lead_id = f.id);
        RETURN NULL;
    END IF;
    WITH counted AS (
        UPDATE leads AS c
        SET waiting_on = c.waiting_on - 1,
            scheduled = CASE WHEN c.waiting_on = 1 THEN c.ready_at > stamp ELSE c.scheduled END,
            available_at = CASE WHEN c.waiting_on = 1 THEN greatest(c.ready_at, stamp)
                           ELSE c.available_at END,
            updated_at = stamp
        FROM lead_dependencies AS d
        WHERE d.session = NEW.session AND d.after_id = NEW.id
          AND c.session = d.session AND c.id = d.lead_id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.waiting_on, c.scheduled
    )
    SELECT count(*) INTO n FROM counted WHERE waiting_on = 0 AND NOT scheduled;
    IF n > 0 THEN
        PERFORM pg_notify('leaseq_queued', NEW.session || ' ' || n);
    END IF;
    RETURN NULL;
END
$$
"""

DEPENDENTS_FUNCTION_0012 = """
CREATE OR REPLACE FUNCTION leaseq_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stamp timestamptz := statement_timestamp();
    n bigint;
BEGIN
    IF NEW.status = 'failed' THEN
        UPDATE leads AS c
        SET status = 'failed', error = 'dependency ' || NEW.id || ' failed', waiting_on = 0,
            scheduled = false, available_at = coalesce(c.ready_at, stamp), updated_at = stamp
        FROM lead_dependencies AS d
        WHERE d.session = NEW.session AND d.after_id = NEW.id
          AND c.session = d.session AND c.id = d.lead_id
          AND c.status = 'queued' AND c.waiting_on > 0;
        RETURN NULL;
    END IF;
    WITH counted AS (
        UPDATE leads AS c
        SET waiting_on = c.waiting_on - 1,
            scheduled = CASE WHEN c.waiting_on = 1 THEN c.ready_at > stamp ELSE c.scheduled END,
            available_at = CASE WHEN c.waiting_on = 1 THEN greatest(c.ready_at, stamp)
                           ELSE c.available_at END,
            updated_at = stamp
        FROM lead_dependencies AS d
        WHERE d.session = NEW.session AND d.after_id = NEW.id
          AND c.session = d.session AND c.id = d.lead_id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.waiting_on, c.scheduled
    )
    SELECT count(*) INTO n FROM counted WHERE waiting_on = 0 AND NOT scheduled;
    IF n > 0 THEN
        PERFORM pg_notify('leaseq_queued', NEW.session || ' ' || n);
    END IF;
    RETURN NULL;
END
$$
"""


def upgrade() -> None:
    # The function first: on a Citus cluster a function is not created in a transaction
    # that has already altered a distributed table (as in 0012).
    op.execute(DEPENDENTS_FUNCTION)
    op.drop_constraint("lead_events_event_valid", "lead_events", type_="check")
    op.create_check_constraint("lead_events_event_valid", "lead_events", f"event IN {EVENTS}")


def downgrade() -> None:
    op.execute(DEPENDENTS_FUNCTION_0012)
    op.execute("DELETE FROM lead_events WHERE event = 'failed'")
    op.drop_constraint("lead_events_event_valid", "lead_events", type_="check")
    op.create_check_constraint("lead_events_event_valid", "lead_events", f"event IN {EVENTS_0012}")
