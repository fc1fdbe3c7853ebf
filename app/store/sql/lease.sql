-- The statements of app.store.statements.lease, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- lease_next
--
-- Lease up to ``max`` available leads of a session, highest priority then oldest first.
--
-- Two sources, each read through its own partial index and locked with
-- SKIP LOCKED: ready leads (``leads_ready``: session, priority, id), so the
-- scan never walks over delayed leads; and up to ``DUE_PER_LEASE`` scheduled
-- leads of the session that came due (``leads_scheduled_due``). The best
-- ``max`` of both are leased; the other due ones are promoted to ready in
-- the same statement (disjoint rows, so no row is updated twice).
--
-- The ids are chosen in CTEs, which PostgreSQL evaluates exactly once, then
-- updated — never ``WHERE id IN (SELECT … LIMIT n)``, which the planner may
-- re-run and so update more than n rows (PostgreSQL bug #15715).
--
-- A session with a cap or a rate (``session_settings``, one index probe) is
-- not leased here: the statement takes nothing and answers one row whose
-- ``limited`` is true, and the caller leases through ``lease_limited``, under
-- the session's lock. Otherwise each lead leased is a row (``limited`` false),
-- and nothing leased is one row of NULLs.
--
-- parameters: session, max, owner, tokens, ttl_s, now, ledger_by_row, api_token

-- name: lease_next (ledger=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.limited
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- name: lease_next (ledger=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.limited
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- ========================================================================================
-- lease_keyed
--
-- ``lease_next`` with an idempotency key (``request``: the fingerprint of what it names),
-- in one statement: the lease and the memory of it commit together. ``key_session``: the
-- session the key's row is kept under (``idempotency.session_of``): ``session`` for a
-- lease of one session, so on a cluster the whole statement runs on its shard.
--
-- A key a committed request holds already leases nothing: every row answers that
-- request's fingerprint and answer (``known_request``, ``known_answer``), for the caller
-- to hand back the leases it took that are still valid. Else the leads leased are stored
-- as the key's answer in the same statement (``app.domain.idempotency``'s format). A first
-- try still running with the same key makes this one fail (unique_violation, nothing
-- leased): the caller then waits for that try through the transaction of
-- ``idempotency.once``. A limited session answers ``limited`` as ``lease_next`` does.
--
-- ``remember`` off (a cluster): the answer is not stored here but by ``remember_key``
-- right after, in the same transaction. Citus plans an ``INSERT … SELECT`` in a CTE apart
-- from the rest of the statement, which would then not be a router statement; two
-- statements of one session's shard are (docs/scaling.md).
--
-- parameters: session, max, owner, tokens, ttl_s, key, key_session, request, now, ledger_by_row, api_token

-- name: lease_keyed (ledger=True, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.*
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- name: lease_keyed (ledger=True, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.*
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- name: lease_keyed (ledger=False, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.*
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- name: lease_keyed (ledger=False, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.*
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- ========================================================================================
-- complete_and_lease
--
-- A completion and, when it completed, the lease of its ``next`` (one session without
-- limits), in one statement: the completion's CTE gates the lease's claim, and the ledger
-- rows of both are written with them.
--
-- The completion is ``complete_many``'s for one lead (a valid lease, by the database
-- clock); the lease is ``lease_next``'s, or ``lease_keyed``'s with ``keyed`` (``key``,
-- ``key_session`` and ``request`` then name the idempotency key, where it is kept and
-- its fingerprint). The lead completed
-- is the row whose ``completion`` is true, each lead leased one whose ``completion`` is
-- false; no completion row: the lease was refused (or was completed before) and nothing
-- changed, nothing was leased. Every row says ``limited`` (the session has a cap or a
-- rate: the completion is done, the lease is left to the limited path), and with ``keyed``
-- the key's first request (``known_request``, ``known_answer``) as ``lease_keyed`` does;
-- a key held for another request (its fingerprint not ``request``) completes nothing
-- either, so the caller's 422 changes nothing.
-- ``routed``: the lease completed is of ``session`` too (its token's), so on a cluster the
-- whole statement runs on that session's shard. ``remember`` off (a cluster, with
-- ``keyed``): the key's answer is written by ``remember_key`` right after, in the same
-- transaction, as ``lease_keyed``'s is (Citus plans the ``INSERT … SELECT`` of a CTE apart).
--
-- parameters: lead_id, token, status, result, error, session, max, owner, tokens, ttl_s, now, ledger_by_row, notify_ended, key, key_session, request, api_token

-- name: complete_and_lease (ledger=True, keyed=True, routed=True, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=True, routed=True, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=True, routed=False, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=True, routed=False, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=False, routed=True, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=False, routed=True, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=False, routed=False, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=True, keyed=False, routed=False, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=True, routed=True, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=True, routed=True, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=True, routed=False, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', %(key)s, %(request)s, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', %(ttl_s)s::float8,
        'leases', jsonb_agg(jsonb_build_array(id, lease_token) ORDER BY priority DESC, id))
    FROM leased
    HAVING count(*) > 0
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=True, routed=False, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = %(key)s
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND NOT EXISTS (SELECT FROM known WHERE request <> %(request)s::text)
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM known) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT request FROM known) AS known_request,
             (SELECT answer FROM known) AS known_answer) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=False, routed=True, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=False, routed=True, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=False, routed=False, remember=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: complete_and_lease (ledger=False, keyed=False, routed=False, remember=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token,
           %(status)s::text AS status, %(result)s::text AS result, %(error)s::text AS error
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM completed) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- ========================================================================================
-- lease_together
--
-- The leases of several callers of one session without limits, in one statement (group
-- commit), each caller with its own completions first, or none: the completions of
-- ``complete_and_lease`` and the keyed leases of ``lease_keyed``, together.
--
-- Item ``j`` completes ``lead_ids[j]`` with its lease token, status, result and error, for
-- caller ``item_callers[j]`` (callers count from 1). Caller ``i`` is ``gated[i]`` by its
-- completion (a completion with ``next``: it leases only when that completion went
-- through) or not (a keyed lease: it leases whatever its items' answers, having none),
-- and its key is ``keys[i]`` (NULL: unkeyed; every key of the group is kept under
-- ``key_session``, ``idempotency.session_of``). Its slots are those of ``callers`` equal to
-- ``i``: each with its new lease token (``tokens``), owner, ttl, key and fingerprint of
-- its request. A completion's row locked by another transaction is skipped (another's
-- lock holds up not the group). A caller whose key names a request committed before
-- leases nothing (``known``: each such key's request and answer, for the caller to hand
-- back what it took), and completes nothing when that request was another (``refused``:
-- its 422 changes nothing); the slots of the others take the best leads in the callers' order,
-- as ``lease_group``'s do, and each keyed caller's leases are stored as its key's answer.
-- A completion row is a lead completed (``completion`` true, its lease token the item's),
-- a lease row a lead leased (``completion`` false): by lead id and token each caller
-- finds its own. A limited session leases nothing here (``limited``: the completions are
-- done). One PostgreSQL only: on a cluster each caller goes alone, routed.
--
-- parameters: session, lead_ids, lease_tokens, statuses, results, errors, item_callers, gated, keys, key_session, max, tokens, owners, ttls, callers, slot_keys, slot_requests, now, ledger_by_row, notify_ended, api_token

-- name: lease_together (ledger=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT key, request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = ANY(%(keys)s::text[])
),
refused AS (
    -- The callers whose key a committed request holds for another request: their
    -- completions are not made either, so the 422 that answers them changes nothing.
    SELECT DISTINCT s.caller
    FROM unnest(%(callers)s::bigint[], %(slot_keys)s::text[], %(slot_requests)s::text[])
        AS s(caller, key, request)
    JOIN known ON known.key = s.key AND known.request <> s.request
),
req AS (
    SELECT * FROM unnest(%(lead_ids)s::bigint[], %(lease_tokens)s::text[], %(statuses)s::text[],
                         %(results)s::text[], %(errors)s::text[], %(item_callers)s::bigint[])
        AS r(lead_id, token, status, result, error, caller)
    WHERE r.caller NOT IN (SELECT caller FROM refused)
),
ungated AS (
    -- The callers whose lease no completion gates: a keyed lease alone.
    SELECT caller FROM unnest(%(gated)s::bool[]) WITH ORDINALITY AS c(gated, caller)
    WHERE NOT gated
),
locked AS MATERIALIZED (
    -- The rows of the items' valid leases, locked, skipping those another transaction
    -- holds (locked_rows' rule); each found by its id, so the cost follows the items, not
    -- the leases held (nor the dead index entries of the ones ended since the last vacuum).
    SELECT valid.id FROM req CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
        FOR UPDATE OF l SKIP LOCKED
    ) AS valid
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.caller
),
completion_ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
),
slots AS (
    -- Each caller's slots, in the order the callers came: those of a caller whose
    -- completion went through (or who is not gated by one) and whose key is new.
    SELECT row_number() OVER (ORDER BY s.slot) AS n, s.token, s.owner, s.ttl_s, s.key, s.request
    FROM unnest(%(tokens)s::text[], %(owners)s::text[], %(ttls)s::float8[],
                %(callers)s::bigint[], %(slot_keys)s::text[], %(slot_requests)s::text[])
        WITH ORDINALITY AS s(token, owner, ttl_s, caller, key, request, slot)
    WHERE (s.caller IN (SELECT caller FROM completed) OR s.caller IN (SELECT caller FROM ungated))
      AND (s.key IS NULL OR s.key NOT IN (SELECT key FROM known))
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM slots) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM slots) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    SELECT picks.id, slots.token, slots.owner, slots.ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS picks
    JOIN slots ON slots.n = picks.n
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    -- Each keyed caller's leases as its key's answer (no ON CONFLICT: a first try that
    -- commits a key meanwhile makes the whole statement fail, leasing nothing).
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', slots.key, slots.request, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', slots.ttl_s,
        'leases', jsonb_agg(jsonb_build_array(leased.id, leased.lease_token)
                            ORDER BY leased.priority DESC, leased.id))
    FROM leased JOIN slots ON slots.token = leased.lease_token
    WHERE slots.key IS NOT NULL
    GROUP BY slots.key, slots.request, slots.ttl_s
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT jsonb_object_agg(key, jsonb_build_array(request, answer)) FROM known)
                 AS known) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- name: lease_together (ledger=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
known AS (
    SELECT key, request, answer FROM idempotency_keys
    WHERE session = %(key_session)s AND verb = 'lease' AND key = ANY(%(keys)s::text[])
),
refused AS (
    -- The callers whose key a committed request holds for another request: their
    -- completions are not made either, so the 422 that answers them changes nothing.
    SELECT DISTINCT s.caller
    FROM unnest(%(callers)s::bigint[], %(slot_keys)s::text[], %(slot_requests)s::text[])
        AS s(caller, key, request)
    JOIN known ON known.key = s.key AND known.request <> s.request
),
req AS (
    SELECT * FROM unnest(%(lead_ids)s::bigint[], %(lease_tokens)s::text[], %(statuses)s::text[],
                         %(results)s::text[], %(errors)s::text[], %(item_callers)s::bigint[])
        AS r(lead_id, token, status, result, error, caller)
    WHERE r.caller NOT IN (SELECT caller FROM refused)
),
ungated AS (
    -- The callers whose lease no completion gates: a keyed lease alone.
    SELECT caller FROM unnest(%(gated)s::bool[]) WITH ORDINALITY AS c(gated, caller)
    WHERE NOT gated
),
locked AS MATERIALIZED (
    -- The rows of the items' valid leases, locked, skipping those another transaction
    -- holds (locked_rows' rule); each found by its id, so the cost follows the items, not
    -- the leases held (nor the dead index entries of the ones ended since the last vacuum).
    SELECT valid.id FROM req CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
        FOR UPDATE OF l SKIP LOCKED
    ) AS valid
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.caller
),
slots AS (
    -- Each caller's slots, in the order the callers came: those of a caller whose
    -- completion went through (or who is not gated by one) and whose key is new.
    SELECT row_number() OVER (ORDER BY s.slot) AS n, s.token, s.owner, s.ttl_s, s.key, s.request
    FROM unnest(%(tokens)s::text[], %(owners)s::text[], %(ttls)s::float8[],
                %(callers)s::bigint[], %(slot_keys)s::text[], %(slot_requests)s::text[])
        WITH ORDINALITY AS s(token, owner, ttl_s, caller, key, request, slot)
    WHERE (s.caller IN (SELECT caller FROM completed) OR s.caller IN (SELECT caller FROM ungated))
      AND (s.key IS NULL OR s.key NOT IN (SELECT key FROM known))
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM slots) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND EXISTS (SELECT FROM slots) AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    SELECT picks.id, slots.token, slots.owner, slots.ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS picks
    JOIN slots ON slots.n = picks.n
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
remembered AS (
    -- Each keyed caller's leases as its key's answer (no ON CONFLICT: a first try that
    -- commits a key meanwhile makes the whole statement fail, leasing nothing).
    INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
    SELECT %(key_session)s, 'lease', slots.key, slots.request, %(now)s::timestamptz, jsonb_build_object(
        'ttl_s', slots.ttl_s,
        'leases', jsonb_agg(jsonb_build_array(leased.id, leased.lease_token)
                            ORDER BY leased.priority DESC, leased.id))
    FROM leased JOIN slots ON slots.token = leased.lease_token
    WHERE slots.key IS NOT NULL
    GROUP BY slots.key, slots.request, slots.ttl_s
)
SELECT answered.*, gate.*, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM (SELECT EXISTS (SELECT FROM limited) AS limited,
             (SELECT jsonb_object_agg(key, jsonb_build_array(request, answer)) FROM known)
                 AS known) AS gate
LEFT JOIN (
    SELECT true AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM completed
    UNION ALL
    SELECT false AS completion, id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at FROM leased
) AS answered ON true
ORDER BY answered.completion DESC, answered.priority DESC, answered.id;

-- ========================================================================================
-- lease_group
--
-- ``lease_next`` for several callers of one session at once (group commit).
--
-- The same claim, gate and promotion, for ``max`` leads: the sum of the callers' own. The
-- leads are numbered in priority order, and lead ``n`` gets slot ``n``'s token, owner
-- (``owners``) and ttl (``ttls``): the caller of slots 1 to m1 gets the best leads, the next
-- the ones after, so the callers are served in their order as if one came after the other.
-- Each ledger row names its lead's owner. A limited session answers one row, ``limited``,
-- as ``lease_next`` does.
--
-- parameters: session, max, owners, tokens, ttls, now, ledger_by_row, api_token

-- name: lease_group (ledger=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, (%(owners)s::text[])[n] AS owner, (%(ttls)s::float8[])[n] AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, %(now)s::timestamptz, lease_expires_at FROM leased
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.limited
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- name: lease_group (ledger=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > %(now)s::timestamptz
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited). A CTE
    -- has a column: Citus reads a CTE without one back wrongly (docs/scaling.md).
    SELECT session FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz AND NOT EXISTS (SELECT FROM limited) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT id, priority FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ORDER BY priority DESC, id
    LIMIT %(max)s
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, (%(owners)s::text[])[n] AS owner, (%(ttls)s::float8[])[n] AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.limited
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- ========================================================================================
-- promote
--
-- Make up to ``limit`` scheduled leads that came due ready (any session, or one session's
-- when scoped); the sweeper's.
--
-- Oldest due first, through ``leads_scheduled_at``; SKIP LOCKED leaves a row
-- a lease holds to that lease. Notifies each session of its promoted leads.
--
-- parameters: session, limit, now

-- name: promote (scoped=True)
WITH due AS (
    SELECT id FROM leads
    WHERE scheduled AND available_at <= %(now)s::timestamptz AND session = %(session)s
    ORDER BY available_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.scheduled AND l.session = %(session)s
    RETURNING l.session
)
SELECT count(*) AS promoted,
       (SELECT count(pg_notify('leaseq_queued', p.session || ' ' || p.n))
        FROM (SELECT session, count(*) AS n FROM promoted GROUP BY session) AS p) AS notified
FROM promoted;

-- name: promote (scoped=False)
WITH due AS (
    SELECT id FROM leads
    WHERE scheduled AND available_at <= %(now)s::timestamptz 
    ORDER BY available_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.scheduled 
    RETURNING l.session
)
SELECT count(*) AS promoted,
       (SELECT count(pg_notify('leaseq_queued', p.session || ' ' || p.n))
        FROM (SELECT session, count(*) AS n FROM promoted GROUP BY session) AS p) AS notified
FROM promoted;

-- ========================================================================================
-- valid_leases
--
-- Those of the given leases (lead id and token) that are still valid, in leasing order.
-- ``routed``: they are of ``session`` (their tokens'), so on a cluster the read is that
-- session's shard's alone.
--
-- parameters: ids, tokens, now, session

-- name: valid_leases (routed=True)
SELECT l.id, l.session, l.priority, l.payload, l.key, l.status, l.owner, l.attempts, l.max_attempts, l.available_at, l.lease_expires_at, l.result, l.error, l.created_at, l.updated_at, l.depth, l.parent_id, l.checkpoint, l.concurrency_key, l.max_runtime_s, l.traceparent, l.after, l.lease_token, l.runtime_ends_at
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
ORDER BY l.priority DESC, l.id;

-- name: valid_leases (routed=False)
SELECT l.id, l.session, l.priority, l.payload, l.key, l.status, l.owner, l.attempts, l.max_attempts, l.available_at, l.lease_expires_at, l.result, l.error, l.created_at, l.updated_at, l.depth, l.parent_id, l.checkpoint, l.concurrency_key, l.max_runtime_s, l.traceparent, l.after, l.lease_token, l.runtime_ends_at
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz 
ORDER BY l.priority DESC, l.id;

-- ========================================================================================
-- lock_settings
--
-- Lock a limited session's settings row, in the transaction of its lease: the session's
-- limited leases take turns, each counting what is held after the one before committed.
-- Its cap per key (``tend_keys`` runs when there is one); no row back: the session has no
-- limits (any more).
--
-- parameters: session

-- name: lock_settings
SELECT max_leased_per_key FROM session_settings WHERE session = %(session)s AND (max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL) FOR UPDATE;

-- ========================================================================================
-- lease_limited
--
-- ``lease_next`` for a session with a cap or a rate, run after ``lock_settings``.
--
-- A statement after the lock sees every lease of the session committed before it: the
-- leads it holds now (``lead_counts``, an expired lease not yet swept included) and its
-- bucket. It leases at most ``max``, the room under ``max_leased`` and the whole tokens
-- in the bucket (refilled at ``rate_per_s`` since it was drawn, up to ``burst``), and
-- takes one token per lead leased. Each lead leased is a row; none, one row of NULLs;
-- every row says ``room`` (leads it could hold more before; NULL without a cap),
-- ``tokens`` (the bucket before; NULL without a rate) and ``rate_per_s``, so the caller
-- knows what held the session back and when to try it again.
--
-- parameters: session, max, owner, tokens, ttl_s, now, ledger_by_row, api_token

-- name: lease_limited (ledger=True)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
stored AS (
    SELECT CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, tokens, refilled_at FROM session_settings WHERE session = %(session)s
),
settings AS (
    SELECT max_leased, rate_per_s, max_leased_per_key,
           coalesce(burst, greatest(1, ceil(rate_per_s)))::float8 AS burst, tokens,
           greatest(0, (CASE WHEN extract(epoch FROM (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)) - extract(epoch FROM refilled_at) IS NOT NULL THEN least(greatest(extract(epoch FROM (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)) - extract(epoch FROM refilled_at), -1000000000000.0), 1000000000000.0) END)::float8) AS elapsed_s
    FROM stored
),
bucket AS (
    -- Full until first drawn. Else its level held to [0, burst] (NaN: full), refilled for
    -- the time since it was drawn, but never for more than twice the time it takes to fill
    -- (a longer quiet time fills it all the same): with the settings in their ranges every
    -- term lies within [0, 2 * burst], and a refill above 0 is at least rate * 1 µs (1e-12),
    -- so double precision carries each one, with no overflow and no underflow.
    SELECT CASE WHEN tokens IS NULL THEN burst
                ELSE least(burst, least(greatest(tokens, 0), burst)
                                  + rate_per_s * least(elapsed_s, 2 * burst / rate_per_s))
           END AS tokens
    FROM settings WHERE rate_per_s IS NOT NULL
),
room AS (
    SELECT (SELECT max_leased FROM settings)::bigint - (
        SELECT coalesce(sum(n), 0) FROM lead_counts
        WHERE session = %(session)s AND status = 'leased')::bigint AS n
),
allowance AS (
    SELECT greatest(0, least(%(max)s, (SELECT n FROM room), (SELECT floor(tokens) FROM bucket)))
        ::int AS n
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AND (concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
           OR (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = leads.concurrency_key
            LIMIT (SELECT max_leased_per_key FROM settings)) AS held) < (SELECT max_leased_per_key FROM settings)) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT (SELECT n FROM allowance)
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AND (concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
           OR (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = leads.concurrency_key
            LIMIT (SELECT max_leased_per_key FROM settings)) AS held) < (SELECT max_leased_per_key FROM settings)) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT ranked.id, ranked.priority FROM (
        SELECT candidates.*, row_number() OVER (
            PARTITION BY candidates.concurrency_key ORDER BY priority DESC, id) AS nth
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ) AS ranked
    LEFT JOIN (
        SELECT k.concurrency_key, (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = k.concurrency_key
            LIMIT (SELECT max_leased_per_key FROM settings)) AS held) AS n
        FROM (SELECT DISTINCT concurrency_key FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
              WHERE concurrency_key IS NOT NULL) AS k
    ) AS k ON k.concurrency_key = ranked.concurrency_key
    WHERE ranked.concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
       OR ranked.nth + coalesce(k.n, 0) <= (SELECT max_leased_per_key FROM settings)
    ORDER BY ranked.priority DESC, ranked.id
    LIMIT (SELECT n FROM allowance)
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = (((%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least((((%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', (((%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int), ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
spent AS (
    UPDATE session_settings AS s
    SET tokens = bucket.tokens - (SELECT count(*) FROM leased), refilled_at = (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)
    FROM bucket WHERE s.session = %(session)s
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'leased', status, attempts, owner, (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int), lease_expires_at FROM leased
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.*
FROM (SELECT (SELECT n FROM room) AS room, (SELECT tokens FROM bucket) AS tokens,
             (SELECT rate_per_s FROM settings) AS rate_per_s) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id;

-- name: lease_limited (ledger=False)
WITH paused AS (
    SELECT session FROM session_settings WHERE session = %(session)s AND paused_until > (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)
),
revoked AS (
    -- A column of its own: Citus cannot carry a CTE without one between its steps.
    SELECT true AS revoked WHERE %(api_token)s::text IS NOT NULL AND NOT EXISTS (
        SELECT FROM api_tokens WHERE hash = %(api_token)s::text AND revoked_at IS NULL
          AND (expires_at IS NULL OR expires_at > now()))
),
stored AS (
    SELECT CASE WHEN weight IS NOT NULL THEN least(greatest(weight, 1e-06), 1000000.0) END AS weight, max_leased, CASE WHEN rate_per_s IS NOT NULL THEN least(greatest(rate_per_s, 1e-06), 1000000.0) END AS rate_per_s, CASE WHEN burst IS NOT NULL THEN least(greatest(burst, 1), 1000000) END AS burst, max_leased_per_key, max_runtime_s, max_queued, tokens, refilled_at FROM session_settings WHERE session = %(session)s
),
settings AS (
    SELECT max_leased, rate_per_s, max_leased_per_key,
           coalesce(burst, greatest(1, ceil(rate_per_s)))::float8 AS burst, tokens,
           greatest(0, (CASE WHEN extract(epoch FROM (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)) - extract(epoch FROM refilled_at) IS NOT NULL THEN least(greatest(extract(epoch FROM (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)) - extract(epoch FROM refilled_at), -1000000000000.0), 1000000000000.0) END)::float8) AS elapsed_s
    FROM stored
),
bucket AS (
    -- Full until first drawn. Else its level held to [0, burst] (NaN: full), refilled for
    -- the time since it was drawn, but never for more than twice the time it takes to fill
    -- (a longer quiet time fills it all the same): with the settings in their ranges every
    -- term lies within [0, 2 * burst], and a refill above 0 is at least rate * 1 µs (1e-12),
    -- so double precision carries each one, with no overflow and no underflow.
    SELECT CASE WHEN tokens IS NULL THEN burst
                ELSE least(burst, least(greatest(tokens, 0), burst)
                                  + rate_per_s * least(elapsed_s, 2 * burst / rate_per_s))
           END AS tokens
    FROM settings WHERE rate_per_s IS NOT NULL
),
room AS (
    SELECT (SELECT max_leased FROM settings)::bigint - (
        SELECT coalesce(sum(n), 0) FROM lead_counts
        WHERE session = %(session)s AND status = 'leased')::bigint AS n
),
allowance AS (
    SELECT greatest(0, least(%(max)s, (SELECT n FROM room), (SELECT floor(tokens) FROM bucket)))
        ::int AS n
),
ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AND (concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
           OR (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = leads.concurrency_key
            LIMIT (SELECT max_leased_per_key FROM settings)) AS held) < (SELECT max_leased_per_key FROM settings)) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY priority DESC, id
    LIMIT (SELECT n FROM allowance)
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AND (concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
           OR (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = leads.concurrency_key
            LIMIT (SELECT max_leased_per_key FROM settings)) AS held) < (SELECT max_leased_per_key FROM settings)) AND NOT EXISTS (SELECT FROM paused) AND NOT EXISTS (SELECT FROM revoked)
    ORDER BY available_at
    LIMIT 100
    FOR UPDATE SKIP LOCKED
),
picked AS (
    SELECT ranked.id, ranked.priority FROM (
        SELECT candidates.*, row_number() OVER (
            PARTITION BY candidates.concurrency_key ORDER BY priority DESC, id) AS nth
        FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
    ) AS ranked
    LEFT JOIN (
        SELECT k.concurrency_key, (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = k.concurrency_key
            LIMIT (SELECT max_leased_per_key FROM settings)) AS held) AS n
        FROM (SELECT DISTINCT concurrency_key FROM (SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates
              WHERE concurrency_key IS NOT NULL) AS k
    ) AS k ON k.concurrency_key = ranked.concurrency_key
    WHERE ranked.concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
       OR ranked.nth + coalesce(k.n, 0) <= (SELECT max_leased_per_key FROM settings)
    ORDER BY ranked.priority DESC, ranked.id
    LIMIT (SELECT n FROM allowance)
),
numbered AS (
    -- Slot n's token and holder are read here, not in the UPDATE: an array subscript in
    -- an UPDATE's SET crashes Citus 13.2's planner (docs/scaling.md).
    SELECT id, (%(tokens)s::text[])[n] AS token, %(owner)s AS owner, %(ttl_s)s::float8 AS ttl_s
    FROM (SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked) AS slots
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = numbered.owner, lease_token = numbered.token,
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = (((%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC',
        lease_expires_at = least((((%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AT TIME ZONE 'UTC') + make_interval(secs => numbered.ttl_s)) AT TIME ZONE 'UTC', (((%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int) AT TIME ZONE 'UTC') + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))) AT TIME ZONE 'UTC'),
        updated_at = (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int), ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'leased' END
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
),
spent AS (
    UPDATE session_settings AS s
    SET tokens = bucket.tokens - (SELECT count(*) FROM leased), refilled_at = (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int)
    FROM bucket WHERE s.session = %(session)s
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, lease_token, runtime_ends_at, gate.*
FROM (SELECT (SELECT n FROM room) AS room, (SELECT tokens FROM bucket) AS tokens,
             (SELECT rate_per_s FROM settings) AS rate_per_s) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id;
