-- The statements of app.store.statements.listing, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- list_leads
--
-- Up to ``limit`` leads of a session in ``statuses`` that pass the filter, by id from
-- ``after`` (excluded): descending when ``newest``, else ascending. One walk of
-- ``leads_session_status_id`` per status, each stopped at ``limit`` rows, merged; then
-- the page's rows by id. A lead changed between the two reads of the one statement is
-- shown as it is after the change (the snapshot is the statement's).
--
-- parameters: session, statuses, after, limit, key_prefix, owner, error, created_after, created_before, updated_after, updated_before

-- name: list_leads (newest=True)
SELECT l.id, l.session, l.priority, l.payload, l.key, l.status, l.owner, l.attempts, l.max_attempts, l.available_at, l.lease_expires_at, l.result, l.error, l.created_at, l.updated_at, l.depth, l.parent_id, l.checkpoint, l.concurrency_key, l.max_runtime_s, l.traceparent, l.after FROM (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) < (s.status, %(after)s)
          AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
        ORDER BY l.id DESC
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id DESC
    LIMIT %(limit)s
) AS page
JOIN leads AS l ON l.id = page.id AND l.session = %(session)s
ORDER BY l.id DESC;

-- name: list_leads (newest=False)
SELECT l.id, l.session, l.priority, l.payload, l.key, l.status, l.owner, l.attempts, l.max_attempts, l.available_at, l.lease_expires_at, l.result, l.error, l.created_at, l.updated_at, l.depth, l.parent_id, l.checkpoint, l.concurrency_key, l.max_runtime_s, l.traceparent, l.after FROM (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) > (s.status, %(after)s)
          AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
        ORDER BY l.id ASC
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id ASC
    LIMIT %(limit)s
) AS page
JOIN leads AS l ON l.id = page.id AND l.session = %(session)s
ORDER BY l.id ASC;

-- ========================================================================================
-- retry_leads
--
-- Dead-letter replay of one batch of a session's failed leads, as ``retry`` of each:
-- those among ``ids`` (``by_ids``) or those the filter selects, at most ``limit``, after
-- id ``after``. Answers ``picked`` (the batch's size: the caller goes on while it is
-- full), ``last_id`` (where the next batch starts) and ``changed``.
--
-- parameters: session, statuses, after, limit, now, ledger_by_row, ids, key_prefix, owner, error, created_after, created_before, updated_after, updated_before

-- name: retry_leads (ledger=True, by_ids=True)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.id = ANY(%(ids)s::bigint[]) AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[]) AND l.id > %(after)s
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
retried AS (
    UPDATE leads AS l
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'retried', status, attempts, owner, %(now)s::timestamptz, NULL FROM retried
),
woken AS (
    SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL AS notified
    FROM retried HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM retried) AS changed, (SELECT notified FROM woken) AS notified;

-- name: retry_leads (ledger=True, by_ids=False)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) > (s.status, %(after)s)
          AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
        ORDER BY l.id
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
retried AS (
    UPDATE leads AS l
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'retried', status, attempts, owner, %(now)s::timestamptz, NULL FROM retried
),
woken AS (
    SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL AS notified
    FROM retried HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM retried) AS changed, (SELECT notified FROM woken) AS notified;

-- name: retry_leads (ledger=False, by_ids=True)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.id = ANY(%(ids)s::bigint[]) AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[]) AND l.id > %(after)s
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
retried AS (
    UPDATE leads AS l
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
),
woken AS (
    SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL AS notified
    FROM retried HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM retried) AS changed, (SELECT notified FROM woken) AS notified;

-- name: retry_leads (ledger=False, by_ids=False)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) > (s.status, %(after)s)
          AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
        ORDER BY l.id
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
retried AS (
    UPDATE leads AS l
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = %(now)s::timestamptz,
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'retried' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
),
woken AS (
    SELECT pg_notify('leaseq_queued', %(session)s || ' ' || count(*)) IS NULL AS notified
    FROM retried HAVING count(*) > 0
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM retried) AS changed, (SELECT notified FROM woken) AS notified;

-- ========================================================================================
-- cancel_leads
--
-- An operator fails one batch of a session's queued and leased leads, as ``cancel`` of
-- each (a holder's next renew or complete loses): those among ``ids`` or those the filter
-- selects, at most ``limit``, after id ``after``; answers as ``retry_leads``.
--
-- parameters: session, statuses, after, limit, now, ledger_by_row, notify_ended, ids, key_prefix, owner, error, created_after, created_before, updated_after, updated_before

-- name: cancel_leads (ledger=True, by_ids=True)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.id = ANY(%(ids)s::bigint[]) AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[]) AND l.id > %(after)s
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
cancelled AS (
    UPDATE leads AS l
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'cancelled', status, attempts, owner, %(now)s::timestamptz, NULL FROM cancelled
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM cancelled) AS changed, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified;

-- name: cancel_leads (ledger=True, by_ids=False)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) > (s.status, %(after)s)
          AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
        ORDER BY l.id
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
cancelled AS (
    UPDATE leads AS l
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
),
ledger AS (
    INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at, expires_at)
    SELECT id, session, 'cancelled', status, attempts, owner, %(now)s::timestamptz, NULL FROM cancelled
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM cancelled) AS changed, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified;

-- name: cancel_leads (ledger=False, by_ids=True)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.id = ANY(%(ids)s::bigint[]) AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[]) AND l.id > %(after)s
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
cancelled AS (
    UPDATE leads AS l
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM cancelled) AS changed, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified;

-- name: cancel_leads (ledger=False, by_ids=False)
WITH picked AS MATERIALIZED (
    SELECT l.id FROM unnest(%(statuses)s::text[]) AS s(status)
    CROSS JOIN LATERAL (
        SELECT l.id FROM leads AS l
        WHERE l.session = %(session)s AND l.status = s.status
          AND (l.status, l.id) > (s.status, %(after)s)
          AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
        ORDER BY l.id
        LIMIT %(limit)s
    ) AS l
    ORDER BY l.id
    LIMIT %(limit)s
),
locked AS MATERIALIZED (
    SELECT l.id FROM leads AS l
    WHERE l.session = %(session)s AND l.id IN (SELECT id FROM picked)
    ORDER BY l.id
    FOR UPDATE OF l
),
cancelled AS (
    UPDATE leads AS l
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, %(now)s::timestamptz)
                       ELSE available_at END,
        updated_at = %(now)s::timestamptz, ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN 'cancelled' END
    FROM locked
    WHERE l.id = locked.id AND l.session = %(session)s
      AND l.status = ANY(%(statuses)s::text[])
      AND (%(ids)s::bigint[] IS NULL OR l.id = ANY(%(ids)s::bigint[]))
      AND (%(key_prefix)s::text IS NULL OR starts_with(l.key, %(key_prefix)s::text))
      AND (%(owner)s::text IS NULL OR l.owner = %(owner)s::text)
      AND (%(error)s::text IS NULL OR strpos(lower(l.error), lower(%(error)s::text)) > 0)
      AND (%(created_after)s::timestamptz IS NULL OR l.created_at >= %(created_after)s)
      AND (%(created_before)s::timestamptz IS NULL OR l.created_at < %(created_before)s)
      AND (%(updated_after)s::timestamptz IS NULL OR l.updated_at >= %(updated_after)s)
      AND (%(updated_before)s::timestamptz IS NULL OR l.updated_at < %(updated_before)s)
    RETURNING l.*
)
SELECT (SELECT count(*) FROM picked) AS picked,
       (SELECT max(id) FROM picked) AS last_id,
       (SELECT count(*) FROM cancelled) AS changed, (SELECT pg_notify('leaseq_ended',
               CASE WHEN count(*) > 350 THEN '*'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM cancelled AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN ('done', 'failed', 'cached')
              LIMIT 351) AS ended
        HAVING count(*) > 0) AS ended_notified;
