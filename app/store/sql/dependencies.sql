-- The statements of app.store.statements.dependencies, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- dependency_targets
--
-- The leads of the session a push names in ``after``, by id or by key (unlocked: the
-- ids are checked here, and locked by ``add_dependencies``).
--
-- parameters: session, ids, keys

-- name: dependency_targets
SELECT id, key FROM leads
WHERE session = %(session)s AND (id = ANY(%(ids)s::bigint[]) OR key = ANY(%(keys)s::text[]));

-- ========================================================================================
-- add_dependencies
--
-- The edges of a push (``lead_ids[i]`` waits on ``after_ids[i]``), all of one session:
-- the parents locked and marked, each child blocked on those not yet done or cached, or
-- failed at once when one of them has failed (the module docstring), with its ``failed``
-- event in the ledger, as the trigger writes one for a parent that fails later; with
-- ``ledger_by_row`` (a Citus cluster), by the ledger's row trigger, as ``logged`` does.
--
-- ``edges`` off (a cluster): the edges are not inserted here but by ``add_edges`` right
-- before, in the push's transaction. Citus plans an ``INSERT … SELECT`` in a CTE apart from
-- the rest, which would then not be a router statement (docs/scaling.md).
--
-- parameters: session, lead_ids, after_ids, now, ledger_by_row

-- name: add_dependencies (ledger=True, edges=True)
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
edges AS (
    INSERT INTO lead_dependencies (session, after_id, lead_id)
    SELECT %(session)s, after_id, lead_id FROM edge
    ON CONFLICT DO NOTHING
),
tally AS (
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
                            THEN TIMESTAMPTZ '9999-12-31 00:00:00+00' ELSE c.available_at END,
        updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool AND tally.failed_parent IS NOT NULL
                            THEN 'failed' END
    FROM tally
    WHERE c.id = tally.lead_id AND c.session = %(session)s
    RETURNING c.id, c.session, c.waiting_on, c.status, c.attempts, c.owner
),
failed AS (SELECT * FROM children WHERE status = 'failed'),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'failed', status, attempts, owner, %(now)s::timestamptz, NULL FROM failed
)
SELECT id, waiting_on, status FROM children;

-- name: add_dependencies (ledger=True, edges=False)
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
tally AS (
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
                            THEN TIMESTAMPTZ '9999-12-31 00:00:00+00' ELSE c.available_at END,
        updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool AND tally.failed_parent IS NOT NULL
                            THEN 'failed' END
    FROM tally
    WHERE c.id = tally.lead_id AND c.session = %(session)s
    RETURNING c.id, c.session, c.waiting_on, c.status, c.attempts, c.owner
),
failed AS (SELECT * FROM children WHERE status = 'failed'),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'failed', status, attempts, owner, %(now)s::timestamptz, NULL FROM failed
)
SELECT id, waiting_on, status FROM children;

-- name: add_dependencies (ledger=False, edges=True)
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
edges AS (
    INSERT INTO lead_dependencies (session, after_id, lead_id)
    SELECT %(session)s, after_id, lead_id FROM edge
    ON CONFLICT DO NOTHING
),
tally AS (
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
                            THEN TIMESTAMPTZ '9999-12-31 00:00:00+00' ELSE c.available_at END,
        updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool AND tally.failed_parent IS NOT NULL
                            THEN 'failed' END
    FROM tally
    WHERE c.id = tally.lead_id AND c.session = %(session)s
    RETURNING c.id, c.session, c.waiting_on, c.status, c.attempts, c.owner
)
SELECT id, waiting_on, status FROM children;

-- name: add_dependencies (ledger=False, edges=False)
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
tally AS (
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
                            THEN TIMESTAMPTZ '9999-12-31 00:00:00+00' ELSE c.available_at END,
        updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool AND tally.failed_parent IS NOT NULL
                            THEN 'failed' END
    FROM tally
    WHERE c.id = tally.lead_id AND c.session = %(session)s
    RETURNING c.id, c.session, c.waiting_on, c.status, c.attempts, c.owner
)
SELECT id, waiting_on, status FROM children;

-- ========================================================================================
-- add_edges
--
-- ``rows`` edges of a push on a cluster (``lead_ids[k]`` waits on ``after_ids[k]``, no
-- two the same), before ``add_dependencies`` without ``edges`` in its transaction: a
-- multi-row ``INSERT … VALUES`` naming the session, which Citus routes to its shard.
--
-- parameters: session, lead_ids, after_ids

-- name: add_edges (rows=1)
INSERT INTO lead_dependencies (session, after_id, lead_id)
VALUES
    (%(session)s, (%(after_ids)s::bigint[])[1], (%(lead_ids)s::bigint[])[1])
ON CONFLICT DO NOTHING;

-- name: add_edges (rows=2)
INSERT INTO lead_dependencies (session, after_id, lead_id)
VALUES
    (%(session)s, (%(after_ids)s::bigint[])[1], (%(lead_ids)s::bigint[])[1]),
    (%(session)s, (%(after_ids)s::bigint[])[2], (%(lead_ids)s::bigint[])[2])
ON CONFLICT DO NOTHING;

-- ========================================================================================
-- blocked
--
-- Queued leads waiting on others, per session (one session, or all); ``leads_blocked``.
--
-- parameters: session

-- name: blocked
SELECT session, count(*) AS n FROM leads
WHERE status = 'queued' AND waiting_on > 0 AND (%(session)s::text IS NULL OR session = %(session)s)
GROUP BY session;

-- ========================================================================================
-- dependents
--
-- The leads that wait on one lead (its page on the dashboard).
--
-- parameters: session, lead_id

-- name: dependents
SELECT lead_id FROM lead_dependencies
WHERE session = %(session)s AND after_id = %(lead_id)s ORDER BY lead_id;
