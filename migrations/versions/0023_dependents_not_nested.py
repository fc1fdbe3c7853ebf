"""The dependents' trigger skips the statements of its own: ``leaseq_dependents`` again.

Its statement fails every blocked lead below a failed one at once (the whole closure, 0021)
and counts down the leads below one done; the UPDATEs it runs for that fire it again, once
per statement, and that run walked every lead just failed to find dependents all failed
already. For a chain it cost as much as the chain: cancelling the root of one 5,000 deep
took 4.6 s, and 0.4 s without that run. Now a run fired by a statement inside a trigger
(``pg_trigger_depth() > 1``: only this function updates ``leads`` from a trigger) returns
at once.

On a Citus cluster the shard's function (0015, with 0021's statement) skips the same runs.

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-23
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

DEPENDENTS_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_dependents() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    woken_sessions text[];
    woken bigint[];
BEGIN
    -- A statement of this function's own (the leads it failed or counted down, revision
    -- 0023): every blocked lead below those it failed was in its closure, and it ends no
    -- other. Walking them again cost as much as the chain above them: 4.6 s, not 0.4 s,
    -- for a chain 5,000 deep.
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;
    END IF;
    -- Most statements end no lead that others wait on: one look at the rows they changed.
    IF NOT EXISTS (SELECT FROM new_rows
                   WHERE has_dependents AND status IN ('done', 'cached', 'failed')) THEN
        RETURN NULL;
    END IF;
    -- Planned at each run, with the transition tables' sizes ($1: the statement's instant).
    EXECUTE $q$
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
        CROSS JOIN LATERAL (SELECT d.lead_id FROM lead_dependencies AS d
                            WHERE d.session = e.session AND d.after_id = e.id
                            OFFSET 0) AS d
        CROSS JOIN LATERAL (SELECT c.session, c.id FROM leads AS c
                            WHERE c.id = d.lead_id AND c.session = e.session
                              AND CASE WHEN c.status = 'queued' THEN c.waiting_on > 0 ELSE false END
                            OFFSET 0) AS c
        WHERE e.failed
        UNION
        SELECT c.session, c.id, f.id FROM failing AS f
        CROSS JOIN LATERAL (SELECT d.lead_id FROM lead_dependencies AS d
                            WHERE d.session = f.session AND d.after_id = f.id
                            OFFSET 0) AS d
        CROSS JOIN LATERAL (SELECT c.session, c.id FROM leads AS c
                            WHERE c.id = d.lead_id AND c.session = f.session
                              AND CASE WHEN c.status = 'queued' THEN c.waiting_on > 0 ELSE false END
                            OFFSET 0) AS c
    ),
    counted AS (
        -- Every lead below one done or cached, and how many of its parents ended.
        SELECT e.session, d.lead_id AS id, count(*) AS hits FROM ended AS e
        CROSS JOIN LATERAL (SELECT d.lead_id FROM lead_dependencies AS d
                            WHERE d.session = e.session AND d.after_id = e.id OFFSET 0) AS d
        WHERE NOT e.failed GROUP BY e.session, d.lead_id
    ),
    below AS (
        -- A lead failing is not counted down.
        SELECT session, id, min(cause) AS cause,
               CASE WHEN min(cause) IS NULL THEN sum(hits) END AS hits
        FROM (SELECT session, id, cause, NULL::bigint AS hits FROM failing
              UNION ALL
              SELECT session, id, NULL, hits FROM counted) AS each
        GROUP BY session, id
    ),
    locked AS MATERIALIZED (
        -- All of their rows, locked in id order before any is changed: two statements that
        -- end parents with dependents in common take them in one order, so neither holds
        -- a row the other needs while it waits for one the other holds (no deadlock).
        SELECT b.session, b.id, b.cause, b.hits
        FROM (SELECT * FROM below ORDER BY id) AS b
        CROSS JOIN LATERAL (SELECT FROM leads AS c
                            WHERE c.id = b.id AND c.session = b.session
                              AND CASE WHEN c.status = 'queued' THEN c.waiting_on > 0 ELSE false END
                            FOR UPDATE) AS c
    ),
    failed AS (
        UPDATE leads AS c
        SET status = 'failed', error = 'dependency ' || l.cause || ' failed', waiting_on = 0,
            scheduled = false, available_at = coalesce(c.ready_at, $1), updated_at = $1
        FROM locked AS l
        WHERE c.id = ANY(ARRAY(SELECT id FROM locked WHERE cause IS NOT NULL))
          AND l.cause IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND CASE WHEN c.status = 'queued' THEN c.waiting_on > 0 ELSE false END
        RETURNING c.id, c.session, c.status, c.attempts, c.owner
    ),
    ledger AS (
        -- Each failed lead's row, when it has a ledger: the trigger cannot read
        -- LEASEQ_LEDGER, and a lead pushed with it off has none.
        INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at)
        SELECT f.id, f.session, 'failed', f.status, f.attempts, f.owner, $1 FROM failed AS f
        CROSS JOIN LATERAL (SELECT FROM lead_events AS e
                            WHERE e.session = f.session AND e.lead_id = f.id LIMIT 1) AS e
    ),
    counted_down AS (
        -- Those at 0 are available now, or at the delay they were pushed with.
        UPDATE leads AS c
        SET waiting_on = greatest(c.waiting_on - l.hits, 0),
            scheduled = CASE WHEN c.waiting_on <= l.hits THEN c.ready_at > $1
                        ELSE c.scheduled END,
            available_at = CASE WHEN c.waiting_on <= l.hits THEN greatest(c.ready_at, $1)
                           ELSE c.available_at END,
            updated_at = $1
        FROM locked AS l
        WHERE c.id = ANY(ARRAY(SELECT id FROM locked WHERE hits IS NOT NULL))
          AND l.hits IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND CASE WHEN c.status = 'queued' THEN c.waiting_on > 0 ELSE false END
        RETURNING c.session, c.waiting_on, c.scheduled
    )
    SELECT array_agg(session), array_agg(n)
    FROM (SELECT session, count(*) AS n FROM counted_down
          WHERE waiting_on = 0 AND NOT scheduled GROUP BY session) AS available
    $q$ INTO woken_sessions, woken USING statement_timestamp();
    -- A NOTIFY per session wakes as many of its waiting leases as leads became available.
    FOR i IN 1 .. coalesce(array_length(woken, 1), 0) LOOP
        PERFORM pg_notify('leaseq_queued', woken_sessions[i] || ' ' || woken[i]);
    END LOOP;
    RETURN NULL;
END
$$
"""

SKIP = """BEGIN
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;
    END IF;
"""


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def _module(revision: str) -> Any:
    script = op.get_context().script
    assert script is not None
    return script.get_revision(revision).module


def _shard_function_0021() -> str:
    module = _module("0021")
    text: str = module._shard_function(module._SHARD_STATEMENT)
    return text


def upgrade() -> None:
    if _on_citus():
        text = _shard_function_0021()
        assert text.count("BEGIN\n") == 1
        op.execute(text.replace("BEGIN\n", SKIP))
    else:
        op.execute(DEPENDENTS_FUNCTION)


def downgrade() -> None:
    if _on_citus():
        op.execute(_shard_function_0021())
    else:
        op.execute(_module("0021").DEPENDENTS_FUNCTION)
