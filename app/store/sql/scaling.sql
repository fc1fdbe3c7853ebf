-- The statements of app.store.statements.scaling, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- completions
--
-- How many of a session's leads finished (done, failed or cached) in the last
-- ``window_s`` seconds of the database clock.
--
-- parameters: session, window_s, now

-- name: completions
SELECT count(*)::bigint AS n FROM leads
WHERE session = %(session)s AND status IN ('done', 'failed', 'cached')
  AND updated_at > ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => -%(window_s)s::float8)) AT TIME ZONE 'UTC';

-- ========================================================================================
-- completions_all
--
-- How many leads of each session finished in the last ``window_s`` seconds (sessions
-- with none are left out).
--
-- parameters: window_s, now

-- name: completions_all
SELECT session, count(*)::bigint AS n FROM leads
WHERE status IN ('done', 'failed', 'cached')
  AND updated_at > ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => -%(window_s)s::float8)) AT TIME ZONE 'UTC'
GROUP BY session;
