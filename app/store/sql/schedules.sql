-- The statements of app.store.statements.schedules, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- schedule_now
--
-- The database clock (or the injected instant): every tick is judged by it.
--
-- parameters: now

-- name: schedule_now
SELECT %(now)s::timestamptz AS now;

-- ========================================================================================
-- schedule_put
--
-- Create or replace a schedule; returns it.
--
-- parameters: name, session, cron, timezone, lead, next_tick, now

-- name: schedule_put
INSERT INTO schedules AS s (name, session, cron, timezone, lead, next_tick, created_at, updated_at)
VALUES (%(name)s, %(session)s, %(cron)s, %(timezone)s, CAST(%(lead)s AS jsonb), %(next_tick)s,
        %(now)s::timestamptz, %(now)s::timestamptz)
ON CONFLICT (name) DO UPDATE
SET session = excluded.session, cron = excluded.cron, timezone = excluded.timezone,
    lead = excluded.lead, next_tick = excluded.next_tick, updated_at = excluded.updated_at
RETURNING name, session, cron, timezone, lead, next_tick, created_at, updated_at;

-- ========================================================================================
-- schedule_get
--
-- One schedule by name.
--
-- parameters: name

-- name: schedule_get
SELECT name, session, cron, timezone, lead, next_tick, created_at, updated_at FROM schedules WHERE name = %(name)s;

-- ========================================================================================
-- schedules_all
--
-- Every schedule, by name.
--
-- parameters: none

-- name: schedules_all
SELECT name, session, cron, timezone, lead, next_tick, created_at, updated_at FROM schedules ORDER BY name;

-- ========================================================================================
-- schedule_delete
--
-- Delete a schedule; its name when there was one.
--
-- parameters: name

-- name: schedule_delete
DELETE FROM schedules WHERE name = %(name)s RETURNING name;

-- ========================================================================================
-- schedules_due
--
-- Schedules whose next tick has come, in (next_tick, name) order after (``after_tick``,
-- ``after_name``) when given, with the instant that judged them (index
-- schedules_next_tick: one probe when none is due) and their lead's parts as
-- ``schedule_push`` takes them: the payload as JSON text (a number read into Python
-- could lose its digits), the priority and the delay.
--
-- parameters: limit, now, after_tick, after_name

-- name: schedules_due
SELECT name, session, cron, timezone, lead, next_tick, created_at, updated_at, %(now)s::timestamptz AS now,
       (lead -> 'payload')::text AS payload_text,
       coalesce((lead ->> 'priority')::integer, 0) AS priority,
       coalesce((lead ->> 'delay_s')::float8, 0) AS delay_s
FROM schedules
WHERE next_tick <= %(now)s::timestamptz
  AND (%(after_name)s::text IS NULL
       OR (next_tick, name) > (%(after_tick)s::timestamptz, %(after_name)s::text))
ORDER BY next_tick, name
LIMIT %(limit)s;

-- ========================================================================================
-- schedule_push
--
-- Push a tick's lead with its ``key``; the id of the lead that holds the key already
-- when there is one (then nothing is pushed).
--
-- parameters: session, payload, priority, key, delay_s, max_attempts

-- name: schedule_push
SELECT leaseq_push(
    %(session)s::text, CAST(%(payload)s AS jsonb), %(priority)s::integer, %(key)s::text,
    %(delay_s)s::float8, %(max_attempts)s::integer
) AS lead_id;

-- ========================================================================================
-- schedule_advance
--
-- Move a schedule's ``next_tick`` from ``tick_was`` to ``next_tick``; no row when another
-- process moved it first.
--
-- parameters: name, tick_was, next_tick, now

-- name: schedule_advance
UPDATE schedules SET next_tick = %(next_tick)s, updated_at = %(now)s::timestamptz
WHERE name = %(name)s AND next_tick = %(tick_was)s
RETURNING name;
