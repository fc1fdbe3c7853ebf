-- The statements of app.store.statements.fairness, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- ledger_head
--
-- The ledger's last id (the primary key's last entry): where a measure starts.
--
-- parameters: none

-- name: ledger_head
SELECT coalesce(max(id), 0) AS id FROM lead_events;

-- ========================================================================================
-- lease_seconds
--
-- Per session, the leases that ended in the ledger ids (after_id, head_id] and the
-- seconds they lasted, from their lease to their end (the database's clock).
--
-- parameters: after_id, head_id

-- name: lease_seconds
SELECT e.session, count(*)::bigint AS ended,
       sum(greatest(0, (CASE WHEN extract(epoch FROM e.at) - extract(epoch FROM l.at) IS NOT NULL THEN least(greatest(extract(epoch FROM e.at) - extract(epoch FROM l.at), -1000000000000.0), 1000000000000.0) END)::float8))::float8 AS seconds
FROM lead_events AS e
CROSS JOIN LATERAL (
    SELECT s.at FROM lead_events AS s
    WHERE s.session = e.session AND s.lead_id = e.lead_id AND s.id < e.id
      AND s.event = 'leased' AND s.attempt = e.attempt
    ORDER BY s.id DESC
    LIMIT 1
) AS l
WHERE e.id > %(after_id)s AND e.id <= %(head_id)s AND e.event IN ('completed', 'expired', 'released')
GROUP BY e.session;

-- ========================================================================================
-- lease_seconds_recent
--
-- Per session, the leases that ended in the last ``window_s`` seconds of the database
-- clock and the seconds they lasted (sessions with none are left out). The event filter is
-- the predicate of index ``lead_events_outcomes_at``.
--
-- parameters: window_s, now

-- name: lease_seconds_recent
SELECT e.session, count(*)::bigint AS ended,
       sum(greatest(0, (CASE WHEN extract(epoch FROM e.at) - extract(epoch FROM l.at) IS NOT NULL THEN least(greatest(extract(epoch FROM e.at) - extract(epoch FROM l.at), -1000000000000.0), 1000000000000.0) END)::float8))::float8 AS seconds
FROM lead_events AS e
CROSS JOIN LATERAL (
    SELECT s.at FROM lead_events AS s
    WHERE s.session = e.session AND s.lead_id = e.lead_id AND s.id < e.id
      AND s.event = 'leased' AND s.attempt = e.attempt
    ORDER BY s.id DESC
    LIMIT 1
) AS l
WHERE e.at > ((%(now)s::timestamptz AT TIME ZONE 'UTC') + make_interval(secs => -%(window_s)s::float8)) AT TIME ZONE 'UTC' AND e.at <= %(now)s::timestamptz AND e.event IN ('completed', 'expired', 'released')
GROUP BY e.session;
