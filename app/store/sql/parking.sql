-- The statements of app.store.statements.parking, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- tend_keys
--
-- Bring back the parked leads of the keys that freed room and park the ready leads of
-- full keys among the first ``window`` of the session (module docstring); run after
-- ``lock_settings``, before ``lease_limited``, in its transaction. Nothing for a session
-- without ``max_leased_per_key``. Answers how many leads it brought back, parked and
-- looked at (``looked_at`` below ``window``: no ready lead is left beyond them).
--
-- parameters: session, window, now

-- name: tend_keys
WITH cap AS (
    SELECT max_leased_per_key AS n FROM session_settings
    WHERE session = %(session)s AND max_leased_per_key IS NOT NULL
),
frees AS (
    SELECT concurrency_key, slot, n FROM lead_key_frees
    WHERE session = %(session)s AND EXISTS (SELECT FROM cap)
),
freed AS (
    SELECT concurrency_key, (SELECT n FROM cap) - (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = f.concurrency_key
            LIMIT (SELECT n FROM cap)) AS held) AS room
    FROM (SELECT DISTINCT concurrency_key FROM frees) AS f
),
back AS (
    -- The best parked leads of each key that freed room, as many as its room.
    SELECT p.id FROM freed AS f
    CROSS JOIN LATERAL (
        SELECT id FROM leads
        WHERE session = %(session)s AND concurrency_key = f.concurrency_key AND status = 'queued' AND parked
        ORDER BY priority DESC, id
        LIMIT greatest(f.room, 0)
        FOR UPDATE SKIP LOCKED
    ) AS p
),
head AS (
    SELECT id, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND EXISTS (SELECT FROM cap)
    ORDER BY priority DESC, id
    LIMIT %(window)s
),
full_keys AS (
    SELECT k.concurrency_key FROM (
        SELECT DISTINCT concurrency_key FROM head WHERE concurrency_key IS NOT NULL) AS k
    WHERE (SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = k.concurrency_key
            LIMIT (SELECT n FROM cap)) AS held) >= (SELECT n FROM cap)
),
unparked AS (
    UPDATE leads AS l
    SET parked = false, scheduled = l.ready_at > (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int), available_at = l.ready_at
    FROM back
    WHERE l.id = back.id AND l.session = %(session)s
    RETURNING l.id
),
parked AS (
    -- Rechecked as the row is updated: a lead that changed meanwhile is left as it is.
    UPDATE leads AS l
    SET parked = true, scheduled = true, ready_at = l.available_at,
        available_at = '9999-12-31 00:00:00+00'::timestamptz
    FROM head JOIN full_keys USING (concurrency_key)
    WHERE l.id = head.id AND l.session = %(session)s
      AND l.status = 'queued' AND NOT l.scheduled
    RETURNING l.id
),
unlocked AS (
    -- Not one a statement ending a lease of its key writes now (it is for the next look):
    -- this statement, under the session's lock, never waits for such a one.
    SELECT f.concurrency_key, f.slot FROM lead_key_frees AS f
    JOIN frees USING (concurrency_key, slot)
    WHERE f.session = %(session)s
    FOR UPDATE OF f SKIP LOCKED
),
seen AS (
    -- Only as it was read: a free that grew meanwhile stays for the next look.
    DELETE FROM lead_key_frees AS f USING frees JOIN unlocked USING (concurrency_key, slot)
    WHERE f.session = %(session)s AND f.concurrency_key = frees.concurrency_key
      AND f.slot = frees.slot AND f.n = frees.n
)
SELECT (SELECT count(*) FROM unparked) AS unparked, (SELECT count(*) FROM parked) AS parked,
       (SELECT count(*) FROM head) AS looked_at;

-- ========================================================================================
-- unpark_session
--
-- Bring back every parked lead of a session, after its settings changed and under their
-- lock: its next leases park again what the new cap holds back, and a session without a
-- cap any more parks nothing.
--
-- parameters: session, now

-- name: unpark_session
WITH unparked AS (
    UPDATE leads AS l
    SET parked = false, scheduled = l.ready_at > (%(now)s::timestamptz + (statement_timestamp() - transaction_timestamp())
        * (%(now)s::timestamptz = transaction_timestamp())::int), available_at = l.ready_at
    WHERE l.session = %(session)s AND status = 'queued' AND parked
    RETURNING l.id
)
SELECT count(*) AS unparked FROM unparked;

-- ========================================================================================
-- forget_frees
--
-- Delete the frees of sessions without ``max_leased_per_key`` (nothing reads them), as
-- they were read: one that grew meanwhile (the cap was set since) stays. The pruner's,
-- across sessions (or in one, when scoped).
--
-- parameters: session

-- name: forget_frees (scoped=True)
WITH seen AS (
    SELECT f.session, f.concurrency_key, f.slot, f.n FROM lead_key_frees AS f
    WHERE NOT EXISTS (SELECT FROM session_settings AS s
                      WHERE s.session = f.session AND s.max_leased_per_key IS NOT NULL)
      AND f.session = %(session)s
),
forgotten AS (
    DELETE FROM lead_key_frees AS f USING seen
    WHERE f.session = seen.session AND f.concurrency_key = seen.concurrency_key
      AND f.slot = seen.slot AND f.n = seen.n AND f.session = %(session)s
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten;

-- name: forget_frees (scoped=False)
WITH seen AS (
    SELECT f.session, f.concurrency_key, f.slot, f.n FROM lead_key_frees AS f
    WHERE NOT EXISTS (SELECT FROM session_settings AS s
                      WHERE s.session = f.session AND s.max_leased_per_key IS NOT NULL)
      
),
forgotten AS (
    DELETE FROM lead_key_frees AS f USING seen
    WHERE f.session = seen.session AND f.concurrency_key = seen.concurrency_key
      AND f.slot = seen.slot AND f.n = seen.n 
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten;
