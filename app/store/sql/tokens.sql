-- The statements of app.store.statements.tokens, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- token_create
--
-- Store a token; no row when a live token already has the name.
--
-- parameters: name, role, sessions, hash, expires_s

-- name: token_create
INSERT INTO api_tokens (name, role, sessions, hash, expires_at)
VALUES (%(name)s, %(role)s, %(sessions)s, %(hash)s,
        now() + make_interval(secs => %(expires_s)s::float8))
ON CONFLICT (name) WHERE revoked_at IS NULL DO NOTHING
RETURNING name, role, sessions, created_at, expires_at, last_used_at, revoked_at;

-- ========================================================================================
-- token_lookup
--
-- The live token with this hash and how long it stays valid (``valid_s``, on the
-- database clock; NULL: no expiry); none when unknown, revoked or expired. Stamps
-- ``last_used_at`` in the same statement when it is older than ``TOUCH_EVERY_S``.
--
-- parameters: hash

-- name: token_lookup
WITH live AS (
    SELECT name, role, sessions, expires_at, last_used_at FROM api_tokens
    WHERE hash = %(hash)s AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > now())
),
touched AS (
    UPDATE api_tokens SET last_used_at = now()
    WHERE hash = %(hash)s AND revoked_at IS NULL
      AND (last_used_at IS NULL OR last_used_at < now() - interval '60 seconds')
      AND EXISTS (SELECT FROM live)
)
SELECT name, role, sessions, extract(epoch FROM expires_at - now())::float8 AS valid_s
FROM live;

-- ========================================================================================
-- tokens_listing
--
-- Every token, live or not, newest first (never a hash).
--
-- parameters: none

-- name: tokens_listing
SELECT name, role, sessions, created_at, expires_at, last_used_at, revoked_at FROM api_tokens ORDER BY created_at DESC, name;

-- ========================================================================================
-- token_revoke
--
-- Revoke the live token of a name, and tell every process's cache (the hash).
--
-- parameters: name

-- name: token_revoke
WITH revoked AS (
    UPDATE api_tokens SET revoked_at = now()
    WHERE name = %(name)s AND revoked_at IS NULL
    RETURNING name, role, sessions, created_at, expires_at, last_used_at, revoked_at, hash
)
SELECT name, role, sessions, created_at, expires_at, last_used_at, revoked_at, hash,
       (SELECT count(pg_notify('leaseq_tokens', r.hash)) FROM revoked AS r) AS notified
FROM revoked;

-- ========================================================================================
-- audit
--
-- One operator action in the audit trail, by the database clock.
--
-- parameters: token, action, session, lead_id, detail

-- name: audit
INSERT INTO operator_actions (token, action, session, lead_id, detail)
VALUES (%(token)s, %(action)s, %(session)s, %(lead_id)s, %(detail)s);

-- ========================================================================================
-- audit_trail
--
-- The audit trail, newest first, at most ``limit`` rows.
--
-- parameters: limit

-- name: audit_trail
SELECT id, at, token, action, session, lead_id, detail FROM operator_actions
ORDER BY id DESC LIMIT %(limit)s;

-- ========================================================================================
-- lead_sessions
--
-- The session of each of these leads (a lead's session never changes).
--
-- parameters: ids

-- name: lead_sessions
SELECT id, session FROM leads WHERE id = ANY(%(ids)s::bigint[]);

-- ========================================================================================
-- lead_sessions_on_nodes
--
-- The session of each of these leads on a Citus cluster, asked of each node that holds
-- shards of ``leads`` for its own shards (``master_run_on_worker``, in parallel), so a
-- node that cannot be reached fails its own row (``success`` false, ``result`` why), not
-- the statement: a row per node, ``result`` the leads it holds as ``id session`` pairs
-- joined by commas. A lead id alone names no shard: ``lead_sessions`` on a cluster
-- reaches every node, and fails whole while one is stopped.
--
-- parameters: ids

-- name: lead_sessions_on_nodes
WITH commands AS (
    -- One query per node, over that node's shards of leads: 'id session' per lead found.
    SELECT p.nodename, p.nodeport,
           'SELECT string_agg(id || '' '' || session, '','') FROM ('
           || string_agg(format('SELECT id, session FROM %%s WHERE id = ANY(%%L::bigint[])',
                                shard_name(s.logicalrelid, s.shardid), %(ids)s::bigint[]::text),
                         ' UNION ALL ' ORDER BY s.shardid)
           || ') AS found' AS command
    FROM pg_dist_shard AS s JOIN pg_dist_shard_placement AS p USING (shardid)
    WHERE s.logicalrelid = 'leads'::regclass AND p.shardstate = 1
    GROUP BY p.nodename, p.nodeport
)
SELECT r.node_name AS node, r.node_port AS port, r.success, r.result
FROM (SELECT array_agg(nodename) AS nodes, array_agg(nodeport) AS ports,
             array_agg(command) AS commands FROM commands) AS c,
     LATERAL master_run_on_worker(c.nodes, c.ports, c.commands, true) AS r;

-- ========================================================================================
-- sessions_like
--
-- The sessions with leads whose names match an SQL LIKE pattern (``lead_counts``:
-- its cost follows the sessions, not the leads).
--
-- parameters: like

-- name: sessions_like
SELECT DISTINCT session FROM lead_counts WHERE session LIKE %(like)s;
