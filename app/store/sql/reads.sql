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
SELECT counted.status, counted.n, CASE WHEN oldest.at IS NOT NULL THEN greatest(0, (CASE WHEN extract(epoch FROM %(now)s::timestamptz) - extract(epoch FROM oldest.at) IS NOT NULL THEN least(greatest(extract(epoch FROM %(now)s::timestamptz) - extract(epoch FROM oldest.at), -1000000000000.0), 1000000000000.0) END)::float8) END AS age_s,
       (SELECT CASE WHEN paused_until > %(now)s::timestamptz THEN paused_until END AS paused_until FROM session_settings WHERE session = %(session)s)
FROM (SELECT least(
        (SELECT min(available_at) AS at FROM leads
         WHERE session = %(session)s AND status = 'queued' AND NOT scheduled),
        (SELECT min(available_at) AS at FROM leads
         WHERE session = %(session)s AND scheduled AND available_at <= %(now)s::timestamptz),
        (SELECT min(back.at) AS at FROM lead_key_frees AS f
         CROSS JOIN LATERAL (
             SELECT ready_at AS at FROM leads
             WHERE session = %(session)s AND concurrency_key = f.concurrency_key
               AND status = 'queued' AND parked
             ORDER BY priority DESC, id LIMIT 1) AS back
         WHERE f.session = %(session)s)) AS at) AS oldest LEFT JOIN counted ON true;

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
SELECT session, paused_until FROM session_settings WHERE paused_until > %(now)s::timestamptz;

-- ========================================================================================
-- fold_counts
--
-- Add every other slot of ``lead_counts`` into slot 0, so the table keeps about one row
-- per session and status however many backends wrote it; the pruner's, across sessions
-- (or in one session, when scoped).
--
-- SKIP LOCKED leaves a slot a statement is writing to a later pass, and slot 0 rows are
-- upserted in (session, status) order as the triggers do, so no lock waits on another in
-- a cycle. The sums are unchanged at every commit.
--
-- parameters: session

-- name: fold_counts (scoped=True)
WITH moving AS (
    SELECT session, status, slot FROM lead_counts WHERE slot <> 0 AND session = %(session)s
    FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM lead_counts AS c USING moving AS m
    WHERE c.session = m.session AND c.status = m.status AND c.slot = m.slot
          AND c.session = %(session)s
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

-- name: fold_counts (scoped=False)
WITH moving AS (
    SELECT session, status, slot FROM lead_counts WHERE slot <> 0 
    FOR UPDATE SKIP LOCKED
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
-- Delete the slot-0 counts that came to zero (a pruned session leaves no row behind); in
-- one session when scoped.
--
-- parameters: session

-- name: forget_zero_counts (scoped=True)
WITH zero AS (
    SELECT session, status FROM lead_counts WHERE slot = 0 AND n = 0 AND session = %(session)s
    FOR UPDATE SKIP LOCKED
),
forgotten AS (
    DELETE FROM lead_counts AS c USING zero AS z
    WHERE c.session = z.session AND c.status = z.status AND c.slot = 0
          AND c.session = %(session)s
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten;

-- name: forget_zero_counts (scoped=False)
WITH zero AS (
    SELECT session, status FROM lead_counts WHERE slot = 0 AND n = 0 
    FOR UPDATE SKIP LOCKED
),
forgotten AS (
    DELETE FROM lead_counts AS c USING zero AS z
    WHERE c.session = z.session AND c.status = z.status AND c.slot = 0
          
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten;

-- ========================================================================================
-- sessions_to_keep
--
-- The sessions with expired leases (``sweep``), due scheduled leads (``promote``),
-- counts to fold or forget (``fold_counts``, ``forget_zero_counts``), frees of keys
-- (``forget_frees``) or terminal leads
-- unchanged for ``older_than_s`` (``prune``): a read of every shard through the index each
-- upkeep uses, without a lock.
--
-- parameters: now, older_than_s

-- name: sessions_to_keep (of=expired)
SELECT DISTINCT session FROM leads WHERE status = 'leased' AND lease_expires_at <= %(now)s::timestamptz;

-- name: sessions_to_keep (of=due)
SELECT DISTINCT session FROM leads WHERE scheduled AND available_at <= %(now)s::timestamptz;

-- name: sessions_to_keep (of=counts)
SELECT DISTINCT session FROM lead_counts WHERE slot <> 0 OR n = 0;

-- name: sessions_to_keep (of=frees)
SELECT DISTINCT session FROM lead_key_frees;

-- name: sessions_to_keep (of=terminal)
SELECT DISTINCT session FROM leads WHERE status IN ('done', 'failed', 'cached') AND updated_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8);

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
-- (sessions with none left out): two index probes per such session, whatever the leads,
-- and one per key of it that freed room for a parked lead since its last lease.
-- The scaling signal, the dashboard's oldest age, and the fleet's view of who has work.
--
-- parameters: now

-- name: oldest_available
SELECT c.session, CASE WHEN least(ready.at, due.at, back.at) IS NOT NULL THEN greatest(0, (CASE WHEN extract(epoch FROM %(now)s::timestamptz) - extract(epoch FROM least(ready.at, due.at, back.at)) IS NOT NULL THEN least(greatest(extract(epoch FROM %(now)s::timestamptz) - extract(epoch FROM least(ready.at, due.at, back.at)), -1000000000000.0), 1000000000000.0) END)::float8) END AS age_s
FROM (SELECT session FROM lead_counts WHERE status = 'queued'
      GROUP BY session HAVING sum(n) > 0) AS c
CROSS JOIN LATERAL (SELECT min(available_at) AS at FROM leads
         WHERE session = c.session AND status = 'queued' AND NOT scheduled) AS ready
CROSS JOIN LATERAL (SELECT min(available_at) AS at FROM leads
         WHERE session = c.session AND scheduled AND available_at <= %(now)s::timestamptz) AS due
CROSS JOIN LATERAL (SELECT min(back.at) AS at FROM lead_key_frees AS f
         CROSS JOIN LATERAL (
             SELECT ready_at AS at FROM leads
             WHERE session = c.session AND concurrency_key = f.concurrency_key
               AND status = 'queued' AND parked
             ORDER BY priority DESC, id LIMIT 1) AS back
         WHERE f.session = c.session) AS back
WHERE least(ready.at, due.at, back.at) IS NOT NULL;

-- ========================================================================================
-- lead_events
--
-- The newest ``limit`` events of one lead, oldest first, each with ``total``: how many the
-- lead has. The session routes it to one shard (index ``lead_events_session_lead``).
--
-- In the order of their instants, then of their ids: on a cluster a lead's ids follow
-- its shard's node, so a shard moved to a node of a lower range would list later rows
-- first by id alone (docs/scaling.md, "The ledger on a cluster").
--
-- parameters: session, lead_id, limit

-- name: lead_events
SELECT id, event, status, attempt, owner, at, expires_at, total FROM (
    SELECT id, event, status, attempt, owner, at, expires_at, count(*) OVER () AS total
    FROM lead_events WHERE session = %(session)s AND lead_id = %(lead_id)s
    ORDER BY at DESC, id DESC LIMIT %(limit)s
) AS newest
ORDER BY at, id;

-- ========================================================================================
-- one_snapshot
--
-- The first statement of a read-only transaction whose statements see one instant.
--
-- parameters: none

-- name: one_snapshot
SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY;
