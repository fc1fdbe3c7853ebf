-- The statements of app.store.statements.keys, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- claim_key
--
-- Claim a key for a request of ``session`` (its shard's row on a cluster); no row back
-- when it is taken.
--
-- A key another open transaction claimed makes this one wait for it to end:
-- a retry that overtakes its first try gets that try's answer, or the key. No conflict
-- target: the primary key is ``(verb, key)`` on one PostgreSQL, ``(session, verb, key)``
-- on a cluster (revision 0026).
--
-- parameters: session, key, request, verb, now

-- name: claim_key
INSERT INTO idempotency_keys (session, verb, key, request, created_at)
VALUES (%(session)s, %(verb)s, %(key)s, %(request)s, %(now)s::timestamptz)
ON CONFLICT DO NOTHING
RETURNING verb;

-- ========================================================================================
-- remember_answer
--
-- Store the answer of the request that claimed the key (in its transaction).
--
-- parameters: answer, session, key, verb

-- name: remember_answer
UPDATE idempotency_keys SET answer = CAST(%(answer)s AS jsonb)
WHERE session = %(session)s AND verb = %(verb)s AND key = %(key)s;

-- ========================================================================================
-- remember_key
--
-- Claim a key with its answer at once, after its work in the same transaction (a keyed
-- lease on a cluster: ``lease_keyed`` without ``remember``). No ON CONFLICT: a first try
-- that committed the key meanwhile makes it fail (unique_violation), and the transaction
-- with it.
--
-- parameters: session, verb, key, request, answer, now

-- name: remember_key
INSERT INTO idempotency_keys (session, verb, key, request, created_at, answer)
VALUES (%(session)s, %(verb)s, %(key)s, %(request)s, %(now)s::timestamptz, CAST(%(answer)s AS jsonb));

-- ========================================================================================
-- remembered
--
-- The request a key of ``session`` was claimed for, and its answer.
--
-- parameters: session, key, verb

-- name: remembered
SELECT request, answer FROM idempotency_keys
WHERE session = %(session)s AND verb = %(verb)s AND key = %(key)s;

-- ========================================================================================
-- remembered_anywhere
--
-- The request a key was claimed for, whatever its session: on one PostgreSQL, after a
-- claim refused by a row of another session (a key sent again for another session, or
-- kept from before revision 0026); every shard on a cluster, where that never happens.
--
-- parameters: key, verb

-- name: remembered_anywhere
SELECT request, answer FROM idempotency_keys WHERE verb = %(verb)s AND key = %(key)s;

-- ========================================================================================
-- prune_keys
--
-- Delete up to ``limit`` idempotency keys older than ``older_than_s`` (oldest first).
--
-- SKIP LOCKED leaves a key another pruner chose to it; a Citus cluster refuses that lock
-- across shards (the keys are distributed by session), and there the pruners may wait on each
-- other instead: a key another one deleted meanwhile is just not counted twice.
--
-- parameters: limit, older_than_s, now

-- name: prune_keys (skip_locked=True)
WITH doomed AS (
    SELECT session, verb, key FROM idempotency_keys
    WHERE created_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.session = doomed.session AND k.verb = doomed.verb AND k.key = doomed.key
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned;

-- name: prune_keys (skip_locked=False)
WITH doomed AS (
    SELECT session, verb, key FROM idempotency_keys
    WHERE created_at < %(now)s::timestamptz - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.session = doomed.session AND k.verb = doomed.verb AND k.key = doomed.key
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned;
