-- The statements of app.store.statements.settings, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- settings_get
--
-- One session's settings; no row: the defaults.
--
-- parameters: session, now

-- name: settings_get
SELECT CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, CASE WHEN paused_until > %(now)s::timestamptz THEN paused_until END AS paused_until FROM session_settings WHERE session = %(session)s;

-- ========================================================================================
-- settings_all
--
-- Every session's settings that an operator set (a small table: one row per such session).
--
-- parameters: now

-- name: settings_all
SELECT session, CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, CASE WHEN paused_until > %(now)s::timestamptz THEN paused_until END AS paused_until FROM session_settings ORDER BY session;

-- ========================================================================================
-- settings_barrier
--
-- Wait for every statement that read the settings to end, and hold back new ones until
-- this transaction commits: a cap or rate stored after it binds every lease begun later.
--
-- The lease statements read ``session_settings`` (a share lock for their one statement);
-- this is the one lock that waits for them. Operators' changes are rare and take
-- milliseconds; ``lock_timeout`` keeps a stuck reader from holding the change for long.
--
-- parameters: none

-- name: settings_barrier
LOCK TABLE session_settings IN ACCESS EXCLUSIVE MODE;

-- ========================================================================================
-- lock_timeout
--
-- This transaction's ``lock_timeout`` (``%(timeout)s``, text such as '2s').
--
-- parameters: timeout

-- name: lock_timeout
SELECT set_config('lock_timeout', %(timeout)s, true);

-- ========================================================================================
-- settings_put
--
-- Store a session's settings. A bucket that keeps a rate keeps its level (a change is no
-- burst); a rate newly set starts with a full bucket; no rate, no bucket.
--
-- parameters: session, burst, max_leased, rate_per_s, weight, max_leased_per_key, max_runtime_s, max_queued, now

-- name: settings_put
INSERT INTO session_settings AS s (session, weight, max_leased, rate_per_s, burst, max_leased_per_key, max_runtime_s, max_queued, updated_at)
VALUES (%(session)s, %(weight)s, %(max_leased)s, %(rate_per_s)s, %(burst)s,
        %(max_leased_per_key)s, %(max_runtime_s)s, %(max_queued)s, %(now)s::timestamptz)
ON CONFLICT (session) DO UPDATE SET
    weight = excluded.weight, max_leased = excluded.max_leased,
    rate_per_s = excluded.rate_per_s, burst = excluded.burst,
    max_leased_per_key = excluded.max_leased_per_key, max_runtime_s = excluded.max_runtime_s,
    max_queued = excluded.max_queued,
    tokens = CASE WHEN excluded.rate_per_s IS NOT NULL AND s.rate_per_s IS NOT NULL
                  THEN s.tokens END,
    refilled_at = CASE WHEN excluded.rate_per_s IS NOT NULL AND s.rate_per_s IS NOT NULL
                       THEN s.refilled_at END,
    updated_at = %(now)s::timestamptz
RETURNING CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, CASE WHEN paused_until > %(now)s::timestamptz THEN paused_until END AS paused_until;

-- ========================================================================================
-- pause
--
-- Pause a session until now + ``for_s`` (NULL: until resumed, shown as ``FOREVER``); its
-- settings. A lease statement that begins after this commits reads the pause.
--
-- parameters: session, for_s, now

-- name: pause
INSERT INTO session_settings AS s (session, paused_until, updated_at)
VALUES (%(session)s,
        coalesce(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => %(for_s)s::float8)) AT TIME ZONE 'UTC', '9999-12-31 00:00:00+00'::timestamptz), %(now)s::timestamptz)
ON CONFLICT (session) DO UPDATE SET paused_until = excluded.paused_until
RETURNING CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, CASE WHEN paused_until > %(now)s::timestamptz THEN paused_until END AS paused_until;

-- ========================================================================================
-- resume
--
-- End a session's pause; its settings (no row: it had none). Wakes its waiting leases.
--
-- parameters: session

-- name: resume
WITH resumed AS (
    UPDATE session_settings SET paused_until = NULL WHERE session = %(session)s RETURNING *
)
SELECT CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, NULL::timestamptz AS paused_until,
       pg_notify('leaseq_queued', session) IS NULL AS notified
FROM resumed;
