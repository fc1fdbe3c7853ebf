"""Dependencies in SQL (docs/contract.md#dependencies): the leads a push names in ``after``,
the edges of ``lead_dependencies`` and the trigger that counts them down.

A push with ``after`` is one transaction (``app.domain.queue``): ``dependency_targets``
reads the ids and keys it names, the push inserts the leads (those with dependents marked
``has_dependents`` at once), and ``add_dependencies`` locks the parents (``FOR UPDATE``, in
id order) and marks them in one ``UPDATE``, writes the edges and blocks each child on the
parents not yet done or cached. (A locking ``SELECT`` of its own, read by the CTEs after it,
is what a Citus cluster cannot run: it plans each CTE apart, and reads that one's rows back
wrong.) A parent's completion takes the same row lock before its trigger runs, so it
either commits first (the push then reads it done and does not count it) or waits for the
push (and its trigger then finds the edge and counts it down): never neither, never both.

The trigger runs once per statement on ``leads`` (revision 0014): it takes every lead below
the parents the statement ended, locks them all in id order, and only then fails or counts
them down, so two statements that end parents with dependents in common never deadlock
(docs/design.md, "Dependencies: one trigger per statement, dependents locked in id order").
Its statement is linear in the leads it touches (revision 0021: ``DEPENDENTS_FUNCTION``).
On a Citus cluster the trigger is on every shard of leads and runs the same statement on its
node's colocated shards (revision 0015, docs/scaling.md), without a NOTIFY.

A blocked lead is ``scheduled`` with ``available_at`` at ``BLOCKED_UNTIL``, so the lease
statements never read it (``leads_ready`` holds only leads not scheduled, and
``leads_scheduled_due`` only those due); ``ready_at`` keeps the time it was pushed for.
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.fragments import NOTIFY_CHANNEL, NOW, ledger_rows

BLOCKED_UNTIL = "9999-12-31 00:00:00+00"

# The trigger function of leads_dependents (revision 0021; 0014 made it one per statement;
# app.store.schema builds the same): once per statement on leads, from its transition
# tables, so the leads below every parent a statement ended are locked together, in id
# order (the module docstring). Its statement is linear in the leads it touches, whatever
# the planner believes of the tables (fresh ones have no statistics) and whatever size the
# statement had the first time a connection ran it:
#  - it is planned at each run (EXECUTE): a plan cached from a statement that ended one
#    parent joined the transition tables by nested loops, quadratic in a chain's length;
#  - each step from a lead to its dependents, and to their rows, is a lookup by key per
#    row (LATERAL ... OFFSET 0, which the planner cannot turn into a scan of the table),
#    and the rows are found by id (BLOCKED is opaque to the partial index leads_blocked,
#    which, chosen on estimates of a table without statistics, scanned a session's blocked
#    leads once per dependent: 5.8 s for 1,000 dependents);
#  - the UPDATEs find their rows by ``id = ANY(ids)`` (the primary key), and the leads
#    failed and counted down are told apart by a grouping, not by an anti-join of two CTEs.
BLOCKED = "CASE WHEN c.status = 'queued' THEN c.waiting_on > 0 ELSE false END"
_BELOW = f"""CROSS JOIN LATERAL (SELECT d.lead_id FROM lead_dependencies AS d
                            WHERE d.session = {{of}}.session AND d.after_id = {{of}}.id
                            OFFSET 0) AS d
        CROSS JOIN LATERAL (SELECT c.session, c.id FROM leads AS c
                            WHERE c.id = d.lead_id AND c.session = {{of}}.session
                              AND {BLOCKED}
                            OFFSET 0) AS c"""
DEPENDENTS_FUNCTION = f"""
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
        {_BELOW.format(of="e")}
        WHERE e.failed
        UNION
        SELECT c.session, c.id, f.id FROM failing AS f
        {_BELOW.format(of="f")}
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
                              AND {BLOCKED}
                            FOR UPDATE) AS c
    ),
    failed AS (
        UPDATE leads AS c
        SET status = 'failed', error = 'dependency ' || l.cause || ' failed', waiting_on = 0,
            scheduled = false, available_at = coalesce(c.ready_at, $1), updated_at = $1
        FROM locked AS l
        WHERE c.id = ANY(ARRAY(SELECT id FROM locked WHERE cause IS NOT NULL))
          AND l.cause IS NOT NULL AND c.session = l.session AND c.id = l.id
          AND {BLOCKED}
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
          AND {BLOCKED}
        RETURNING c.session, c.waiting_on, c.scheduled
    )
    SELECT array_agg(session), array_agg(n)
    FROM (SELECT session, count(*) AS n FROM counted_down
          WHERE waiting_on = 0 AND NOT scheduled GROUP BY session) AS available
    $q$ INTO woken_sessions, woken USING statement_timestamp();
    -- A NOTIFY per session wakes as many of its waiting leases as leads became available.
    FOR i IN 1 .. coalesce(array_length(woken, 1), 0) LOOP
        PERFORM pg_notify('{NOTIFY_CHANNEL}', woken_sessions[i] || ' ' || woken[i]);
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


def _dependency_targets() -> str:
    return """
SELECT id, key FROM leads
WHERE session = %(session)s AND (id = ANY(%(ids)s::bigint[]) OR key = ANY(%(keys)s::text[]))
"""


@statement(_dependency_targets)
def dependency_targets(*, session: str, ids: list[int], keys: list[str]) -> None:
    """The leads of the session a push names in ``after``, by id or by key (unlocked: the
    ids are checked here, and locked by ``add_dependencies``)."""


def _add_dependencies(ledger: bool, edges: bool) -> str:
    # A child failed at once (a parent of it has failed already) gets its ``failed`` event
    # here; the trigger writes those of the children a parent's later failure fails.
    failed = ",\nfailed AS (SELECT * FROM children WHERE status = 'failed')" if ledger else ""
    return f"""
WITH edge AS (
    SELECT DISTINCT * FROM unnest(%(lead_ids)s::bigint[], %(after_ids)s::bigint[])
        AS e(lead_id, after_id)
),
locked_parents AS (
    -- Locked in id order, then marked; the status read is the one after the lock. A parent
    -- that waits on another itself is a lead of this push (pushed marked, and queued), which
    -- the UPDATE of children below changes: a row is changed once per statement.
    UPDATE leads AS p SET has_dependents = true
    FROM (SELECT id FROM leads
          WHERE session = %(session)s AND id IN (SELECT after_id FROM edge)
            AND id NOT IN (SELECT lead_id FROM edge)
          ORDER BY id
          FOR UPDATE) AS l
    WHERE p.session = %(session)s AND p.id = l.id
    RETURNING p.id, p.status
),
parents AS (
    SELECT id, status FROM locked_parents
    UNION ALL
    SELECT DISTINCT lead_id, 'queued' FROM edge WHERE lead_id IN (SELECT after_id FROM edge)
),
{_EDGES if edges else ""}tally AS (
    SELECT e.lead_id,
           count(*) FILTER (WHERE p.status NOT IN ('done', 'cached')) AS waiting,
           min(p.id) FILTER (WHERE p.status = 'failed') AS failed_parent,
           array_agg(e.after_id ORDER BY e.after_id) AS after
    FROM edge AS e JOIN parents AS p ON p.id = e.after_id
    GROUP BY e.lead_id
),
children AS (
    UPDATE leads AS c
    SET after = tally.after, ready_at = c.available_at,
        waiting_on = CASE WHEN tally.failed_parent IS NULL THEN tally.waiting ELSE 0 END,
        status = CASE WHEN tally.failed_parent IS NULL THEN 'queued' ELSE 'failed' END,
        error = CASE WHEN tally.failed_parent IS NULL THEN NULL
                ELSE 'dependency ' || tally.failed_parent::text || ' failed' END,
        scheduled = CASE WHEN tally.failed_parent IS NOT NULL THEN false
                         WHEN tally.waiting > 0 THEN true ELSE c.scheduled END,
        available_at = CASE WHEN tally.failed_parent IS NULL AND tally.waiting > 0
                            THEN TIMESTAMPTZ '{BLOCKED_UNTIL}' ELSE c.available_at END,
        updated_at = {NOW},
        ledger_event = CASE WHEN %(ledger_by_row)s::bool AND tally.failed_parent IS NOT NULL
                            THEN 'failed' END
    FROM tally
    WHERE c.id = tally.lead_id AND c.session = %(session)s
    RETURNING c.id, c.session, c.waiting_on, c.status, c.attempts, c.owner
){failed}{ledger_rows("failed", "failed", enabled=ledger)}
SELECT id, waiting_on, status FROM children
"""


_EDGES = """edges AS (
    INSERT INTO lead_dependencies (session, after_id, lead_id)
    SELECT %(session)s, after_id, lead_id FROM edge
    ON CONFLICT DO NOTHING
),
"""


@statement(_add_dependencies, ledger=BOTH, edges=BOTH)
def add_dependencies(
    *,
    session: str,
    lead_ids: list[int],
    after_ids: list[int],
    now: datetime | None,
    ledger: bool,
    edges: bool = True,
    ledger_by_row: bool = False,
) -> None:
    """The edges of a push (``lead_ids[i]`` waits on ``after_ids[i]``), all of one session:
    the parents locked and marked, each child blocked on those not yet done or cached, or
    failed at once when one of them has failed (the module docstring), with its ``failed``
    event in the ledger, as the trigger writes one for a parent that fails later; with
    ``ledger_by_row`` (a Citus cluster), by the ledger's row trigger, as ``logged`` does.

    ``edges`` off (a cluster): the edges are not inserted here but by ``add_edges`` right
    before, in the push's transaction. Citus plans an ``INSERT … SELECT`` in a CTE apart from
    the rest, which would then not be a router statement (docs/scaling.md)."""


# The edges one add_edges statement inserts at most (a power of two, like push_rows').
ADD_EDGES_MAX = 16


def _add_edges(rows: int) -> str:
    # Row k reads position k of each array: one text per count of rows, the same parameters.
    values = ",\n".join(
        f"    (%(session)s, (%(after_ids)s::bigint[])[{k}], (%(lead_ids)s::bigint[])[{k}])"
        for k in range(1, rows + 1)
    )
    return f"""
INSERT INTO lead_dependencies (session, after_id, lead_id)
VALUES
{values}
ON CONFLICT DO NOTHING
"""


# Rendered for one and two rows; the queue builds the counts it needs (powers of two).
@statement(_add_edges, rows=(1, 2))
def add_edges(*, session: str, lead_ids: list[int], after_ids: list[int], rows: int) -> None:
    """``rows`` edges of a push on a cluster (``lead_ids[k]`` waits on ``after_ids[k]``, no
    two the same), before ``add_dependencies`` without ``edges`` in its transaction: a
    multi-row ``INSERT … VALUES`` naming the session, which Citus routes to its shard."""


def _blocked() -> str:
    return """
SELECT session, count(*) AS n FROM leads
WHERE status = 'queued' AND waiting_on > 0 AND (%(session)s::text IS NULL OR session = %(session)s)
GROUP BY session
"""


@statement(_blocked)
def blocked(*, session: str | None) -> None:
    """Queued leads waiting on others, per session (one session, or all); ``leads_blocked``."""


def _dependents() -> str:
    return """
SELECT lead_id FROM lead_dependencies
WHERE session = %(session)s AND after_id = %(lead_id)s ORDER BY lead_id
"""


@statement(_dependents)
def dependents(*, session: str, lead_id: int) -> None:
    """The leads that wait on one lead (its page on the dashboard)."""
