"""A lead's life after its lease: push, renew, complete, release, sweep, the operator's
verbs (cancel, retry, the replay of a session's dead letters), prune and the read by id.

``app.domain.queue`` runs them. Those that may end a lead (``complete_many``, ``release``,
``sweep``, ``cancel``, and ``complete_and_lease`` of ``lease``) take ``notify_ended``: they
then send the NOTIFY of the watched leads they ended themselves (``outcomes.ended_notice``).
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import BOTH, statement
from app.store.statements.fragments import (
    LAST_ATTEMPT,
    LEAD_COLUMNS,
    NOTIFY_CHANNEL,
    NOW,
    ONLY_LOCKED,
    TERMINAL,
    busy_answer,
    ledger_rows,
    locked_rows,
    logged,
    notify,
    only_session,
    plus_seconds,
    qualified,
    valid_lease,
)
from app.store.statements.outcomes import ended_notice


def _push(ledger: bool) -> str:
    return f"""
WITH input AS (
    SELECT * FROM unnest(
        %(priorities)s::int[], %(payloads)s::text[], %(keys)s::text[],
        %(depths)s::int[], %(parent_ids)s::bigint[], %(max_attempts)s::int[],
        %(delays)s::float8[], %(concurrency_keys)s::text[], %(max_runtimes)s::int[],
        %(traceparents)s::text[], %(has_dependents)s::bool[]
    ) WITH ORDINALITY
        AS t(priority, payload, key, depth, parent_id, max_attempts, delay_s, concurrency_key,
             max_runtime_s, traceparent, has_dependents, ord)
),
numbered AS (
    -- A volatile output column is computed after the sort, so ids follow ord.
    SELECT nextval('leads_id_seq') AS id, * FROM input ORDER BY ord
),
inserted AS (
    INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                       available_at, scheduled, created_at, updated_at, concurrency_key,
                       max_runtime_s, traceparent, has_dependents, ledger_event)
    OVERRIDING SYSTEM VALUE
    SELECT id, %(session)s, priority, CAST(payload AS jsonb), key, depth, parent_id, max_attempts,
           {plus_seconds(NOW, "delay_s")}, delay_s > 0, {NOW}, {NOW}, concurrency_key,
           max_runtime_s, traceparent, has_dependents,
           CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END
    FROM numbered ORDER BY key
    ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id, key, session, status, attempts, owner, scheduled
){ledger_rows("inserted", "pushed", enabled=ledger)}
-- The uncorrelated subquery runs once, and only when something was inserted; it
-- counts the leads available now (a delayed one wakes nobody).
SELECT id, key,
       (SELECT {notify("%(session)s || ' ' || count(*)")}
        FROM inserted WHERE NOT scheduled) AS notified
FROM inserted ORDER BY id
"""


@statement(_push, ledger=BOTH)
def push(
    *,
    session: str,
    concurrency_keys: list[str | None],
    delays: list[float],
    depths: list[int],
    has_dependents: list[bool],
    keys: list[str | None],
    max_attempts: list[int],
    max_runtimes: list[int | None],
    parent_ids: list[int | None],
    payloads: list[str],
    priorities: list[int],
    traceparents: list[str | None],
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
) -> None:
    """Insert a batch; keys already in the session are skipped (ON CONFLICT DO NOTHING).

    Ids are drawn in input order, so they ascend in that order; the caller maps
    returned ids back to input positions by that. Rows are inserted in key
    order: an insert waits for a concurrent one of the same key, so two pushes
    taking shared keys in different orders would wait on each other (deadlock).
    """


# The most rows one ``push_rows`` statement inserts: a push of more is several, in one
# transaction (a text per power of two up to this, so the texts stay few and short: each fits
# psycopg's cache of parsed texts, app.store.pool). Measured on the test cluster, a push of
# 1,000 leads took 0.4 to 0.5 s in statements of 16 rows and 0.8 s in statements of 128:
# Citus's cost per row grows with the rows of one multi-row INSERT.
PUSH_ROWS_MAX = 16


def _push_rows(rows: int) -> str:
    # Row k reads position k of each array: one text per count of rows, the same parameters.
    def at(array: str, cast: str, k: int) -> str:
        return f"(%({array})s::{cast}[])[{k}]"

    values = ",\n".join(
        f"""    ({at("ids", "bigint", k)}, %(session)s, {at("priorities", "int", k)},
     CAST({at("payloads", "text", k)} AS jsonb), {at("keys", "text", k)},
     {at("depths", "int", k)}, {at("parent_ids", "bigint", k)}, {at("max_attempts", "int", k)},
     {plus_seconds(NOW, at("delays", "float8", k))}, {at("delays", "float8", k)} > 0, {NOW}, {NOW},
     {at("concurrency_keys", "text", k)}, {at("max_runtimes", "int", k)},
     {at("traceparents", "text", k)}, {at("has_dependents", "bool", k)},
     CASE WHEN %(ledger_by_row)s::bool THEN 'pushed' END)"""
        for k in range(1, rows + 1)
    )
    return f"""
INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                   available_at, scheduled, created_at, updated_at, concurrency_key,
                   max_runtime_s, traceparent, has_dependents, ledger_event)
OVERRIDING SYSTEM VALUE
VALUES
{values}
ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
RETURNING id, key, NOT scheduled AS available
"""


# Rendered for one and two rows; the queue builds the counts it needs (powers of two).
@statement(_push_rows, rows=(1, 2))
def push_rows(
    *,
    session: str,
    ids: list[int],
    concurrency_keys: list[str | None],
    delays: list[float],
    depths: list[int],
    has_dependents: list[bool],
    keys: list[str | None],
    max_attempts: list[int],
    max_runtimes: list[int | None],
    parent_ids: list[int | None],
    payloads: list[str],
    priorities: list[int],
    traceparents: list[str | None],
    now: datetime | None,
    ledger_by_row: bool = False,
    rows: int,
) -> None:
    """``push`` on a Citus cluster: ``rows`` leads of one session, with the ids drawn before
    (``lead_ids``), in one multi-row ``INSERT … VALUES``, which Citus routes to the session's
    shard (an ``INSERT … SELECT``, as ``push``'s, it runs through the coordinator instead).
    The ledger's ``pushed`` rows are written on the shard by the row trigger of revision
    0016 (``ledger_by_row``), and the caller notifies (``pushed_notice``). The caller sorts
    the rows by key (as ``push`` inserts them) and gives each its id in input order."""


def _lead_ids() -> str:
    return "SELECT nextval('leads_id_seq') AS id FROM generate_series(1, %(n)s) ORDER BY 1"


@statement(_lead_ids)
def lead_ids(*, n: int) -> None:
    """``n`` new lead ids, ascending: the ids of a push on a cluster (``push_rows``), drawn on
    the node the service is connected to (its own range of the sequence; no shard is read)."""


def _pushed_notice() -> str:
    payload = "%(session)s || ' ' || %(n)s::text"
    return f"SELECT {notify(payload)} AS notified"


@statement(_pushed_notice)
def pushed_notice(*, session: str, n: int) -> None:
    """The notification of ``n`` leads of ``session`` pushed and available now, sent by the
    node the service is connected to (where ``push``'s own is sent): after ``push_rows``."""


def _existing_keys() -> str:
    return "SELECT key, id FROM leads WHERE session = %(session)s AND key = ANY(%(keys)s::text[])"


@statement(_existing_keys)
def existing_keys(*, session: str, keys: list[str | None]) -> None:
    """Ids of keys already present in a session (the duplicates of a push)."""


def _renew_many(skip_locked: bool, routed: bool) -> str:
    answer = (
        busy_answer("renewed", "req", "renewed.*", routed=routed)
        if skip_locked
        else "\nSELECT * FROM renewed"
    )
    return f"""
WITH req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(ttls)s::float8[], %(checkpoints)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, ttl_s, checkpoint, ord)
),{locked_rows(routed) if skip_locked else ""}
renewed AS (
    UPDATE leads AS l
    SET lease_expires_at = least({plus_seconds(NOW, "req.ttl_s")}, l.runtime_ends_at),
        updated_at = {NOW}, checkpoint = coalesce(CAST(req.checkpoint AS jsonb), l.checkpoint)
    FROM req
    WHERE l.id = req.lead_id AND {valid_lease(routed)}{ONLY_LOCKED if skip_locked else ""}
    RETURNING l.id, req.token, l.lease_expires_at, {_GRANTED} AS ttl_s, l.attempts AS attempt
){answer}"""


# The seconds a renewal granted: its ttl, or less where the maximum runtime ends first (a
# lease never lasts past it, so a renewal after it finds the lease expired, lease_lost).
_GRANTED = f"""CASE WHEN l.runtime_ends_at < {plus_seconds(NOW, "req.ttl_s")}
         THEN extract(epoch FROM l.runtime_ends_at - {NOW})::float8 ELSE req.ttl_s END"""


@statement(_renew_many, skip_locked=BOTH, routed=BOTH)
def renew_many(
    *,
    checkpoints: list[str | None],
    ids: list[int],
    tokens: list[str],
    ttls: list[float],
    session: str | None = None,
    now: datetime | None,
    skip_locked: bool = False,
    routed: bool = False,
) -> None:
    """Extend each valid lease of the batch; the rows returned are the ones that were valid.

    An item's checkpoint (JSON text; NULL: none) replaces the lead's, which otherwise stays.
    ``skip_locked`` (group commit): a lease whose row another transaction holds is left as it
    is and named in ``busy`` (``busy_answer``) instead of waited for. ``routed``: every lease
    is of ``session`` (its token's), which routes the statement to one shard on a cluster.
    """


def _runtime_ran_out(routed: bool) -> str:
    return f"""
SELECT l.id FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token
  AND l.runtime_ends_at <= {NOW} {only_session(routed, "l.session")}
"""


@statement(_runtime_ran_out, routed=BOTH)
def runtime_ran_out(
    *,
    ids: list[int],
    tokens: list[str],
    now: datetime | None,
    session: str | None = None,
    routed: bool = False,
) -> None:
    """Which of the given leases (lead id, token) ended at their maximum runtime, and are not
    yet swept: why their renewal was refused. ``routed``: the leases are of ``session``
    (their tokens'), as in ``renew_many``."""


def _complete_many(ledger: bool, lean: bool, skip_locked: bool, routed: bool) -> str:
    columns = ("item" if lean else f"{LEAD_COLUMNS}, item") + f", {ended_notice('completed')}"
    answer = (
        busy_answer("completed", "input", columns, routed=routed)
        if skip_locked
        else f"\nSELECT {columns} FROM completed"
    )
    return f"""
WITH input AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[],
        %(results)s::text[], %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
req AS (
    SELECT DISTINCT ON (lead_id, token) * FROM input ORDER BY lead_id, token, ord
),{locked_rows(routed) if skip_locked else ""}
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = {NOW}, {logged("completed")}
    FROM req
    WHERE l.id = req.lead_id AND {valid_lease(routed)}{ONLY_LOCKED if skip_locked else ""}
    RETURNING l.*, req.ord - 1 AS item
){ledger_rows("completed", "completed", enabled=ledger)}{answer}"""


@statement(_complete_many, ledger=BOTH, lean=BOTH, skip_locked=BOTH, routed=BOTH)
def complete_many(
    *,
    errors: list[str | None],
    ids: list[int],
    results: list[str | None],
    statuses: list[str],
    tokens: list[str],
    session: str | None = None,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
    lean: bool = False,
    skip_locked: bool = False,
    routed: bool = False,
) -> None:
    """Finish each valid lease of the batch with its status; returns the leads that finished.

    A lease given twice in one batch counts once, at its first item (``item``,
    from 0): an UPDATE joined to two matching rows would apply either one.
    ``lean`` returns only ``item``, for callers that need no lead back (a quarter
    less time per batch of 100 than reading every column back). The lead keeps
    the lease's token (never shown), so ``completed_already`` knows a retry.
    ``skip_locked`` (group commit): a lease whose row another transaction holds is left
    as it is and named, with every item of it, in ``busy`` (``busy_answer``). ``routed``:
    every lease is of ``session``, as in ``renew_many``.
    """


def _completed_already(lean: bool, routed: bool) -> str:
    columns = "req.item" if lean else f"{qualified(LEAD_COLUMNS)}, req.item"
    return f"""
SELECT {columns}
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(items)s::int[])
    AS req(lead_id, token, status, item), leads AS l
WHERE l.id = req.lead_id AND l.lease_token = req.token
  AND l.status = req.status AND l.status IN {TERMINAL} {only_session(routed, "l.session")}
"""


@statement(_completed_already, lean=BOTH, routed=BOTH)
def completed_already(
    *,
    ids: list[int],
    items: list[int],
    statuses: list[str],
    tokens: list[str],
    session: str | None = None,
    lean: bool = False,
    routed: bool = False,
) -> None:
    """Which of the given items name a lead their very lease already finished with that status.

    A completion retried after its answer was lost is answered as the first
    was, and changes nothing. A statement of its own, run after
    ``complete_many`` for the items it did not complete: its snapshot sees a
    completion that committed while that one waited on the row. ``item`` is
    the caller's position of each item; ``lean`` returns only it. ``routed``: the leases
    are of ``session`` (their tokens'), as in ``complete_many``.
    """


def _release(ledger: bool, routed: bool) -> str:
    # A throttled release, or one of a lead its holder never started, spends no attempt.
    uncounted = "(%(throttle_s)s::float8 IS NOT NULL OR %(unstarted)s::boolean)"
    last = f"{LAST_ATTEMPT} AND NOT {uncounted}"
    return f"""
WITH req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token, %(error)s::text AS error
),
released AS (
    UPDATE leads AS l
    SET status = CASE WHEN {last} THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN {last}
                     THEN 'released on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                          || coalesce(': ' || req.error, '')
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL,
        available_at = CASE WHEN {last} THEN l.available_at
                            ELSE {plus_seconds(NOW, "%(delay_s)s::float8")} END,
        scheduled = NOT ({last}) AND %(delay_s)s::float8 > 0,
        throttles = l.throttles + CASE WHEN {uncounted} THEN 1 ELSE 0 END,
        updated_at = {NOW}, {logged("released")}
    FROM req
    WHERE l.id = req.lead_id AND {valid_lease(routed)}
    RETURNING l.*
){"" if routed else f",{_THROTTLED}"}{ledger_rows("released", "released", enabled=ledger)}
SELECT {LEAD_COLUMNS},
       CASE WHEN status = 'queued' AND NOT scheduled AND %(throttle_s)s::float8 IS NULL
            THEN {notify("session || ' 1'")} END AS notified,
       {ended_notice("released")}
FROM released
"""


# A throttled release pauses its lead's session (a row of its own if it had none). Routed
# (on a cluster) the release leaves it to ``throttle_session`` in its transaction: an
# ``INSERT … SELECT`` from a CTE is not a router statement.
_THROTTLED = f"""
throttled AS (
    INSERT INTO session_settings AS s (session, paused_until, updated_at)
    SELECT released.session, {plus_seconds(NOW, "cooldown.s")}, {NOW}
    FROM released JOIN (SELECT %(throttle_s)s::float8 AS s) AS cooldown ON cooldown.s IS NOT NULL
    ON CONFLICT (session) DO UPDATE
        SET paused_until = greatest(s.paused_until, excluded.paused_until)
)"""


@statement(_release, ledger=BOTH, routed=BOTH)
def release(
    *,
    delay_s: float,
    error: str | None,
    lead_id: int,
    token: str,
    throttle_s: float | None = None,
    unstarted: bool = False,
    session: str | None = None,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
    routed: bool = False,
) -> None:
    """Give a valid lease back: queued again after ``delay_s``, the attempt already counted.

    On the last attempt (``attempts`` reached ``max_attempts``) the lead fails
    instead (docs/contract.md#invariant-7), with an error that says why: the release's own
    ``error`` when given, after "released on attempt n of m".

    ``throttle_s`` (NULL: none): a worker's cooldown. The lead is queued whatever its
    attempt, the lease is not counted against ``max_attempts`` (``throttles``), and its
    session is paused until now + throttle_s, or later if it already was (``_THROTTLED``),
    all in this statement, so only a valid lease pauses its session. ``unstarted``: the
    holder never started the lead (prefetched, or taken by a long poll whose client left):
    the lease is not counted against ``max_attempts`` either (``throttles``), so giving
    back a lead that never ran cannot fail it. ``routed``: the lease is of ``session`` (its
    token's), as in ``renew_many``; the session's pause is then ``throttle_session``, in the
    same transaction, run when this one released the lease.
    """


def _throttle_session() -> str:
    return f"""
INSERT INTO session_settings AS s (session, paused_until, updated_at)
VALUES (%(session)s, {plus_seconds(NOW, "%(throttle_s)s::float8")}, {NOW})
ON CONFLICT (session) DO UPDATE
    SET paused_until = greatest(s.paused_until, excluded.paused_until)
"""


@statement(_throttle_session)
def throttle_session(*, session: str, throttle_s: float, now: datetime | None) -> None:
    """Pause ``session`` until now + ``throttle_s``, or later if it already was: a throttled
    release's pause on a cluster, after the routed ``release`` in its transaction (one
    insert of one session, routed to its shard)."""


def _sweep(ledger: bool, scoped: bool) -> str:
    # Scoped, the UPDATE names the session too: routed to one partition or shard (docs/scaling.md).
    return f"""
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= {NOW} {only_session(scoped)}
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN {LAST_ATTEMPT} THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN {LAST_ATTEMPT}
                     THEN 'lease expired on attempt ' || l.attempts::text
                          || ' of ' || l.max_attempts::text
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = {NOW}, updated_at = {NOW},
        {logged("expired")}
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= {NOW}
          {only_session(scoped, "l.session")}
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
){ledger_rows("swept", "expired", expires_at="expired_at", enabled=ledger)}
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('{NOTIFY_CHANNEL}', s.session || ' ' || s.n))
     FROM (SELECT session, count(*) AS n FROM swept WHERE status = 'queued' GROUP BY session)
         AS s) AS notified,
    {ended_notice("swept")}
FROM swept
"""


@statement(_sweep, ledger=BOTH, scoped=BOTH)
def sweep(
    *,
    session: str | None = None,
    limit: int,
    now: datetime | None,
    ledger: bool,
    scoped: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
) -> None:
    """Requeue up to ``limit`` expired leases (one session's when scoped); at max_attempts, fail.

    SKIP LOCKED: a lease whose row a completion holds is left to that
    completion; the UPDATE re-checks status and expiry so a lease completed
    just before is never moved back (River #1302).
    """


def cancelled_set() -> str:
    """The SET clause of a cancelled lead (``cancel``, ``cancel_leads``): failed with the
    error "cancelled", its lease gone, and a blocked lead's wait stopped."""
    return f"""status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, parked = false, waiting_on = 0,
        available_at = CASE WHEN waiting_on > 0 THEN coalesce(ready_at, {NOW})
                       ELSE available_at END,
        updated_at = {NOW}, {logged("cancelled")}"""


def _cancel(ledger: bool, routed: bool) -> str:
    return f"""
WITH cancelled AS (
    UPDATE leads
    SET {cancelled_set()}
    WHERE id = %(lead_id)s {only_session(routed)} AND status IN ('queued', 'leased')
    RETURNING *
){ledger_rows("cancelled", "cancelled", enabled=ledger)}
SELECT {LEAD_COLUMNS}, {ended_notice("cancelled")} FROM cancelled
"""


@statement(_cancel, ledger=BOTH, routed=BOTH)
def cancel(
    *,
    lead_id: int,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    notify_ended: bool = False,
    routed: bool = False,
    session: str | None = None,
) -> None:
    """An operator fails a queued or leased lead; its holder's next renew or complete loses.
    A lead blocked by dependencies stops waiting (``waiting_on`` 0, its pushed-for time
    back), as a lead failed by a parent does: a failed lead waits on nothing. ``routed``:
    the lead is of ``session`` (found by ``lead_sessions_on_nodes``), which on a Citus
    cluster routes the statement to that session's shard alone."""


def _requeue_failed(alias: str) -> str:
    """The SET clause of a failed lead queued again (``retry``, ``retry_failed``): room for one
    more attempt, ``attempts`` (a fencing number) kept; ``alias`` qualifies the columns."""
    return (
        f"status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = {NOW},"
        f"\n        max_attempts = greatest({alias}max_attempts, {alias}attempts + 1), "
        f"updated_at = {NOW}, {logged('retried')}"
    )


def _retry(ledger: bool, routed: bool) -> str:
    return f"""
WITH retried AS (
    UPDATE leads
    SET {_requeue_failed("")}
    WHERE id = %(lead_id)s {only_session(routed)} AND status = 'failed'
    RETURNING *
){ledger_rows("retried", "retried", enabled=ledger)}
SELECT {LEAD_COLUMNS}, {notify("session || ' 1'")} AS notified
FROM retried
"""


@statement(_retry, ledger=BOTH, routed=BOTH)
def retry(
    *,
    lead_id: int,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
    routed: bool = False,
    session: str | None = None,
) -> None:
    """Dead-letter replay: a failed lead is queued again with room for one more attempt.

    ``attempts`` is a fencing number and never goes down; ``max_attempts`` is
    raised when needed so the replayed lead gets its attempt. ``routed``: as ``cancel``.
    """


def _prune(scoped: bool) -> str:
    return f"""
WITH doomed AS (
    SELECT id, session FROM leads
    WHERE status IN {TERMINAL}
      AND updated_at < {NOW} - make_interval(secs => %(older_than_s)s::float8)
      {only_session(scoped)}
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
events AS (
    DELETE FROM lead_events WHERE lead_id IN (SELECT id FROM doomed)
),
edges AS (
    -- A parent that ended has no dependent left waiting on it (each was counted down or
    -- failed when it ended): its edges go with it.
    DELETE FROM lead_dependencies AS d USING doomed
    WHERE d.session = doomed.session AND d.after_id = doomed.id
),
pruned AS (
    DELETE FROM leads WHERE id IN (SELECT id FROM doomed) RETURNING id
)
SELECT count(*) AS pruned FROM pruned
"""


@statement(_prune, scoped=BOTH)
def prune(
    *,
    session: str | None = None,
    limit: int,
    older_than_s: float,
    now: datetime | None,
    scoped: bool,
) -> None:
    """Delete up to ``limit`` terminal leads unchanged for ``older_than_s``, their events and
    the edges of the leads that waited on them (``lead_dependencies``).

    Retention, one batch per statement. SKIP LOCKED leaves a row someone holds
    (an operator's retry) for a later batch, so pruning never waits on a lock
    and holds at most ``limit`` row locks. Queued and leased leads never match.
    The predicate and order are those of index ``leads_terminal_updated``: a
    batch reads the oldest terminal leads, never the live ones.
    """


def _get(routed: bool) -> str:
    return f"SELECT {LEAD_COLUMNS} FROM leads WHERE id = %(lead_id)s {only_session(routed)}"


@statement(_get, routed=BOTH)
def get(*, lead_id: int, routed: bool = False, session: str | None = None) -> None:
    """One lead by id; ``routed``: as ``cancel``."""


def _retry_failed(ledger: bool) -> str:
    return f"""
WITH failed AS (
    SELECT id FROM leads
    WHERE session = %(session)s AND status = 'failed'
      AND updated_at <= coalesce(%(before)s::timestamptz, {NOW})
    LIMIT %(limit)s
    FOR UPDATE
),
retried AS (
    UPDATE leads AS l
    SET {_requeue_failed("l.")}
    FROM failed
    WHERE l.id = failed.id AND l.session = %(session)s AND l.status = 'failed'
    RETURNING l.*
){ledger_rows("retried", "retried", enabled=ledger)}
SELECT count(*) AS retried, {NOW} AS started,
       (SELECT {notify("%(session)s || ' ' || count(*)")}
        FROM retried HAVING count(*) > 0) AS notified
FROM retried
"""


@statement(_retry_failed, ledger=BOTH)
def retry_failed(
    *,
    session: str,
    before: datetime | None,
    limit: int,
    now: datetime | None,
    ledger: bool,
    ledger_by_row: bool = False,
) -> None:
    """Dead-letter replay of up to ``limit`` failed leads of a session, as ``retry`` of each.

    Only leads failed by ``before`` (NULL: now; the caller passes back the first batch's
    ``started`` to the next ones), so a lead this call requeued, leased and failed again is
    not requeued twice. FOR UPDATE waits for a row another statement holds and re-checks it
    (a lead retried alone meanwhile is queued, and passed over); only statements that lock
    one row or skip locked rows touch failed leads, so the wait closes no cycle.
    """
