-- The statements of app.store.statements.reads, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- stats
--
-- Lead counts by status in one session (the slots of ``lead_counts`` added up), each row
-- with the age of its oldest available lead (``age_s``); no counts: one row of NULLs but it.
--
-- parameters: session, now

-- name: stats
WITH counted AS (
    SELECT status, sum(n)::bigint AS n FROM lead_counts WHERE session = %(session)s
    GROUP BY status HAVING sum(n) <> 0
)
SELECT counted.status, counted.n, CASE WHEN oldest.at IS NOT NULL THEN greatest(0, (CASE WHEN extract(epoch FROM coalesce(%(now)s::timestamptz, now())) - extract(epoch FROM oldest.at) IS NOT NULL THEN least(greatest(extract(epoch FROM coalesce(%(now)s::timestamptz, now())) - extract(epoch FROM oldest.at), -1000000000000.0), 1000000000000.0) END)::float8) END AS age_s,
       (SELECT CASE WHEN paused_until > coalesce(%(now)s::timestamptz, now()) THEN paused_until END AS paused_until FROM session_settings WHERE session = %(session)s)
FROM (SELECT least(
        (SELECT min(available_at) FROM leads
         WHERE session = %(session)s AND status = 'queued' AND NOT scheduled),
        (SELECT min(available_at) FROM leads
         WHERE session = %(session)s AND scheduled AND available_at <= coalesce(%(now)s::timestamptz, now()))) AS at) AS oldest LEFT JOIN counted ON true;

-- ========================================================================================
-- stats_all
--
-- Lead counts by session and status (``lead_counts``: its cost follows the sessions, not
-- the leads).
--
-- parameters: none

-- name: stats_all
SELECT session, status, sum(n)::bigint AS n FROM lead_counts
GROUP BY session, status HAVING sum(n) <> 0;

-- ========================================================================================
-- paused_all
--
-- The sessions paused now, and until when.
--
-- parameters: now

-- name: paused_all
SELECT session, paused_until FROM session_settings WHERE paused_until > coalesce(%(now)s::timestamptz, now());

-- ========================================================================================
-- fold_counts
--
-- Add every other slot of ``lead_counts`` into slot 0, so the table keeps about one row
-- per session and status however many backends wrote it; the pruner's, across sessions.
--
-- SKIP LOCKED leaves a slot a statement is writing to a later pass, and slot 0 rows are
-- upserted in (session, status) order as the triggers do, so no lock waits on another in
-- a cycle. The sums are unchanged at every commit.
--
-- parameters: none

-- name: fold_counts
WITH moving AS (
    SELECT session, status, slot FROM lead_counts WHERE slot <> 0 FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM lead_counts AS c USING moving AS m
    WHERE c.session = m.session AND c.status = m.status AND c.slot = m.slot
    RETURNING c.session, c.status, c.n
),
folded AS (
    INSERT INTO lead_counts AS c (session, status, slot, n)
    SELECT session, status, 0, sum(n) FROM moved GROUP BY session, status
    ORDER BY session, status
    ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n
    RETURNING 1
)
SELECT count(*) AS folded FROM folded;

-- ========================================================================================
-- forget_zero_counts
--
-- Delete the slot-0 counts that came to zero (a pruned session leaves no row behind).
--
-- parameters: none

-- name: forget_zero_counts
WITH zero AS (
    SELECT session, status FROM lead_counts WHERE slot = 0 AND n = 0 FOR UPDATE SKIP LOCKED
),
forgotten AS (
    DELETE FROM lead_counts AS c USING zero AS z
    WHERE c.session = z.session AND c.status = z.status AND c.slot = 0
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten;

-- ========================================================================================
-- db_now
--
-- The database clock.
--
-- parameters: none

-- name: db_now
SELECT now() AS now;

-- ========================================================================================
-- autovacuum
--
-- Whether the server runs autovacuum (``SHOW autovacuum``): the reclaimer of churned rows.
--
-- parameters: none

-- name: autovacuum
SELECT current_setting('autovacuum') = 'on' AS enabled;

-- ========================================================================================
-- schema_revision
--
-- The Alembic revision of the schema (raises UndefinedTable on a database without one).
--
-- parameters: none

-- name: schema_revision
SELECT version_num FROM alembic_version;

-- ========================================================================================
-- oldest_available
--
-- Per session with queued leads, the age of its oldest lead that could be leased now
-- (sessions with none left out): two index probes per such session, whatever the leads.
-- The scaling signal, the dashboard's oldest age, and the fleet's view of who has work.
--
-- parameters: now

-- name: oldest_available
SELECT c.session, CASE WHEN o.at IS NOT NULL THEN greatest(0, (CASE WHEN extract(epoch FROM coalesce(%(now)s::timestamptz, now())) - extract(epoch FROM o.at) IS NOT NULL THEN least(greatest(extract(epoch FROM coalesce(%(now)s::timestamptz, now())) - extract(epoch FROM o.at), -1000000000000.0), 1000000000000.0) END)::float8) END AS age_s
FROM (SELECT session FROM lead_counts WHERE status = 'queued'
      GROUP BY session HAVING sum(n) > 0) AS c
CROSS JOIN LATERAL (SELECT least(
        (SELECT min(available_at) FROM leads
         WHERE session = c.session AND status = 'queued' AND NOT scheduled),
        (SELECT min(available_at) FROM leads
         WHERE session = c.session AND scheduled AND available_at <= coalesce(%(now)s::timestamptz, now()))) AS at) AS o
WHERE o.at IS NOT NULL;

-- ========================================================================================
-- lead_events
--
-- The newest ``limit`` events of one lead, oldest first, each with ``total``: how many the
-- lead has. The session routes it to one shard (index ``lead_events_session_lead``).
--
-- parameters: session, lead_id, limit

-- name: lead_events
SELECT id, event, status, attempt, owner, at, expires_at, total FROM (
    SELECT id, event, status, attempt, owner, at, expires_at, count(*) OVER () AS total
    FROM lead_events WHERE session = %(session)s AND lead_id = %(lead_id)s
    ORDER BY id DESC LIMIT %(limit)s
) AS newest
ORDER BY id;

-- ========================================================================================
-- one_snapshot
--
-- The first statement of a read-only transaction whose statements see one instant.
--
-- parameters: none

-- name: one_snapshot
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;
