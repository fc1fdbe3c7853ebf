"""``leaseq_push`` on a Citus cluster: one routed insert, its ledger row by the row trigger.

Revision 0007's function writes the lead and its ``pushed`` row in one statement with a
data-modifying CTE. On a cluster Citus plans such a statement in pieces and sends their
results to every worker node, so a push inside the producer's transaction (and a
schedule's tick, which pushes through this function) needed every node up, and took a
round of them each time. Revision 0016's row trigger writes the ``pushed`` row on the
lead's shard for an insert that names its event (``leads.ledger_event``): here the
function's insert names it, and is one statement routed to the session's shard. The rest
is 0007's: the same checks and errors, the same key handling, the same NOTIFY (sent where
the function runs: on the node the producer is connected to).

On one PostgreSQL this revision changes nothing (0007's function stays: its CTE is one
statement there).

Frozen like every revision: nothing here reads ``app``.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-17
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SHARD_PUSH_FUNCTION = """
CREATE OR REPLACE FUNCTION leaseq_push(
    session text,
    payload jsonb,
    priority integer DEFAULT 0,
    key text DEFAULT NULL,
    delay_s double precision DEFAULT 0,
    max_attempts integer DEFAULT NULL
) RETURNS bigint LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    stamp timestamptz := statement_timestamp();
    new_id bigint;
    pushes integer;
BEGIN
    IF session IS NULL OR session !~ '^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$' THEN
        RAISE EXCEPTION 'session: must match ^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$'
            USING ERRCODE = '22023';
    END IF;
    IF payload IS NULL OR jsonb_typeof(payload) <> 'object' THEN
        RAISE EXCEPTION 'payload: must be a JSON object' USING ERRCODE = '22023';
    END IF;
    IF octet_length(payload::text) > 262144 THEN
        RAISE EXCEPTION 'payload: must be at most % bytes as JSON text (is %)',
            262144, octet_length(payload::text) USING ERRCODE = '22023';
    END IF;
    IF jsonb_path_exists(payload, 'strict $.**{64 to last} ? '
                                  '(@.type() == "object" || @.type() == "array")') THEN
        RAISE EXCEPTION 'payload: must not nest arrays and objects deeper than 64'
            USING ERRCODE = '22023';
    END IF;
    IF priority IS NULL THEN
        RAISE EXCEPTION 'priority: must be an integer' USING ERRCODE = '22023';
    END IF;
    IF key IS NOT NULL AND NOT length(key) BETWEEN 1 AND 512 THEN
        RAISE EXCEPTION 'key: must be a string of 1 to 512 characters, or null'
            USING ERRCODE = '22023';
    END IF;
    IF delay_s IS NULL OR NOT (delay_s >= 0 AND delay_s <= 31622400) THEN
        RAISE EXCEPTION 'delay_s: must be a number of seconds >= 0 and <= 31622400'
            USING ERRCODE = '22023';
    END IF;
    IF max_attempts IS NOT NULL AND NOT max_attempts BETWEEN 1 AND 10000 THEN
        RAISE EXCEPTION 'max_attempts: must be an integer from 1 to 10000, or null'
            USING ERRCODE = '22023';
    END IF;
    LOOP
        INSERT INTO leads (id, session, priority, payload, key, max_attempts,
                           available_at, scheduled, created_at, updated_at, ledger_event)
        OVERRIDING SYSTEM VALUE
        VALUES (nextval('leads_id_seq'), leaseq_push.session, leaseq_push.priority,
                leaseq_push.payload, leaseq_push.key,
                coalesce(leaseq_push.max_attempts, 5),
                stamp + make_interval(secs => leaseq_push.delay_s), leaseq_push.delay_s > 0,
                stamp, stamp, 'pushed')
        ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
        RETURNING id INTO new_id;
        EXIT WHEN new_id IS NOT NULL;
        -- The key is in the session already: its lead's id, and nothing else is done.
        SELECT id INTO new_id FROM leads
        WHERE session = leaseq_push.session AND key = leaseq_push.key;
        IF new_id IS NOT NULL THEN
            RETURN new_id;
        END IF;
        -- That lead was deleted (pruned) in between: push again.
    END LOOP;
    IF delay_s = 0 THEN
        pushes := coalesce(nullif(current_setting('leaseq.pushes', true), ''), '0')::integer + 1;
        PERFORM set_config('leaseq.pushes', pushes::text, true);
        PERFORM pg_notify('leaseq_queued', session || ' ' || pushes);
    END IF;
    RETURN new_id;
END
$$
"""


def _on_citus() -> bool:
    """Whether this database is a Citus node (offline SQL is for one PostgreSQL)."""
    if op.get_context().as_sql:
        return False
    found = op.get_bind().execute(
        sa.text("SELECT EXISTS (SELECT FROM pg_extension WHERE extname = 'citus')")
    )
    return bool(found.scalar())


def upgrade() -> None:
    if _on_citus():
        op.execute(SHARD_PUSH_FUNCTION)


def downgrade() -> None:
    if _on_citus():  # 0007's function again, as that revision wrote it
        script = op.get_context().script
        assert script is not None
        op.execute(script.get_revision("0007").module.PUSH_FUNCTION)
