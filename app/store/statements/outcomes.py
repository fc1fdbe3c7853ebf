"""Waiting for a lead's outcome, in SQL: the watches, and the NOTIFY of leads that ended.

A request held by ``GET /leads/{id}?wait_s=n`` (``app.domain.outcome``) holds
no connection while it waits: the listener (``app.store.listener``) wakes it
on a notification of ``ENDED_CHANNEL``, whose payload lists the ids of leads
that became terminal (``*`` for many: every waiter looks again).

A NOTIFY is not free: PostgreSQL serializes the commits of notifying
transactions (one lock on the database until each commit is flushed), so a
NOTIFY in every completion halved the completions four connections commit per
second (bench figures in docs/design.md). So a completion notifies only when
someone may wait for one of its leads: each waiting request writes a row of
``lead_waits`` before it waits and deletes it after (the waits of one process that
begin or end together share one statement each), and the
statement-level trigger ``leads_ended`` on ``leads`` (revision 0010) looks
there first. With nobody waiting it reads one empty table and sends nothing;
with waiters, one NOTIFY per statement, never one per lead. The trigger sees
every way a lead ends (a completion, a release or sweep on the last attempt,
a cancel) without a word in those statements. A Citus cluster has no such trigger (a
NOTIFY on a shard fails a two-phase commit): there those statements send it themselves,
from their final SELECT (``ended_notice``).

The lead is read after its watch committed, so a completion whose trigger
ran before the watch was there is found by that read, unless it commits only
after it (the instant between a trigger and its commit); the waiter then
finds the outcome at its next look: the settling look, ``SETTLE_S`` after the read
(``app.domain.outcome``), or its poll. A watch left by a process
that died is deleted by the pruner once its wait is over.

Knows nothing of HTTP; imports nothing of ``app``, only the model's statuses.
"""

from __future__ import annotations

from app.store.statements._build import statement
from leaseq.model import FINAL_STATUSES

ENDED_CHANNEL = "leaseq_ended"
# Ids named in one notification at most (19 digits and a space each stay well under
# PostgreSQL's 8,000 bytes of payload); beyond, the payload is WAKE_ALL.
MAX_NOTIFIED_IDS = 350
WAKE_ALL = "*"

_TERMINAL = "(" + ", ".join(repr(status) for status in FINAL_STATUSES) + ")"

# The trigger function of leads_ended (revision 0010; app.store.schema builds the same).
ENDED_FUNCTION = f"""
CREATE OR REPLACE FUNCTION leaseq_notify_ended() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
    ids text;
BEGIN
    -- Nobody waits for any lead: nothing to say (one look at an empty table).
    IF NOT EXISTS (SELECT FROM lead_waits) THEN
        RETURN NULL;
    END IF;
    SELECT count(*), string_agg(ended.id::text, ' ') INTO n, ids
    FROM (SELECT DISTINCT e.id FROM new_rows AS e JOIN lead_waits AS w ON w.lead_id = e.id
          WHERE e.status IN {_TERMINAL} LIMIT {MAX_NOTIFIED_IDS + 1}) AS ended;
    IF n > {MAX_NOTIFIED_IDS} THEN
        PERFORM pg_notify('{ENDED_CHANNEL}', '{WAKE_ALL}');
    ELSIF n > 0 THEN
        PERFORM pg_notify('{ENDED_CHANNEL}', ids);
    END IF;
    RETURN NULL;
END
$$
"""

ENDED_TRIGGER = (
    "CREATE TRIGGER leads_ended AFTER UPDATE ON leads REFERENCING NEW TABLE AS new_rows "
    "FOR EACH STATEMENT EXECUTE FUNCTION leaseq_notify_ended()"
)


def ended_notice(source: str) -> str:
    """The column ``ended_notified`` of a statement that may end leads (the rows of
    ``source``, with ``id`` and ``status``): the ``leads_ended`` trigger's NOTIFY, sent by
    the statement itself when it is given ``notify_ended`` (a Citus cluster, where the
    trigger is off: docs/scaling.md, "Outcome waits on a cluster"). NULL when it sent none.

    In the final SELECT the NOTIFY is sent where that SELECT runs: on the shard's node for a
    statement routed to one shard, on the door for one that spans nodes (which commits with
    two-phase commit, which refuses a transaction that notified on a prepared node). A
    boolean, not ``void``: Citus cannot keep a ``void`` column in an intermediate result."""
    return f"""(SELECT pg_notify('{ENDED_CHANNEL}',
               CASE WHEN count(*) > {MAX_NOTIFIED_IDS} THEN '{WAKE_ALL}'
                    ELSE string_agg(ended.id::text, ' ') END) IS NULL
        FROM (SELECT DISTINCT e.id FROM {source} AS e JOIN lead_waits AS w ON w.lead_id = e.id
              WHERE %(notify_ended)s::bool AND e.status IN {_TERMINAL}
              LIMIT {MAX_NOTIFIED_IDS + 1}) AS ended
        HAVING count(*) > 0) AS ended_notified"""


def _watch() -> str:
    return """
INSERT INTO lead_waits (id, lead_id, until)
SELECT id, lead_id, now() + make_interval(secs => wait_s)
FROM unnest(%(ids)s::uuid[], %(lead_ids)s::bigint[], %(waits)s::float8[]) AS r(id, lead_id, wait_s)
"""


@statement(_watch)
def watch(*, ids: list[str], lead_ids: list[int], waits: list[float]) -> None:
    """Say that requests wait for leads (``ids``: the waiters', ``lead_ids``, until ``waits``
    seconds from now)."""


def _watched() -> str:
    return "SELECT l.* FROM leads AS l WHERE l.id = ANY(%(lead_ids)s::bigint[])"


@statement(_watched)
def watched(*, lead_ids: list[int]) -> None:
    """The leads watched, read after their watches committed: a lead that ended before a
    trigger could see its watch is found ended here."""


def _unwatch() -> str:
    return "DELETE FROM lead_waits WHERE id = ANY(%(ids)s::uuid[])"


@statement(_unwatch)
def unwatch(*, ids: list[str]) -> None:
    """Those waits are over."""


def _forget_stale_watches() -> str:
    return "DELETE FROM lead_waits WHERE until < now() - interval '1 minute'"


@statement(_forget_stale_watches)
def forget_stale_watches() -> None:
    """Watches whose wait ended long ago (left by a process that stopped while waiting)."""
