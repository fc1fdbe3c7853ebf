"""Dependents are locked in id order: the trigger ``leads_dependents`` runs once per statement.

Before, the trigger ran once per parent a statement ended (``FOR EACH ROW``), and each run
locked that parent's dependents; a statement that ended several parents took their
dependents parent by parent. Two such statements with dependents in common (two grouped
completions, two batches of ``/complete/batch``) could each hold a dependent the other
needed next, and PostgreSQL cancelled one of them (SQLSTATE 40P01, deadlock detected).

Now it runs once per ``UPDATE`` of ``leads`` (``FOR EACH STATEMENT``, with the statement's
transition tables, as ``leads_count_update`` and ``leads_ended`` do): it finds every parent
the statement ended and every blocked lead below them (down the chain for a failure), locks
all of those rows at once in id order, and only then fails or counts them down. Every
statement takes the dependents it changes in one order, so none waits on another while
holding a row that one needs. A statement that ends no lead with dependents stops at one
look at its own changed rows. What the trigger does is unchanged otherwise: the same
errors, the ledger's ``failed`` rows (0013), the NOTIFY of leads that became available.

Frozen like every revision: nothing here reads ``app``. As 0012 did, the trigger is left
out on a Citus cluster; the function is replaced there all the same.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-14
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEPENDENTS_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stamp timestamptz := statement_timestamp();
    woken_sessions text[];
    woken bigint[];
BEGIN
    -- Most statements end no lead that others wait on: one look at the rows they changed.
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE has_dependents AND status IN ('done', 'cached', 'failed')) THEN
        RETURN NULL;
    END IF;
    -- One statement without parameters, so its plan is made once per connection.
    WITH RECURSIVE ended AS (
        -- The leads this statement ended (a status that changed) that others wait on.
        SELECT n.session, n.id, n.status = 'failed' AS failed
        FROM new_rows AS n JOIN old_rows AS o ON o.id = n.id
        WHERE n.has_dependents AND n.status IN ('done', 'cached', 'failed')
          AND o.status IS DISTINCT FROM n.status
    ),
    failing (session, id, cause) AS (
        -- Every blocked lead below a failed one, down the chain, and the parent it fails by.
        SELECT c.session, c.id, e.id FROM ended AS e
        JOIN lead_dependencies AS d ON d.session = e.session AND d.after_id = e.id
        JOIN leads AS c ON c.session = d.session AND c.id = d.lead_id
        WHERE e.failed AND c.status = 'queued' AND c.waiting_on > 0
        UNION
        SELECT c.session, c.id, f.id FROM failing AS f
        JOIN lead_dependencies AS d ON d.session = f.session AND d.after_id = f.id
        JOIN leads AS c ON c.session = d.session AND c.id = d.lead_id
        WHERE c.status = 'queued' AND c.waiting_on > 0
    ),
    counted AS (
        -- Every blocked lead below one done or cached, and how many of its parents ended.
        SELECT d.session, d.lead_id AS id, count(*) AS hits FROM ended AS e
        JOIN lead_dependencies AS d ON d.session = e.session AND d.after_id = e.id
        WHERE NOT e.failed GROUP BY d.session, d.lead_id
    ),
    below AS (
        SELECT session, id, min(cause) AS cause, NULL::bigint AS hits
        FROM failing GROUP BY session, id
        UNION ALL
        SELECT session, id, NULL, hits FROM counted AS c
        WHERE NOT EXISTS (SELECT FROM failing AS f WHERE f.session = c.session AND f.id = c.id)
    ),
    locked AS MATERIALIZED (
        -- All of their rows, locked in id order before any is changed: two statements that
        -- end parents with dependents in common take them in one order, so neither holds
        -- a row the other needs while it waits for one the other holds (no deadlock).
        SELECT b.session, b.id, b.cause, b.hits FROM below AS b
        JOIN leads AS c ON c.session = b.session AND c.id = b.id
        WHERE c.status = 'queued' AND c.waiting_on > 0
        ORDER BY c.id
        FOR UPDATE OF c
    ),
    failed AS (
        UPDATE leads AS c
        SET status = 'failed', error = 'dependency ' || l.cause || ' failed', waiting_on = 0,
            scheduled = false, available_at = coalesce(c.ready_at, stamp), updated_at = stamp
        FROM locked AS l
        WHERE l.cause IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.id, c.session, c.status, c.attempts, c.owner
    ),
    ledger AS (
        -- Each failed lead's row, when it has a ledger: the trigger cannot read
        -- LEASEQ_LEDGER, and a lead pushed with it off has none.
        INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at)
        SELECT f.id, f.session, 'failed', f.status, f.attempts, f.owner, stamp FROM failed AS f
        WHERE EXISTS (SELECT FROM lead_events AS e
                      WHERE e.session = f.session AND e.lead_id = f.id)
    ),
    counted_down AS (
        -- Those at 0 are available now, or at the delay they were pushed with.
        UPDATE leads AS c
        SET waiting_on = greatest(c.waiting_on - l.hits, 0),
            scheduled = CASE WHEN c.waiting_on <= l.hits THEN c.ready_at > stamp
                        ELSE c.scheduled END,
            available_at = CASE WHEN c.waiting_on <= l.hits THEN greatest(c.ready_at, stamp)
                           ELSE c.available_at END,
            updated_at = stamp
        FROM locked AS l
        WHERE l.hits IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND c.status = 'queued' AND c.waiting_on > 0
        RETURNING c.session, c.waiting_on, c.scheduled
    )
    SELECT array_agg(session), array_agg(n) INTO woken_sessions, woken
    FROM (SELECT session, count(*) AS n FROM counted_down
          WHERE waiting_on = 0 AND NOT scheduled GROUP BY session) AS available;
    -- A NOTIFY per session wakes as many of its waiting leases as leads became available.
    FOR i IN 1 .. coalesce(array_length(woken, 1), 0) LOOP
        PERFORM pg_notify('leaseq_queued', woken_sessions[i] || ' ' || woken[i]);
    END LOOP;
    RETURN NULL;
END
$$
"""

DEPENDENTS_TRIGGER = (
    "CREATE TRIGGER leads_dependents AFTER UPDATE ON leads "
    "REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_dependents()"
)

DEPENDENTS_FUNCTION_0013 = """
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

DEPENDENTS_TRIGGER_0013 = (
    "CREATE TRIGGER leads_dependents AFTER UPDATE OF status ON leads FOR EACH ROW "
    "WHEN (NEW.has_dependents AND NEW.status IN ('done', 'cached', 'failed') "
    "AND OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION leaseq_dependents()"
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
    op.execute(DEPENDENTS_FUNCTION)
    if not _on_citus():
        op.execute("DROP TRIGGER IF EXISTS leads_dependents ON leads")
        op.execute(DEPENDENTS_TRIGGER)


def downgrade() -> None:
    op.execute(DEPENDENTS_FUNCTION_0013)
    if not _on_citus():
        op.execute("DROP TRIGGER IF EXISTS leads_dependents ON leads")
        op.execute(DEPENDENTS_TRIGGER_0013)
