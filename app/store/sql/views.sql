-- The statements of app.store.statements.views, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- session_report
--
-- One pass over a session's events (index ``lead_events_session_lead``).
--
-- parameters: session

-- name: session_report
WITH ev AS (
    SELECT id, lead_id, event, attempt, at, expires_at FROM lead_events WHERE session = %(session)s
),
-- One row per lease: a lead's attempt number is handed out once.
leases AS (
    SELECT lead_id, attempt, min(at) AS leased_at
    FROM ev WHERE event = 'leased' GROUP BY lead_id, attempt
),
-- When each lease stopped being valid. An expiry ends it at the expiry the
-- sweeper found (renewals included), not at the sweep.
ends AS (
    SELECT lead_id, attempt,
           min(CASE WHEN event = 'expired' THEN coalesce(expires_at, at) ELSE at END) AS ended_at,
           bool_or(event = 'completed') AS completed
    FROM ev WHERE event IN ('completed', 'released', 'cancelled', 'expired')
    GROUP BY lead_id, attempt
),
spans AS (
    SELECT l.lead_id, l.attempt, l.leased_at, e.ended_at, coalesce(e.completed, false) AS completed,
           lead(l.leased_at) OVER (PARTITION BY l.lead_id ORDER BY l.attempt) AS next_leased_at
    FROM leases AS l LEFT JOIN ends AS e USING (lead_id, attempt)
),
-- Completions counted per lead between an operator's retries: failed, retried
-- and completed again is a dead-letter replay (docs/contract.md#invariant-4), not a double.
-- In the order of the events' instants, then ids (ids alone may not follow a shard move).
epochs AS (
    SELECT lead_id, event,
           count(*) FILTER (WHERE event = 'retried')
               OVER (PARTITION BY lead_id ORDER BY at, id) AS epoch
    FROM ev
),
completions AS (
    SELECT lead_id, epoch, count(*) AS n FROM epochs WHERE event = 'completed'
    GROUP BY lead_id, epoch
)
SELECT
    (SELECT count(DISTINCT lead_id) FROM ev) AS leads,
    (SELECT count(*) FROM ev WHERE event = 'pushed') AS pushed,
    (SELECT count(*) FROM spans) AS leases,
    (SELECT count(DISTINCT lead_id) FROM completions) AS completed,
    (SELECT coalesce(sum(n), 0) FROM completions) AS completions,
    (SELECT count(DISTINCT lead_id) FROM completions WHERE n > 1) AS double_completions,
    (SELECT count(*) FROM spans
     WHERE next_leased_at IS NOT NULL AND (ended_at IS NULL OR next_leased_at < ended_at))
        AS overlapping_leases,
    (SELECT count(*) FROM spans WHERE ended_at IS NOT NULL AND NOT completed) AS wasted_attempts,
    (SELECT count(*) FROM ev WHERE event = 'expired') AS expired,
    (SELECT count(*) FROM ev WHERE event = 'released') AS released,
    (SELECT count(*) FROM ev WHERE event = 'cancelled') AS cancelled,
    (SELECT count(*) FROM ev WHERE event = 'retried') AS retried,
    (SELECT count(*) FROM ev WHERE event = 'failed') AS failed;

-- ========================================================================================
-- attempts_per_lead
--
-- Leads by the number of leases they took (a lead never leased: 0).
--
-- parameters: session

-- name: attempts_per_lead
SELECT leases, count(*) AS leads FROM (
    SELECT lead_id, count(DISTINCT attempt) FILTER (WHERE event = 'leased') AS leases
    FROM lead_events WHERE session = %(session)s GROUP BY lead_id
) AS per_lead
GROUP BY leases ORDER BY leases;

-- ========================================================================================
-- owners
--
-- Per owner: leases handed out, completions written, leases that ended without one.
--
-- parameters: session

-- name: owners
WITH ev AS (
    SELECT lead_id, event, attempt, owner FROM lead_events WHERE session = %(session)s
),
leases AS (
    SELECT lead_id, attempt, min(owner) AS owner FROM ev WHERE event = 'leased'
    GROUP BY lead_id, attempt
),
ends AS (
    SELECT lead_id, attempt, bool_or(event = 'completed') AS completed
    FROM ev WHERE event IN ('completed', 'released', 'cancelled', 'expired')
    GROUP BY lead_id, attempt
),
tally AS (
    SELECT l.owner, 1 AS leases, 0 AS completions,
           CASE WHEN e.lead_id IS NOT NULL AND NOT e.completed THEN 1 ELSE 0 END AS wasted
    FROM leases AS l LEFT JOIN ends AS e USING (lead_id, attempt)
    UNION ALL
    SELECT owner, 0, 1, 0 FROM ev WHERE event = 'completed'
)
SELECT coalesce(owner, '') AS owner, sum(leases) AS leases, sum(completions) AS completions,
       sum(wasted) AS wasted
FROM tally GROUP BY 1 ORDER BY 1;

-- ========================================================================================
-- per_minute
--
-- Completions and wasted attempts (expired or released leases) per session and minute ago,
-- over the last ``window_minutes`` (the oldest minute gathers anything older in the window).
--
-- The event filter is the predicate of index ``lead_events_outcomes_at``, word for word.
--
-- parameters: none

-- name: per_minute (window_minutes=15)
SELECT session,
       least(floor(extract(epoch FROM now() - at) / 60), 14)::int AS ago,
       count(*) FILTER (WHERE event = 'completed') AS completed,
       count(*) FILTER (WHERE event IN ('expired', 'released')) AS wasted
FROM lead_events
WHERE event IN ('completed', 'expired', 'released')
  AND at >= now() - interval '15 minutes' AND at <= now()
GROUP BY 1, 2;

-- ========================================================================================
-- expiring
--
-- The leases that end soonest (index ``leads_leased_expiry``).
--
-- parameters: limit

-- name: expiring
SELECT id, session, owner, attempts, (CASE WHEN extract(epoch FROM lease_expires_at) - extract(epoch FROM now()) IS NOT NULL THEN least(greatest(extract(epoch FROM lease_expires_at) - extract(epoch FROM now()), -1000000000000.0), 1000000000000.0) END)::float8 AS expires_in_s
FROM leads WHERE status = 'leased'
ORDER BY lease_expires_at LIMIT %(limit)s;

-- ========================================================================================
-- failures
--
-- The most recently failed leads.
--
-- parameters: limit

-- name: failures
SELECT id, session, owner, attempts, error, updated_at
FROM leads WHERE status = 'failed'
ORDER BY updated_at DESC, id DESC LIMIT %(limit)s;

-- ========================================================================================
-- throughput
--
-- A session's leads finished (done or cached) and failed per minute ago, over the last
-- ``window_minutes`` of the database clock, by their present status and last change.
--
-- The status filter is the predicate of index ``leads_terminal_updated`` (a range of
-- ``updated_at`` over finished leads), as the scaling signal's ``completions``: its cost
-- follows the window's throughput, never the backlog; the session in the WHERE routes it
-- to one shard on a cluster.
--
-- parameters: session, now

-- name: throughput (window_minutes=60)
SELECT least(floor(extract(epoch FROM %(now)s::timestamptz - updated_at) / 60), 59)::int AS ago,
       count(*) FILTER (WHERE status <> 'failed') AS completed,
       count(*) FILTER (WHERE status = 'failed') AS failed
FROM leads
WHERE session = %(session)s
  AND status IN ('done', 'failed', 'cached')
  AND updated_at > ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => -3600)) AT TIME ZONE 'UTC' AND updated_at <= %(now)s::timestamptz
GROUP BY 1;
