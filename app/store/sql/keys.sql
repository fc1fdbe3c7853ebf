-- The statements of app.store.statements.keys, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- claim_key
--
-- Claim a key for a request; no row back when it is taken.
--
-- A key another open transaction claimed makes this one wait for it to end:
-- a retry that overtakes its first try gets that try's answer, or the key.
--
-- parameters: key, request, verb, now

-- name: claim_key
INSERT INTO idempotency_keys (verb, key, request, created_at)
VALUES (%(verb)s, %(key)s, %(request)s, %(now)s::timestamptz)
ON CONFLICT (verb, key) DO NOTHING
RETURNING verb;

-- ========================================================================================
-- remember_answer
--
-- Store the answer of the request that claimed the key (in its transaction).
--
-- parameters: answer, key, verb

-- name: remember_answer
UPDATE idempotency_keys SET answer = CAST(%(answer)s AS jsonb)
WHERE verb = %(verb)s AND key = %(key)s;

-- ========================================================================================
-- remembered
--
-- The request a key was claimed for, and its answer.
--
-- parameters: key, verb

-- name: remembered
SELECT request, answer FROM idempotency_keys WHERE verb = %(verb)s AND key = %(key)s;

-- ========================================================================================
-- prune_keys
--
-- Delete up to ``limit`` idempotency keys older than ``older_than_s`` (oldest first).
--
-- SKIP LOCKED leaves a key another pruner chose to it; a Citus cluster refuses that lock
-- across shards (the keys are distributed by key), and there the pruners may wait on each
-- other instead: a key another one deleted meanwhile is just not counted twice.
--
-- parameters: limit, older_than_s, now

-- name: prune_keys (skip_locked=True)
WITH doomed AS (
    SELECT verb, key FROM idempotency_keys
    WHERE created_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.verb = doomed.verb AND k.key = doomed.key
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned;

-- name: prune_keys (skip_locked=False)
WITH doomed AS (
    SELECT verb, key FROM idempotency_keys
    WHERE created_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.verb = doomed.verb AND k.key = doomed.key
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned;
