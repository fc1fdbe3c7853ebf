"""Backpressure (docs/beyond.md#backpressure): the trigger that bounds a session's queued leads,
and the service's settings kept in the database.

``leads_max_queued`` fires after every insert statement on ``leads`` (the API's push,
``leaseq_push`` in a producer's transaction, a schedule's tick: every door). For each session
of the inserted rows with a bound (its ``max_queued``, else the service's, from
``leaseq_config``) it takes the session's advisory lock, held to the commit, and reads the
session's queued count in a new snapshot: every push committed before is in it, and this
statement's own rows (``leads_count_insert`` fires first: triggers of one event fire in name
order). Past the bound it raises ``QUOTA_SQLSTATE``, so none of the statement's rows is
stored. Two concurrent pushes cannot overshoot: the second reads the count after the first
committed. A session without a bound costs one read of ``leaseq_config`` and one of its
settings per insert statement, and no lock.

On a Citus cluster revision 0025 puts the same decision on every shard of ``leads``: the
function there reads the colocated shards of ``session_settings`` and ``lead_counts`` and the
node's copy of ``leaseq_config`` by their shard names, and takes the lock on the shard's node,
where every push of the session meets.
"""

from __future__ import annotations

from app.store.statements._build import statement

# The SQLSTATE a push past max_queued raises (a class of leaseq's own: no PostgreSQL error
# has it), answered 429 quota_exceeded.
QUOTA_SQLSTATE = "LQ429"

# The trigger function of leads_max_queued (revision 0019; app.store.schema builds the same).
MAX_QUEUED_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_max_queued() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    fallback integer;
    bound record;
    queued bigint;
BEGIN
    SELECT value::integer INTO fallback FROM leaseq_config WHERE name = 'max_queued';
    FOR bound IN
        SELECT pushed.session, pushed.n, coalesce(s.max_queued, fallback) AS cap
        FROM (SELECT session, count(*) AS n FROM new_rows WHERE status = 'queued'
              GROUP BY session) AS pushed
        LEFT JOIN session_settings AS s ON s.session = pushed.session
        WHERE coalesce(s.max_queued, fallback) IS NOT NULL
        ORDER BY pushed.session
    LOOP
        -- One push of a bounded session at a time from here to its commit: the count read
        -- next (a new snapshot) holds every push committed before, and this one's rows.
        PERFORM pg_advisory_xact_lock(
            hashtextextended('leaseq.max_queued ' || bound.session, 0));
        SELECT coalesce(sum(c.n), 0) INTO queued FROM lead_counts AS c
        WHERE c.session = bound.session AND c.status = 'queued';
        IF queued > bound.cap THEN
            RAISE EXCEPTION 'a push of % would pass the max_queued % of session % (% queued)',
                bound.n, bound.cap, bound.session, queued - bound.n
                USING ERRCODE = 'LQ429';
        END IF;
    END LOOP;
    RETURN NULL;
END
$$
"""

MAX_QUEUED_TRIGGER = (
    "CREATE TRIGGER leads_max_queued AFTER INSERT ON leads REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_max_queued()"
)


def _config_put() -> str:
    return """
WITH gone AS (
    DELETE FROM leaseq_config WHERE name = %(name)s AND %(value)s::text IS NULL
)
INSERT INTO leaseq_config AS c (name, value, updated_at)
SELECT %(name)s, %(value)s::text, now() WHERE %(value)s::text IS NOT NULL
ON CONFLICT (name) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at
"""


@statement(_config_put)
def config_put(*, name: str, value: str | None) -> None:
    """Keep a setting of the service in the database (``value`` None: forget it), for what
    runs without an API process: the trigger leads_max_queued reads ``max_queued``."""


def _config_get() -> str:
    return "SELECT name, value FROM leaseq_config WHERE name = ANY(%(names)s::text[])"


@statement(_config_get)
def config_get(*, names: list[str]) -> None:
    """The settings of the service kept in the database under ``names``: a read, which a
    Citus cluster answers from the node connected to (``leaseq_config`` is a reference
    table), so a stopped worker node does not keep it from being read, as it would a write."""
