-- The statements of app.store.statements.fences, as PostgreSQL gets them.
-- Written by `python -m app.store.render`; do not edit.

-- ========================================================================================
-- fence_key
--
-- The key the service signs fences with when ``LEASEQ_FENCE_KEYS`` names none: the one
-- kept in the database, or ``generated`` (a new random key) stored as it, whichever process
-- asked first.
--
-- parameters: generated

-- name: fence_key
WITH made AS (
    INSERT INTO leaseq_config (name, value) VALUES ('fence_key', %(generated)s)
    ON CONFLICT (name) DO NOTHING
    RETURNING value
)
SELECT value FROM made
UNION ALL
SELECT value FROM leaseq_config WHERE name = 'fence_key'
LIMIT 1;
