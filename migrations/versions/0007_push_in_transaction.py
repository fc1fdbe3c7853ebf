"""A push inside the producer's own transaction: the SQL function ``leaseq_push``.

``leaseq_push(session, payload, priority, key, delay_s, max_attempts)`` does
for one lead what the service's push does (``app.queue.Queue.push``): the
same checks (SQLSTATE 22023, naming the argument), the service's default
``max_attempts``, the dedupe on (session, key) (a key already in the session
answers its lead's id and changes nothing), a delayed lead kept scheduled,
the ``pushed`` row of the ledger and the NOTIFY that wakes waiting leases
(``app.listener``: ``session n``). The counts follow by the triggers of
0004. Everything it writes is part of the caller's transaction, so the lead
exists if and only if that transaction commits; NOTIFY is delivered at
commit. A function only: no table changes, nothing to backfill.

Frozen like every revision: nothing here reads ``app.db``.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-07
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

PUSH_FUNCTION = """
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
        WITH inserted AS (
            INSERT INTO leads (id, session, priority, payload, key, max_attempts,
                               available_at, scheduled, created_at, updated_at)
            OVERRIDING SYSTEM VALUE
            VALUES (nextval('leads_id_seq'), leaseq_push.session, leaseq_push.priority,
                    leaseq_push.payload, leaseq_push.key,
                    coalesce(leaseq_push.max_attempts, 5),
                    stamp + make_interval(secs => leaseq_push.delay_s), leaseq_push.delay_s > 0,
                    stamp, stamp)
            ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
            RETURNING id, session, status, attempts, owner
        ),
        ledger AS (
            INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at)
            SELECT id, session, 'pushed', status, attempts, owner, stamp FROM inserted
        )
        SELECT id INTO new_id FROM inserted;
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

SIGNATURE = "leaseq_push(text, jsonb, integer, text, double precision, integer)"


def upgrade() -> None:
    op.execute(PUSH_FUNCTION)


def downgrade() -> None:
    op.execute(f"DROP FUNCTION IF EXISTS {SIGNATURE}")
