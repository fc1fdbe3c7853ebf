-- The statements of app.store.statements.leads, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- push
--
-- Insert a batch; keys already in the session are skipped (ON CONFLICT DO NOTHING).
--
-- Ids are drawn in input order, so they ascend in that order; the caller maps
-- returned ids back to input positions by that. Rows are inserted in key
-- order: an insert waits for a concurrent one of the same key, so two pushes
-- taking shared keys in different orders would wait on each other (deadlock).
--
-- parameters: session, concurrency_keys, delays, depths, has_dependents, keys, max_attempts, max_runtimes, parent_ids, payloads, priorities, traceparents, now, ledger_by_row

-- name: push (ledger=True)
WITH input AS (
    SELECT * FROM unnest(
        %(priorities)s::int[], %(payloads)s::text[], %(keys)s::text[],
        %(depths)s::int[], %(parent_ids)s::bigint[], %(max_attempts)s::int[],
        %(delays)s::float8[], %(concurrency_keys)s::text[], %(max_runtimes)s::int[],
        %(traceparents)s::text[], %(has_dependents)s::bool[]
    ) WITH ORDINALITY
        AS t(priority, payload, key, depth, parent_id, max_attempts, delay_s, concurrency_key,
             max_runtime_s, traceparent, has_dependents, ord)
),
numbered AS (
    -- A volatile output column is computed after the sort, so ids follow ord.
    SELECT nextval('leads_id_seq') AS id, * FROM input ORDER BY ord
),
inserted AS (
    INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                       available_at, scheduled, created_at, updated_at, concurrency_key,
                       max_runtime_s, traceparent, has_dependents, ledger_event)
    OVERRIDING SYSTEM VALUE
    SELECT id, %(session)s, priority, CAST(payload AS jsonb), key, depth, parent_id, max_attempts,
           ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => delay_s)) AT TIME ZONE 'UTC', delay_s > 0, %(now)s::timestamptz, %(now)s::timestamptz, concurrency_key,
           max_runtime_s, traceparent, has_dependents,
           CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END
    FROM numbered ORDER BY key
    ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id, key, session, status, attempts, owner, scheduled
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'pushed', status, attempts, owner, %(now)s::timestamptz, NULL FROM inserted
)
-- The uncorrelated subquery runs once, and only when something was inserted; it
-- counts the leads available now (a delayed one wakes nobody).
SELECT id, key,
       (SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL
        FROM inserted WHERE NOT scheduled) AS notified
FROM inserted ORDER BY id;

-- name: push (ledger=False)
WITH input AS (
    SELECT * FROM unnest(
        %(priorities)s::int[], %(payloads)s::text[], %(keys)s::text[],
        %(depths)s::int[], %(parent_ids)s::bigint[], %(max_attempts)s::int[],
        %(delays)s::float8[], %(concurrency_keys)s::text[], %(max_runtimes)s::int[],
        %(traceparents)s::text[], %(has_dependents)s::bool[]
    ) WITH ORDINALITY
        AS t(priority, payload, key, depth, parent_id, max_attempts, delay_s, concurrency_key,
             max_runtime_s, traceparent, has_dependents, ord)
),
numbered AS (
    -- A volatile output column is computed after the sort, so ids follow ord.
    SELECT nextval('leads_id_seq') AS id, * FROM input ORDER BY ord
),
inserted AS (
    INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                       available_at, scheduled, created_at, updated_at, concurrency_key,
                       max_runtime_s, traceparent, has_dependents, ledger_event)
    OVERRIDING SYSTEM VALUE
    SELECT id, %(session)s, priority, CAST(payload AS jsonb), key, depth, parent_id, max_attempts,
           ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => delay_s)) AT TIME ZONE 'UTC', delay_s > 0, %(now)s::timestamptz, %(now)s::timestamptz, concurrency_key,
           max_runtime_s, traceparent, has_dependents,
           CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END
    FROM numbered ORDER BY key
    ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id, key, session, status, attempts, owner, scheduled
)
-- The uncorrelated subquery runs once, and only when something was inserted; it
-- counts the leads available now (a delayed one wakes nobody).
SELECT id, key,
       (SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL
        FROM inserted WHERE NOT scheduled) AS notified
FROM inserted ORDER BY id;

-- ========================================================================================
-- push_rows
--
-- ``push`` on a Citus cluster: ``rows`` leads of one session, with the ids drawn before
-- (``lead_ids``), in one multi-row ``INSERT … VALUES``, which Citus routes to the session's
-- shard (an ``INSERT … SELECT``, as ``push``'s, it runs through the coordinator instead).
-- The ledger's ``pushed`` rows are written on the shard by the row trigger of revision
-- 0016 (``ledger_by_row``), and the caller notifies (``pushed_notice``). The caller sorts
-- the rows by key (as ``push`` inserts them) and gives each its id in input order.
--
-- parameters: session, ids, concurrency_keys, delays, depths, has_dependents, keys, max_attempts, max_runtimes, parent_ids, payloads, priorities, traceparents, now, ledger_by_row

-- name: push_rows (rows=1)
INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                   available_at, scheduled, created_at, updated_at, concurrency_key,
                   max_runtime_s, traceparent, has_dependents, ledger_event)
OVERRIDING SYSTEM VALUE
VALUES
    ((%(ids)s::bigint[])[1], %(session)s, (%(priorities)s::int[])[1],
     CAST((%(payloads)s::text[])[1] AS jsonb), (%(keys)s::text[])[1],
     (%(depths)s::int[])[1], (%(parent_ids)s::bigint[])[1], (%(max_attempts)s::int[])[1],
     ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => (%(delays)s::float8[])[1])) AT TIME ZONE 'UTC', (%(delays)s::float8[])[1] > 0, %(now)s::timestamptz, %(now)s::timestamptz,
     (%(concurrency_keys)s::text[])[1], (%(max_runtimes)s::int[])[1],
     (%(traceparents)s::text[])[1], (%(has_dependents)s::bool[])[1],
     CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END)
ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id, key, NOT scheduled AS available;

-- name: push_rows (rows=2)
INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                   available_at, scheduled, created_at, updated_at, concurrency_key,
                   max_runtime_s, traceparent, has_dependents, ledger_event)
OVERRIDING SYSTEM VALUE
VALUES
    ((%(ids)s::bigint[])[1], %(session)s, (%(priorities)s::int[])[1],
     CAST((%(payloads)s::text[])[1] AS jsonb), (%(keys)s::text[])[1],
     (%(depths)s::int[])[1], (%(parent_ids)s::bigint[])[1], (%(max_attempts)s::int[])[1],
     ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => (%(delays)s::float8[])[1])) AT TIME ZONE 'UTC', (%(delays)s::float8[])[1] > 0, %(now)s::timestamptz, %(now)s::timestamptz,
     (%(concurrency_keys)s::text[])[1], (%(max_runtimes)s::int[])[1],
     (%(traceparents)s::text[])[1], (%(has_dependents)s::bool[])[1],
     CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END),
    ((%(ids)s::bigint[])[2], %(session)s, (%(priorities)s::int[])[2],
     CAST((%(payloads)s::text[])[2] AS jsonb), (%(keys)s::text[])[2],
     (%(depths)s::int[])[2], (%(parent_ids)s::bigint[])[2], (%(max_attempts)s::int[])[2],
     ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => (%(delays)s::float8[])[2])) AT TIME ZONE 'UTC', (%(delays)s::float8[])[2] > 0, %(now)s::timestamptz, %(now)s::timestamptz,
     (%(concurrency_keys)s::text[])[2], (%(max_runtimes)s::int[])[2],
     (%(traceparents)s::text[])[2], (%(has_dependents)s::bool[])[2],
     CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END)
ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id, key, NOT scheduled AS available;

-- ========================================================================================
-- lead_ids
--
-- ``n`` new lead ids, ascending: the ids of a push on a cluster (``push_rows``), drawn on
-- the node the service is connected to (its own range of the sequence; no shard is read).
--
-- parameters: n

-- name: lead_ids
SELECT nextval('leads_id_seq') AS id FROM generate_series(1, %(n)s) ORDER BY 1;

-- ========================================================================================
-- pushed_notice
--
-- The notification of ``n`` leads of ``session`` pushed and available now, sent by the
-- node the service is connected to (where ``push``'s own is sent): after ``push_rows``.
--
-- parameters: session, n

-- name: pushed_notice
SELECT pg_notify('leaseq_queued', %(session)s || ' ' || %(n)s::text) IS NULL AS notified;

-- ========================================================================================
-- existing_keys
--
-- Ids of keys already present in a session (the duplicates of a push).
--
-- parameters: session, keys

-- name: existing_keys
SELECT key, id FROM leads WHERE session = %(session)s AND key = ANY(%(keys)s::text[]);

-- ========================================================================================
-- renew_many
--
-- Extend each valid lease of the batch; the rows returned are the ones that were valid.
--
-- An item's checkpoint (JSON text; NULL: none) replaces the lead's, which otherwise stays.
-- ``skip_locked`` (group commit): a lease whose row another transaction holds is left as it
-- is and named in ``busy`` (``busy_answer``) instead of waited for. ``routed``: every lease
-- is of ``session`` (its token's), which routes the statement to one shard on a cluster.
--
-- parameters: checkpoints, ids, tokens, ttls, session, now

-- name: renew_many (skip_locked=True, routed=True)
WITH req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(ttls)s::float8[], %(checkpoints)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, ttl_s, checkpoint, ord)
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    FOR UPDATE OF l SKIP LOCKED
),
renewed AS (
    UPDATE leads AS l
    SET lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC', l.runtime_ends_at),
        updated_at = %(now)s::timestamptz, checkpoint = coalesce(CAST(req.checkpoint AS jsonb), l.checkpoint)
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND l.id IN (SELECT id FROM locked)
    RETURNING l.id, req.token, l.lease_expires_at, CASE WHEN l.runtime_ends_at < ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC'
         THEN extract(epoch FROM l.runtime_ends_at - %(now)s::timestamptz)::float8 ELSE req.ttl_s END AS ttl_s, l.attempts AS attempt
)
SELECT renewed.*, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM req AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN renewed ON true;

-- name: renew_many (skip_locked=True, routed=False)
WITH req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(ttls)s::float8[], %(checkpoints)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, ttl_s, checkpoint, ord)
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    FOR UPDATE OF l SKIP LOCKED
),
renewed AS (
    UPDATE leads AS l
    SET lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC', l.runtime_ends_at),
        updated_at = %(now)s::timestamptz, checkpoint = coalesce(CAST(req.checkpoint AS jsonb), l.checkpoint)
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.id, req.token, l.lease_expires_at, CASE WHEN l.runtime_ends_at < ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC'
         THEN extract(epoch FROM l.runtime_ends_at - %(now)s::timestamptz)::float8 ELSE req.ttl_s END AS ttl_s, l.attempts AS attempt
)
SELECT renewed.*, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM req AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN renewed ON true;

-- name: renew_many (skip_locked=False, routed=True)
WITH req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(ttls)s::float8[], %(checkpoints)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, ttl_s, checkpoint, ord)
),
renewed AS (
    UPDATE leads AS l
    SET lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC', l.runtime_ends_at),
        updated_at = %(now)s::timestamptz, checkpoint = coalesce(CAST(req.checkpoint AS jsonb), l.checkpoint)
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.id, req.token, l.lease_expires_at, CASE WHEN l.runtime_ends_at < ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC'
         THEN extract(epoch FROM l.runtime_ends_at - %(now)s::timestamptz)::float8 ELSE req.ttl_s END AS ttl_s, l.attempts AS attempt
)
SELECT * FROM renewed;

-- name: renew_many (skip_locked=False, routed=False)
WITH req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(ttls)s::float8[], %(checkpoints)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, ttl_s, checkpoint, ord)
),
renewed AS (
    UPDATE leads AS l
    SET lease_expires_at = least(((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC', l.runtime_ends_at),
        updated_at = %(now)s::timestamptz, checkpoint = coalesce(CAST(req.checkpoint AS jsonb), l.checkpoint)
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.id, req.token, l.lease_expires_at, CASE WHEN l.runtime_ends_at < ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => req.ttl_s)) AT TIME ZONE 'UTC'
         THEN extract(epoch FROM l.runtime_ends_at - %(now)s::timestamptz)::float8 ELSE req.ttl_s END AS ttl_s, l.attempts AS attempt
)
SELECT * FROM renewed;

-- ========================================================================================
-- runtime_ran_out
--
-- Which of the given leases (lead id, token) ended at their maximum runtime, and are not
-- yet swept: why their renewal was refused. ``routed``: the leases are of ``session``
-- (their tokens'), as in ``renew_many``.
--
-- parameters: ids, tokens, now, session

-- name: runtime_ran_out (routed=True)
SELECT l.id FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token
  AND l.runtime_ends_at <= %(now)s::timestamptz AND l.session = %(session)s;

-- name: runtime_ran_out (routed=False)
SELECT l.id FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token
  AND l.runtime_ends_at <= %(now)s::timestamptz ;

-- ========================================================================================
-- complete_many
--
-- Finish each valid lease of the batch with its status; returns the leads that finished.
--
-- A lease given twice in one batch counts once, at its first item (``item``,
-- from 0): an UPDATE joined to two matching rows would apply either one.
-- ``lean`` returns only ``item``, for callers that need no lead back (a quarter
-- less time per batch of 100 than reading every column back). The lead keeps
-- the lease's token (never shown), so ``completed_already`` knows a retry.
-- ``skip_locked`` (group commit): a lease whose row another transaction holds is left
-- as it is and named, with every item of it, in ``busy`` (``busy_answer``). ``routed``:
-- every lease is of ``session``, as in ``renew_many``.
--
-- parameters: errors, ids, results, statuses, tokens, session, now, ledger_by_row, notify_ended

-- name: complete_many (ledger=True, lean=True, skip_locked=True, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=True, lean=True, skip_locked=True, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=True, lean=True, skip_locked=False, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=True, lean=True, skip_locked=False, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=True, lean=False, skip_locked=True, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=True, lean=False, skip_locked=True, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=True, lean=False, skip_locked=False, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=True, lean=False, skip_locked=False, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*, req.ord - 1 AS item
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'completed', status, attempts, owner, %(now)s::timestamptz, NULL FROM completed
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=False, lean=True, skip_locked=True, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=False, lean=True, skip_locked=True, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=False, lean=True, skip_locked=False, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*, req.ord - 1 AS item
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=False, lean=True, skip_locked=False, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*, req.ord - 1 AS item
)
SELECT item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=False, lean=False, skip_locked=True, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=False, lean=False, skip_locked=True, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    FOR UPDATE OF l SKIP LOCKED
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.id IN (SELECT id FROM locked)
    RETURNING l.*, req.ord - 1 AS item
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM input AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz)
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN completed ON true;

-- name: complete_many (ledger=False, lean=False, skip_locked=False, routed=True)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*, req.ord - 1 AS item
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- name: complete_many (ledger=False, lean=False, skip_locked=False, routed=False)
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'completed' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*, req.ord - 1 AS item
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, item, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM completed AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM completed;

-- ========================================================================================
-- completed_already
--
-- Which of the given items name a lead their very lease already finished with that status.
--
-- A completion retried after its answer was lost is answered as the first
-- was, and changes nothing. A statement of its own, run after
-- ``complete_many`` for the items it did not complete: its snapshot sees a
-- completion that committed while that one waited on the row. ``item`` is
-- the caller's position of each item; ``lean`` returns only it. ``routed``: the leases
-- are of ``session`` (their tokens'), as in ``complete_many``.
--
-- parameters: ids, items, statuses, tokens, session

-- name: completed_already (lean=True, routed=True)
SELECT req.item
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(items)s::int[])
    AS req(lead_id, token, status, item), leads AS l
WHERE l.id = req.lead_id AND l.lease_token = req.token
  AND l.status = req.status AND l.status IN ('done', 'failed', 'cached') AND l.session = %(session)s;

-- name: completed_already (lean=True, routed=False)
SELECT req.item
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(items)s::int[])
    AS req(lead_id, token, status, item), leads AS l
WHERE l.id = req.lead_id AND l.lease_token = req.token
  AND l.status = req.status AND l.status IN ('done', 'failed', 'cached') ;

-- name: completed_already (lean=False, routed=True)
SELECT l.id, l.session, l.priority, l.payload, l.key, l.status, l.owner, l.attempts, l.max_attempts, l.available_at, l.lease_expires_at, l.result, l.error, l.created_at, l.updated_at, l.depth, l.parent_id, l.checkpoint, l.concurrency_key, l.max_runtime_s, l.traceparent, l.after, req.item
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(items)s::int[])
    AS req(lead_id, token, status, item), leads AS l
WHERE l.id = req.lead_id AND l.lease_token = req.token
  AND l.status = req.status AND l.status IN ('done', 'failed', 'cached') AND l.session = %(session)s;

-- name: completed_already (lean=False, routed=False)
SELECT l.id, l.session, l.priority, l.payload, l.key, l.status, l.owner, l.attempts, l.max_attempts, l.available_at, l.lease_expires_at, l.result, l.error, l.created_at, l.updated_at, l.depth, l.parent_id, l.checkpoint, l.concurrency_key, l.max_runtime_s, l.traceparent, l.after, req.item
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(items)s::int[])
    AS req(lead_id, token, status, item), leads AS l
WHERE l.id = req.lead_id AND l.lease_token = req.token
  AND l.status = req.status AND l.status IN ('done', 'failed', 'cached') ;

-- ========================================================================================
-- release
--
-- Give a valid lease back: queued again after ``delay_s``, the attempt already counted.
--
-- On the last attempt (``attempts`` reached ``max_attempts``) the lead fails
-- instead (docs/contract.md#invariant-7), with an error that says why: the release's own
-- ``error`` when given, after "released on attempt n of m".
--
-- ``throttle_s`` (NULL: none): a worker's cooldown. The lead is queued whatever its
-- attempt, the lease is not counted against ``max_attempts`` (``throttles``), and its
-- session is paused until now + throttle_s, or later if it already was (``_THROTTLED``),
-- all in this statement, so only a valid lease pauses its session. ``unstarted``: the
-- holder never started the lead (prefetched, or taken by a long poll whose client left):
-- the lease is not counted against ``max_attempts`` either (``throttles``), so giving
-- back a lead that never ran cannot fail it. ``routed``: the lease is of ``session`` (its
-- token's), as in ``renew_many``; the session's pause is then ``throttle_session``, in the
-- same transaction, run when this one released the lease.
--
-- parameters: delay_s, error, lead_id, token, throttle_s, unstarted, session, now, ledger_by_row, notify_ended

-- name: release (ledger=True, routed=True)
WITH req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token, %(error)s::text AS error
),
released AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)
                     THEN 'released on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                          || coalesce(': ' || req.error, '')
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL,
        available_at = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN l.available_at
                            ELSE ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => %(delay_s)s::float8)) AT TIME ZONE 'UTC' END,
        scheduled = NOT (l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)) AND %(delay_s)s::float8 > 0,
        throttles = l.throttles + CASE WHEN (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 1 ELSE 0 END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'released' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'released', status, attempts, owner, %(now)s::timestamptz, NULL FROM released
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after,
       CASE WHEN status = 'queued' AND NOT scheduled AND %(throttle_s)s::float8 IS NULL
            THEN pg_notify('leaseq_queued', session || ' 1') IS NULL END AS notified,
       (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM released AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM released;

-- name: release (ledger=True, routed=False)
WITH req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token, %(error)s::text AS error
),
released AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)
                     THEN 'released on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                          || coalesce(': ' || req.error, '')
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL,
        available_at = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN l.available_at
                            ELSE ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => %(delay_s)s::float8)) AT TIME ZONE 'UTC' END,
        scheduled = NOT (l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)) AND %(delay_s)s::float8 > 0,
        throttles = l.throttles + CASE WHEN (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 1 ELSE 0 END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'released' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*
),
throttled AS (
    INSERT INTO session_settings AS s (session, paused_until, updated_at)
    SELECT released.session, ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => cooldown.s)) AT TIME ZONE 'UTC', %(now)s::timestamptz
    FROM released JOIN (SELECT %(throttle_s)s::float8 AS s) AS cooldown ON cooldown.s IS NOT NULL
    ON CONFLICT (session) DO UPDATE
        SET paused_until = greatest(s.paused_until, excluded.paused_until)
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'released', status, attempts, owner, %(now)s::timestamptz, NULL FROM released
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after,
       CASE WHEN status = 'queued' AND NOT scheduled AND %(throttle_s)s::float8 IS NULL
            THEN pg_notify('leaseq_queued', session || ' 1') IS NULL END AS notified,
       (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM released AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM released;

-- name: release (ledger=False, routed=True)
WITH req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token, %(error)s::text AS error
),
released AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)
                     THEN 'released on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                          || coalesce(': ' || req.error, '')
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL,
        available_at = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN l.available_at
                            ELSE ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => %(delay_s)s::float8)) AT TIME ZONE 'UTC' END,
        scheduled = NOT (l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)) AND %(delay_s)s::float8 > 0,
        throttles = l.throttles + CASE WHEN (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 1 ELSE 0 END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'released' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz AND l.session = %(session)s
    RETURNING l.*
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after,
       CASE WHEN status = 'queued' AND NOT scheduled AND %(throttle_s)s::float8 IS NULL
            THEN pg_notify('leaseq_queued', session || ' 1') IS NULL END AS notified,
       (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM released AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM released;

-- name: release (ledger=False, routed=False)
WITH req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token, %(error)s::text AS error
),
released AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)
                     THEN 'released on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                          || coalesce(': ' || req.error, '')
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL,
        available_at = CASE WHEN l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN l.available_at
                            ELSE ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => %(delay_s)s::float8)) AT TIME ZONE 'UTC' END,
        scheduled = NOT (l.attempts - l.throttles >= l.max_attempts AND NOT (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)) AND %(delay_s)s::float8 > 0,
        throttles = l.throttles + CASE WHEN (%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean) THEN 1 ELSE 0 END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'released' END
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > %(now)s::timestamptz
    RETURNING l.*
),
throttled AS (
    INSERT INTO session_settings AS s (session, paused_until, updated_at)
    SELECT released.session, ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => cooldown.s)) AT TIME ZONE 'UTC', %(now)s::timestamptz
    FROM released JOIN (SELECT %(throttle_s)s::float8 AS s) AS cooldown ON cooldown.s IS NOT NULL
    ON CONFLICT (session) DO UPDATE
        SET paused_until = greatest(s.paused_until, excluded.paused_until)
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after,
       CASE WHEN status = 'queued' AND NOT scheduled AND %(throttle_s)s::float8 IS NULL
            THEN pg_notify('leaseq_queued', session || ' 1') IS NULL END AS notified,
       (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM released AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM released;

-- ========================================================================================
-- throttle_session
--
-- Pause ``session`` until now + ``throttle_s``, or later if it already was: a throttled
-- release's pause on a cluster, after the routed ``release`` in its transaction (one
-- insert of one session, routed to its shard).
--
-- parameters: session, throttle_s, now

-- name: throttle_session
INSERT INTO session_settings AS s (session, paused_until, updated_at)
VALUES (%(session)s, ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => %(throttle_s)s::float8)) AT TIME ZONE 'UTC', %(now)s::timestamptz)
ON CONFLICT (session) DO UPDATE
    SET paused_until = greatest(s.paused_until, excluded.paused_until);

-- ========================================================================================
-- sweep
--
-- Requeue up to ``limit`` expired leases (one session's when scoped); at max_attempts, fail.
--
-- SKIP LOCKED: a lease whose row a completion holds is left to that
-- completion; the UPDATE re-checks status and expiry so a lease completed
-- just before is never moved back (River #1302).
--
-- parameters: session, limit, now, ledger_by_row, notify_ended

-- name: sweep (ledger=True, scoped=True)
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= %(now)s::timestamptz AND session = %(session)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts
                     THEN 'lease expired on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = %(now)s::timestamptz, updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'expired' END
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= %(now)s::timestamptz
          AND l.session = %(session)s
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'expired', status, attempts, owner, %(now)s::timestamptz, expired_at FROM swept
)
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('leaseq_queued', s.session || ' ' || s.n))
     FROM (SELECT session, count(*) AS n FROM swept WHERE status = 'queued' GROUP BY session)
         AS s) AS notified,
    (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM swept AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM swept;

-- name: sweep (ledger=True, scoped=False)
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= %(now)s::timestamptz 
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts
                     THEN 'lease expired on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = %(now)s::timestamptz, updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'expired' END
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= %(now)s::timestamptz
          
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'expired', status, attempts, owner, %(now)s::timestamptz, expired_at FROM swept
)
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('leaseq_queued', s.session || ' ' || s.n))
     FROM (SELECT session, count(*) AS n FROM swept WHERE status = 'queued' GROUP BY session)
         AS s) AS notified,
    (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM swept AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM swept;

-- name: sweep (ledger=False, scoped=True)
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= %(now)s::timestamptz AND session = %(session)s
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts
                     THEN 'lease expired on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = %(now)s::timestamptz, updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'expired' END
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= %(now)s::timestamptz
          AND l.session = %(session)s
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
)
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('leaseq_queued', s.session || ' ' || s.n))
     FROM (SELECT session, count(*) AS n FROM swept WHERE status = 'queued' GROUP BY session)
         AS s) AS notified,
    (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM swept AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM swept;

-- name: sweep (ledger=False, scoped=False)
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= %(now)s::timestamptz 
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN l.attempts - l.throttles >= l.max_attempts THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN l.attempts - l.throttles >= l.max_attempts
                     THEN 'lease expired on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = %(now)s::timestamptz, updated_at = %(now)s::timestamptz,
        ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'expired' END
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= %(now)s::timestamptz
          
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
)
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('leaseq_queued', s.session || ' ' || s.n))
     FROM (SELECT session, count(*) AS n FROM swept WHERE status = 'queued' GROUP BY session)
         AS s) AS notified,
    (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM swept AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified
FROM swept;

-- ========================================================================================
-- cancel
--
-- An operator fails a queued or leased lead; its holder's next renew or complete loses.
-- A lead blocked by dependencies stops waiting (``waiting_on`` 0, its pushed-for time
-- back), as a lead failed by a parent does: a failed lead waits on nothing. ``routed``:
-- the lead is of ``session`` (found by ``lead_sessions_on_nodes``), which on a Citus
-- cluster routes the statement to that session's shard alone.
--
-- parameters: lead_id, now, ledger_by_row, notify_ended, session

-- name: cancel (ledger=True, routed=True)
WITH cancelled AS (
    UPDATE leads
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    WHERE id = %(lead_id)s AND session = %(session)s AND status IN ('queued', 'leased')
    RETURNING *
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'cancelled', status, attempts, owner, %(now)s::timestamptz, NULL FROM cancelled
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM cancelled;

-- name: cancel (ledger=True, routed=False)
WITH cancelled AS (
    UPDATE leads
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    WHERE id = %(lead_id)s  AND status IN ('queued', 'leased')
    RETURNING *
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'cancelled', status, attempts, owner, %(now)s::timestamptz, NULL FROM cancelled
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM cancelled;

-- name: cancel (ledger=False, routed=True)
WITH cancelled AS (
    UPDATE leads
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    WHERE id = %(lead_id)s AND session = %(session)s AND status IN ('queued', 'leased')
    RETURNING *
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM cancelled;

-- name: cancel (ledger=False, routed=False)
WITH cancelled AS (
    UPDATE leads
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    WHERE id = %(lead_id)s  AND status IN ('queued', 'leased')
    RETURNING *
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified FROM cancelled;

-- ========================================================================================
-- retry
--
-- Dead-letter replay: a failed lead is queued again with room for one more attempt.
--
-- ``attempts`` is a fencing number and never goes down; ``max_attempts`` is
-- raised when needed so the replayed lead gets its attempt. ``routed``: as ``cancel``.
--
-- parameters: lead_id, now, ledger_by_row, session

-- name: retry (ledger=True, routed=True)
WITH retried AS (
    UPDATE leads
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(max_attempts, attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    WHERE id = %(lead_id)s AND session = %(session)s AND status = 'failed'
    RETURNING *
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'retried', status, attempts, owner, %(now)s::timestamptz, NULL FROM retried
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, pg_notify('leaseq_queued', session || ' 1') IS NULL AS notified
FROM retried;

-- name: retry (ledger=True, routed=False)
WITH retried AS (
    UPDATE leads
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(max_attempts, attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    WHERE id = %(lead_id)s  AND status = 'failed'
    RETURNING *
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'retried', status, attempts, owner, %(now)s::timestamptz, NULL FROM retried
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, pg_notify('leaseq_queued', session || ' 1') IS NULL AS notified
FROM retried;

-- name: retry (ledger=False, routed=True)
WITH retried AS (
    UPDATE leads
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(max_attempts, attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    WHERE id = %(lead_id)s AND session = %(session)s AND status = 'failed'
    RETURNING *
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, pg_notify('leaseq_queued', session || ' 1') IS NULL AS notified
FROM retried;

-- name: retry (ledger=False, routed=False)
WITH retried AS (
    UPDATE leads
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(max_attempts, attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    WHERE id = %(lead_id)s  AND status = 'failed'
    RETURNING *
)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after, pg_notify('leaseq_queued', session || ' 1') IS NULL AS notified
FROM retried;

-- ========================================================================================
-- prune
--
-- Delete up to ``limit`` terminal leads unchanged for ``older_than_s``, their events and
-- the edges of the leads that waited on them (``lead_dependencies``).
--
-- Retention, one batch per statement. SKIP LOCKED leaves a row someone holds
-- (an operator's retry) for a later batch, so pruning never waits on a lock
-- and holds at most ``limit`` row locks. Queued and leased leads never match.
-- The predicate and order are those of index ``leads_terminal_updated``: a
-- batch reads the oldest terminal leads, never the live ones.
--
-- parameters: session, limit, older_than_s, now

-- name: prune (scoped=True)
WITH doomed AS (
    SELECT id, session FROM leads
    WHERE status IN ('done', 'failed', 'cached')
      AND updated_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8)
      AND session = %(session)s
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
events AS (
    DELETE FROM lead_events WHERE lead_id IN (SELECT id FROM doomed)
),
edges AS (
    -- A parent that ended has no dependent left waiting on it (each was counted down or
    -- failed when it ended): its edges go with it.
    DELETE FROM lead_dependencies AS d USING doomed
    WHERE d.session = doomed.session AND d.after_id = doomed.id
),
pruned AS (
    DELETE FROM leads WHERE id IN (SELECT id FROM doomed) RETURNING id
)
SELECT count(*) AS pruned FROM pruned;

-- name: prune (scoped=False)
WITH doomed AS (
    SELECT id, session FROM leads
    WHERE status IN ('done', 'failed', 'cached')
      AND updated_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8)
      
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
events AS (
    DELETE FROM lead_events WHERE lead_id IN (SELECT id FROM doomed)
),
edges AS (
    -- A parent that ended has no dependent left waiting on it (each was counted down or
    -- failed when it ended): its edges go with it.
    DELETE FROM lead_dependencies AS d USING doomed
    WHERE d.session = doomed.session AND d.after_id = doomed.id
),
pruned AS (
    DELETE FROM leads WHERE id IN (SELECT id FROM doomed) RETURNING id
)
SELECT count(*) AS pruned FROM pruned;

-- ========================================================================================
-- get
--
-- One lead by id; ``routed``: as ``cancel``.
--
-- parameters: lead_id, session

-- name: get (routed=True)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after FROM leads WHERE id = %(lead_id)s AND session = %(session)s;

-- name: get (routed=False)
SELECT id, session, priority, payload, key, status, owner, attempts, max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, depth, parent_id, checkpoint, concurrency_key, max_runtime_s, traceparent, after FROM leads WHERE id = %(lead_id)s ;

-- ========================================================================================
-- retry_failed
--
-- Dead-letter replay of up to ``limit`` failed leads of a session, as ``retry`` of each.
--
-- Only leads failed by ``before`` (NULL: now; the caller passes back the first batch's
-- ``started`` to the next ones), so a lead this call requeued, leased and failed again is
-- not requeued twice. FOR UPDATE waits for a row another statement holds and re-checks it
-- (a lead retried alone meanwhile is queued, and passed over); only statements that lock
-- one row or skip locked rows touch failed leads, so the wait closes no cycle.
--
-- parameters: session, before, limit, now, ledger_by_row

-- name: retry_failed (ledger=True)
WITH failed AS (
    SELECT id FROM leads
    WHERE session = %(session)s AND status = 'failed'
      AND updated_at <= coalesce(%(before)s::timestamptz, %(now)s::timestamptz)
    LIMIT %(limit)s
    FOR UPDATE
),
retried AS (
    UPDATE leads AS l
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    FROM failed
    WHERE l.id = failed.id AND l.session = %(session)s AND l.status = 'failed'
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'retried', status, attempts, owner, %(now)s::timestamptz, NULL FROM retried
)
SELECT count(*) AS retried, %(now)s::timestamptz AS started,
       (SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL
        FROM retried HAVING count(*) > 0) AS notified
FROM retried;

-- name: retry_failed (ledger=False)
WITH failed AS (
    SELECT id FROM leads
    WHERE session = %(session)s AND status = 'failed'
      AND updated_at <= coalesce(%(before)s::timestamptz, %(now)s::timestamptz)
    LIMIT %(limit)s
    FOR UPDATE
),
retried AS (
    UPDATE leads AS l
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    FROM failed
    WHERE l.id = failed.id AND l.session = %(session)s AND l.status = 'failed'
    RETURNING l.*
)
SELECT count(*) AS retried, %(now)s::timestamptz AS started,
       (SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL
        FROM retried HAVING count(*) > 0) AS notified
FROM retried;
