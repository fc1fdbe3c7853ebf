-- The statements of app.store.statements.quota, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- config_put
--
-- Keep a setting of the service in the database (``value`` None: forget it), for what
-- runs without an API process: the trigger leads_max_queued reads ``max_queued``.
--
-- parameters: name, value

-- name: config_put
WITH gone AS (
    DELETE FROM leaseq_config WHERE name = %(name)s AND %(value)s::text IS NULL
)
INSERT INTO leaseq_config AS c (name, value, updated_at)
SELECT %(name)s, %(value)s::text, now() WHERE %(value)s::text IS NOT NULL
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;

-- ========================================================================================
-- config_get
--
-- The settings of the service kept in the database under ``names``: a read, which a
-- Citus cluster answers from the node connected to (``leaseq_config`` is a reference
-- table), so a stopped worker node does not keep it from being read, as it would a write.
--
-- parameters: names

-- name: config_get
SELECT name, value FROM leaseq_config WHERE name = ANY(%(names)s::text[]);
