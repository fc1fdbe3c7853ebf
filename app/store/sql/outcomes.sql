-- The statements of app.store.statements.outcomes, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- watch
--
-- Say that requests wait for leads (``ids``: the waiters', ``lead_ids``, until ``waits``
-- seconds from now).
--
-- parameters: ids, lead_ids, waits

-- name: watch
INSERT INTO lead_waits (id, lead_id, until)
SELECT id, lead_id, now() + make_interval(secs => wait_s)
FROM unnest(%(ids)s::uuid[], %(lead_ids)s::bigint[], %(waits)s::float8[]) AS r(id, lead_id, wait_s);

-- ========================================================================================
-- watched
--
-- The leads watched, read after their watches committed: a lead that ended before a
-- trigger could see its watch is found ended here.
--
-- parameters: lead_ids

-- name: watched
SELECT l.* FROM leads AS l WHERE l.id = ANY(%(lead_ids)s::bigint[]);

-- ========================================================================================
-- unwatch
--
-- Those waits are over.
--
-- parameters: ids

-- name: unwatch
DELETE FROM lead_waits WHERE id = ANY(%(ids)s::uuid[]);

-- ========================================================================================
-- forget_stale_watches
--
-- Watches whose wait ended long ago (left by a process that stopped while waiting).
--
-- parameters: none

-- name: forget_stale_watches
DELETE FROM lead_waits WHERE until < now() - interval '1 minute';
