"""Every statement the queue runs, one small function per verb.

Rules that hold for every statement here:

* One statement per operation: the ledger row is written by a data-modifying
  CTE in the same statement, so a transition and its event commit together.
* Every guarded statement re-checks the lease in its own WHERE clause —
  status, token and expiry against the database clock — never by reading first
  and writing after. "No row matched" is how a lost lease shows.
* ``NOW`` is the database clock, or an injected instant in tests
  (``coalesce(%(now)s, now())``, as River does). Inside one statement ``now()``
  is constant, so a statement reaches one verdict.
* No SQL is built from input: only constants are interpolated; values are
  bound parameters, written ``%(name)s`` as psycopg takes them (a literal
  ``%`` is ``%%``). Nothing is compiled: the text here is what PostgreSQL gets.

Knows nothing of HTTP; imports nothing of ``app``, only the model's statuses and the wire's
limits.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache

from leaseq.limits import (
    MAX_BURST,
    MAX_RATE_PER_S,
    MAX_WEIGHT,
    MIN_BURST,
    MIN_RATE_PER_S,
    MIN_WEIGHT,
)
from leaseq.model import FINAL_STATUSES

NOW = "coalesce(%(now)s::timestamptz, now())"
NOTIFY_CHANNEL = "leaseq_queued"
# A notification's payload: the session, a space, and how many leads became available
# (session names hold no space), so a process wakes that many of its waiters.
# The events that end an attempt: the dashboard's throughput counts them, and
# index lead_events_outcomes_at (app.store.schema) covers exactly them.
OUTCOME_EVENTS = ("completed", "expired", "released")


def in_list(values: Iterable[str]) -> str:
    """Constants as an SQL list: ``('a', 'b')``. Only for this module's own constants."""
    return f"({', '.join(repr(value) for value in values)})"


TERMINAL = in_list(FINAL_STATUSES)

LEAD_COLUMNS = (
    "id, session, priority, payload, key, depth, parent_id, status, owner, attempts, "
    "max_attempts, available_at, lease_expires_at, result, error, created_at, updated_at, "
    "checkpoint, concurrency_key, max_runtime_s"
)
# A lease statement's row: the lead, the lease's token, and where its maximum runtime ends.
LEASE_COLUMNS = f"{LEAD_COLUMNS}, lease_token, runtime_ends_at"

_EVENT_COLUMNS = "lead_id, session, event, status, attempt, owner, at, expires_at"


def _ledger(
    source: str, event: str, *, expires_at: str = "NULL", enabled: bool, clock: str = NOW
) -> str:
    """A CTE that appends one lead_events row per row of ``source``; empty when off."""
    if not enabled:
        return ""
    return f""",
ledger AS (
    INSERT INTO lead_events ({_EVENT_COLUMNS})
    SELECT id, session, '{event}', status, attempts, owner, {clock}, {expires_at} FROM {source}
)"""


@cache
def push(ledger: bool) -> str:
    """Insert a batch; keys already in the session are skipped (ON CONFLICT DO NOTHING).

    Ids are drawn in input order, so they ascend in that order; the caller maps
    returned ids back to input positions by that. Rows are inserted in key
    order: an insert waits for a concurrent one of the same key, so two pushes
    taking shared keys in different orders would wait on each other (deadlock).
    """
    return f"""
WITH input AS (
    SELECT * FROM unnest(
        %(priorities)s::int[], %(payloads)s::text[], %(keys)s::text[],
        %(depths)s::int[], %(parent_ids)s::bigint[], %(max_attempts)s::int[],
        %(delays)s::float8[], %(concurrency_keys)s::text[], %(max_runtimes)s::int[]
    ) WITH ORDINALITY
        AS t(priority, payload, key, depth, parent_id, max_attempts, delay_s, concurrency_key,
             max_runtime_s, ord)
),
numbered AS (
    -- A volatile output column is computed after the sort, so ids follow ord.
    SELECT nextval('leads_id_seq') AS id, * FROM input ORDER BY ord
),
inserted AS (
    INSERT INTO leads (id, session, priority, payload, key, depth, parent_id, max_attempts,
                       available_at, scheduled, created_at, updated_at, concurrency_key,
                       max_runtime_s)
    OVERRIDING SYSTEM VALUE
    SELECT id, %(session)s, priority, CAST(payload AS jsonb), key, depth, parent_id, max_attempts,
           {NOW} + make_interval(secs => delay_s), delay_s > 0, {NOW}, {NOW}, concurrency_key,
           max_runtime_s
    FROM numbered ORDER BY key
    ON CONFLICT (session, key) WHERE key IS NOT NULL DO NOTHING
    RETURNING id, key, session, status, attempts, owner, scheduled
){_ledger("inserted", "pushed", enabled=ledger)}
-- The uncorrelated subquery runs once, and only when something was inserted; it
-- counts the leads available now (a delayed one wakes nobody).
SELECT id, key,
       (SELECT pg_notify('{NOTIFY_CHANNEL}', %(session)s || ' ' || count(*))
        FROM inserted WHERE NOT scheduled) AS notified
FROM inserted ORDER BY id
"""


@cache
def existing_keys() -> str:
    """Ids of keys already present in a session (the duplicates of a push)."""
    return "SELECT key, id FROM leads WHERE session = %(session)s AND key = ANY(%(keys)s::text[])"


# Due scheduled leads one lease statement considers (and promotes) at most; the sweeper
# promotes the rest (``promote``).
PROMOTE_BATCH = 100


@cache
def lease_next(ledger: bool) -> str:
    """Lease up to ``max`` available leads of a session, highest priority then oldest first.

    Two sources, each read through its own partial index and locked with
    SKIP LOCKED: ready leads (``leads_ready``: session, priority, id), so the
    scan never walks over delayed leads; and up to ``PROMOTE_BATCH`` scheduled
    leads of the session that came due (``leads_scheduled_due``). The best
    ``max`` of both are leased; the other due ones are promoted to ready in
    the same statement (disjoint rows, so no row is updated twice).

    The ids are chosen in CTEs, which PostgreSQL evaluates exactly once, then
    updated — never ``WHERE id IN (SELECT … LIMIT n)``, which the planner may
    re-run and so update more than n rows (PostgreSQL bug #15715).

    A session with a cap or a rate (``session_settings``, one index probe) is
    not leased here: the statement takes nothing and answers one row whose
    ``limited`` is true, and the caller leases through ``lease_limited``, under
    the session's lock. Otherwise each lead leased is a row (``limited`` false),
    and nothing leased is one row of NULLs.
    """
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=_limited_gate(),
        only_if="AND NOT EXISTS (SELECT FROM limited)",
        limit="%(max)s",
        after="",
        answer=_gated_answer(),
    )


def _limited_gate() -> str:
    """The CTE that finds a session with a cap or a rate (``lease_next``, ``lease_group``)."""
    return f"""limited AS (
    -- A cap or a rate: leased under the session's lock instead (lease_limited).
    SELECT FROM session_settings WHERE session = %(session)s AND {LIMITED}
),
"""


def _gated_answer() -> str:
    """Each lead leased, or one row of NULLs; every row says whether the gate held."""
    return f"""SELECT {LEASE_COLUMNS}, gate.limited
FROM (SELECT EXISTS (SELECT FROM limited) AS limited) AS gate LEFT JOIN leased ON true
ORDER BY priority DESC, id"""


# Who holds each leased lead, and for how long: one owner and ttl for the whole statement
# (lease_next, lease_limited), or one per slot (lease_group), slot n being the n-th lead.
_ONE_HOLDER = ("%(owner)s", "%(ttl_s)s::float8")
_HOLDER_PER_SLOT = ("(%(owners)s::text[])[numbered.n]", "(%(ttls)s::float8[])[numbered.n]")


@cache
def lease_group(ledger: bool) -> str:
    """``lease_next`` for several callers of one session at once (group commit).

    The same claim, gate and promotion, for ``max`` leads: the sum of the callers' own. The
    leads are numbered in priority order, and lead ``n`` gets slot ``n``'s token, owner
    (``owners``) and ttl (``ttls``): the caller of slots 1 to m1 gets the best leads, the next
    the ones after, so the callers are served in their order as if one came after the other.
    Each ledger row names its lead's owner. A limited session answers one row, ``limited``,
    as ``lease_next`` does.
    """
    return _claim_and_lease(
        ledger,
        clock=NOW,
        before=_limited_gate(),
        only_if="AND NOT EXISTS (SELECT FROM limited)",
        limit="%(max)s",
        after="",
        answer=_gated_answer(),
        holder=_HOLDER_PER_SLOT,
    )


def _claim_and_lease(
    ledger: bool,
    *,
    clock: str,
    before: str,
    only_if: str,
    limit: str,
    after: str,
    answer: str,
    holder: tuple[str, str] = _ONE_HOLDER,
    picked: str | None = None,
) -> str:
    """The body of ``lease_next``, ``lease_limited`` and ``lease_group``: ``before`` (CTEs), the
    claim of up to ``limit`` leads when ``only_if`` holds, the lease, ``after`` (CTEs), then
    ``answer``. The leads are numbered in lease order (``n``, for the token, and the
    ``holder``: owner and ttl expressions). ``clock`` is the SQL for the instant the lease
    is taken at (``NOW``, or ``LOCKED_NOW`` after a lock). ``picked``: how the leads are
    chosen among the candidates (``_KEYED_PICK``); by default the best ``limit``.

    A paused session (``_PAUSED``) claims nothing; a lead leased gets the end of its
    maximum runtime (``_RUNTIME_ENDS``), and its lease never lasts past it."""
    owner, ttl = holder
    picked = (
        picked
        or f"""SELECT id, priority FROM {_CANDIDATES}
    ORDER BY priority DESC, id
    LIMIT {limit}"""
    )
    only_if = f"{only_if} {_NOT_PAUSED}"
    ends = _RUNTIME_ENDS.format(clock=clock)
    return f"""
WITH {_PAUSED.format(clock=clock)}{before}ready AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= {clock} {only_if}
    ORDER BY priority DESC, id
    LIMIT {limit}
    FOR UPDATE SKIP LOCKED
),
due AS (
    SELECT id, priority, concurrency_key FROM leads
    WHERE session = %(session)s AND scheduled AND available_at <= {clock} {only_if}
    ORDER BY available_at
    LIMIT {PROMOTE_BATCH}
    FOR UPDATE SKIP LOCKED
),
picked AS (
    {picked}
),
numbered AS (
    SELECT id, row_number() OVER (ORDER BY priority DESC, id) AS n FROM picked
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.session = %(session)s AND due.id NOT IN (SELECT id FROM picked)
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = {owner}, lease_token = (%(tokens)s::text[])[numbered.n],
        attempts = l.attempts + 1, scheduled = false, runtime_ends_at = {ends},
        lease_expires_at = least({clock} + make_interval(secs => {ttl}), {ends}),
        updated_at = {clock}
    FROM numbered
    -- The session routes the UPDATE to one partition or shard (docs/scaling.md).
    WHERE l.id = numbered.id AND l.session = %(session)s
    RETURNING l.*
){after}{_ledger("leased", "leased", expires_at="lease_expires_at", enabled=ledger, clock=clock)}
{answer}
"""


# -- flow control (docs/contract.md#flow-control): named fragments of the lease statements --

# A session paused now (``paused_until``, on the statement's clock): its leases claim nothing.
_PAUSED = """paused AS (
    SELECT FROM session_settings WHERE session = %(session)s AND paused_until > {clock}
),
"""
_NOT_PAUSED = "AND NOT EXISTS (SELECT FROM paused)"
# Where the maximum runtime of an attempt leased at ``clock`` ends: the lead's own, else its
# session's default; NULL (no maximum) when neither is set.
_RUNTIME_ENDS = """{clock} + make_interval(secs => coalesce(l.max_runtime_s, (
            SELECT max_runtime_s FROM session_settings WHERE session = %(session)s)))"""
# The candidates of a lease: its ready and due leads.
_CANDIDATES = "(SELECT * FROM ready UNION ALL SELECT * FROM due) AS candidates"
# A session with max_leased_per_key (``lease_limited``, under the session's lock): the leads
# of each key leased now (index ``leads_leased_keys``: the leased leads, never the waiting).
_KEYS_HELD = """keys_held AS (
    SELECT concurrency_key, count(*) AS n FROM leads
    WHERE session = %(session)s AND status = 'leased' AND concurrency_key IS NOT NULL
      AND (SELECT max_leased_per_key FROM settings) IS NOT NULL
    GROUP BY concurrency_key
),
"""
# Its claim passes over the leads of the keys at their cap (so they hold up no other key) ...
_KEY_HAS_ROOM = """AND (concurrency_key IS NULL OR concurrency_key NOT IN (
        SELECT concurrency_key FROM keys_held
        WHERE n >= (SELECT max_leased_per_key FROM settings)))"""
# ... and takes, of each key, no more than the room left under the cap.
_KEYED_PICK = f"""SELECT id, priority FROM (
        SELECT candidates.*, row_number() OVER (
            PARTITION BY candidates.concurrency_key ORDER BY priority DESC, id) AS nth
        FROM {_CANDIDATES}
    ) AS ranked
    WHERE concurrency_key IS NULL OR (SELECT max_leased_per_key FROM settings) IS NULL
       OR nth + coalesce((SELECT n FROM keys_held AS k
                          WHERE k.concurrency_key = ranked.concurrency_key), 0)
          <= (SELECT max_leased_per_key FROM settings)
    ORDER BY priority DESC, id
    LIMIT {{limit}}"""
# A pause without an end: shown as this instant, far in the future.
FOREVER = "'9999-12-31 00:00:00+00'::timestamptz"
# When a session's pause ends, NULL when it is not paused now (settings and stats show it).
PAUSED_UNTIL = f"CASE WHEN paused_until > {NOW} THEN paused_until END AS paused_until"


@cache
def promote() -> str:
    """Make up to ``limit`` scheduled leads that came due ready (any session); the sweeper's.

    Oldest due first, through ``leads_scheduled_at``; SKIP LOCKED leaves a row
    a lease holds to that lease. Notifies each session of its promoted leads.
    """
    return f"""
WITH due AS (
    SELECT id FROM leads
    WHERE scheduled AND available_at <= {NOW}
    ORDER BY available_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
promoted AS (
    UPDATE leads AS l SET scheduled = false
    FROM due
    WHERE l.id = due.id AND l.scheduled
    RETURNING l.session
)
SELECT count(*) AS promoted,
       (SELECT count(pg_notify('{NOTIFY_CHANNEL}', p.session || ' ' || p.n))
        FROM (SELECT session, count(*) AS n FROM promoted GROUP BY session) AS p) AS notified
FROM promoted
"""


_VALID_LEASE = f"l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > {NOW}"


# A grouped statement locks the rows it changes first, skipping those another transaction
# holds (an operator's SELECT … FOR UPDATE, a slow migration): it never waits on a row lock,
# so one locked lead cannot hold up the other callers of its group nor the groups after.
_LOCKED = f"""
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE {_VALID_LEASE}
    FOR UPDATE OF l SKIP LOCKED
),"""


def _busy_answer(changed: str, items: str, columns: str) -> str:
    """``columns`` of every row of ``changed``, each with ``busy``: the positions (from 0) of
    the items of ``items`` whose lease was valid but whose row another transaction held, so it
    was skipped; one row of NULLs and ``busy`` when nothing changed. The caller sends those
    items again with the plain statement, which waits for the row."""
    return f"""
SELECT {columns}, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM {items} AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND {_VALID_LEASE})
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN {changed} ON true
"""


@cache
def renew_many(*, skip_locked: bool = False) -> str:
    """Extend each valid lease of the batch; the rows returned are the ones that were valid.

    An item's checkpoint (JSON text; NULL: none) replaces the lead's, which otherwise stays.
    ``skip_locked`` (group commit): a lease whose row another transaction holds is left as it
    is and named in ``busy`` (``_busy_answer``) instead of waited for.
    """
    answer = (
        _busy_answer("renewed", "req", "renewed.*") if skip_locked else "\nSELECT * FROM renewed"
    )
    return f"""
WITH req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(ttls)s::float8[], %(checkpoints)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, ttl_s, checkpoint, ord)
),{_LOCKED if skip_locked else ""}
renewed AS (
    UPDATE leads AS l
    SET lease_expires_at = least({NOW} + make_interval(secs => req.ttl_s), l.runtime_ends_at),
        updated_at = {NOW}, checkpoint = coalesce(CAST(req.checkpoint AS jsonb), l.checkpoint)
    FROM req
    WHERE l.id = req.lead_id AND {_VALID_LEASE}{_ONLY_LOCKED if skip_locked else ""}
    RETURNING l.id, req.token, l.lease_expires_at, {_GRANTED} AS ttl_s
){answer}"""


# The seconds a renewal granted: its ttl, or less where the maximum runtime ends first (a
# lease never lasts past it, so a renewal after it finds the lease expired, lease_lost).
_GRANTED = f"""CASE WHEN l.runtime_ends_at < {NOW} + make_interval(secs => req.ttl_s)
         THEN extract(epoch FROM l.runtime_ends_at - {NOW})::float8 ELSE req.ttl_s END"""


@cache
def runtime_ran_out() -> str:
    """Which of the given leases (lead id, token) ended at their maximum runtime, and are not
    yet swept: why their renewal was refused."""
    return f"""
SELECT l.id FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token
  AND l.runtime_ends_at <= {NOW}
"""


_ONLY_LOCKED = " AND l.id IN (SELECT id FROM locked)"


@cache
def complete_many(ledger: bool, *, lean: bool = False, skip_locked: bool = False) -> str:
    """Finish each valid lease of the batch with its status; returns the leads that finished.

    A lease given twice in one batch counts once, at its first item (``item``,
    from 0): an UPDATE joined to two matching rows would apply either one.
    ``lean`` returns only ``item``, for callers that need no lead back (a quarter
    less time per batch of 100 than reading every column back). The lead keeps
    the lease's token (never shown), so ``completed_already`` knows a retry.
    ``skip_locked`` (group commit): a lease whose row another transaction holds is left
    as it is and named, with every item of it, in ``busy`` (``_busy_answer``).
    """
    columns = "item" if lean else f"{LEAD_COLUMNS}, item"
    answer = (
        _busy_answer("completed", "input", columns)
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
),{_LOCKED if skip_locked else ""}
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = {NOW}
    FROM req
    WHERE l.id = req.lead_id AND {_VALID_LEASE}{_ONLY_LOCKED if skip_locked else ""}
    RETURNING l.*, req.ord - 1 AS item
){_ledger("completed", "completed", enabled=ledger)}{answer}"""


@cache
def completed_already(*, lean: bool = False) -> str:
    """Which of the given items name a lead their very lease already finished with that status.

    A completion retried after its answer was lost is answered as the first
    was, and changes nothing. A statement of its own, run after
    ``complete_many`` for the items it did not complete: its snapshot sees a
    completion that committed while that one waited on the row. ``item`` is
    the caller's position of each item; ``lean`` returns only it.
    """
    columns = "req.item" if lean else f"{_qualified(LEAD_COLUMNS)}, req.item"
    return f"""
SELECT {columns}
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(items)s::int[])
    AS req(lead_id, token, status, item), leads AS l
WHERE l.id = req.lead_id AND l.lease_token = req.token
  AND l.status = req.status AND l.status IN {TERMINAL}
"""


def _qualified(columns: str) -> str:
    """``a, b`` as ``l.a, l.b``."""
    return ", ".join(f"l.{name.strip()}" for name in columns.split(","))


@cache
def release(ledger: bool) -> str:
    """Give a valid lease back: queued again after ``delay_s``, the attempt already counted.

    On the last attempt (``attempts`` reached ``max_attempts``) the lead fails
    instead (SPEC invariant 7), with an error that says why: the release's own
    ``error`` when given, after "released on attempt n of m".

    ``throttle_s`` (NULL: none): a worker's cooldown. The lead is queued whatever its
    attempt, the lease is not counted against ``max_attempts`` (``throttles``), and its
    session is paused until now + throttle_s, or later if it already was (``_THROTTLED``),
    all in this statement, so only a valid lease pauses its session.
    """
    last = f"{_LAST_ATTEMPT} AND %(throttle_s)s::float8 IS NULL"
    return f"""
WITH req AS (
    SELECT %(lead_id)s::bigint AS lead_id, %(token)s::text AS token, %(error)s::text AS error
),
released AS (
    UPDATE leads AS l
    SET status = CASE WHEN {last} THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN {last}
                     THEN 'released on attempt ' || l.attempts || ' of ' || l.max_attempts
                          || coalesce(': ' || req.error, '')
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL,
        available_at = CASE WHEN {last} THEN l.available_at
                            ELSE {NOW} + make_interval(secs => %(delay_s)s::float8) END,
        scheduled = NOT ({last}) AND %(delay_s)s::float8 > 0,
        throttles = l.throttles + CASE WHEN %(throttle_s)s::float8 IS NULL THEN 0 ELSE 1 END,
        updated_at = {NOW}
    FROM req
    WHERE l.id = req.lead_id AND {_VALID_LEASE}
    RETURNING l.*
),{_THROTTLED}{_ledger("released", "released", enabled=ledger)}
SELECT {LEAD_COLUMNS},
       CASE WHEN status = 'queued' AND NOT scheduled AND %(throttle_s)s::float8 IS NULL
            THEN pg_notify('{NOTIFY_CHANNEL}', session || ' 1') END AS notified
FROM released
"""


# A lease on its lead's last attempt: the leases ended by a throttled release are not counted.
_LAST_ATTEMPT = "l.attempts - l.throttles >= l.max_attempts"
# A throttled release pauses its lead's session (a row of its own if it had none).
_THROTTLED = f"""
throttled AS (
    INSERT INTO session_settings AS s (session, paused_until, updated_at)
    SELECT released.session, {NOW} + make_interval(secs => cooldown.s), {NOW}
    FROM released JOIN (SELECT %(throttle_s)s::float8 AS s) AS cooldown ON cooldown.s IS NOT NULL
    ON CONFLICT (session) DO UPDATE
        SET paused_until = greatest(s.paused_until, excluded.paused_until)
)"""


@cache
def sweep(ledger: bool, *, scoped: bool) -> str:
    """Requeue up to ``limit`` expired leases (one session's when scoped); at max_attempts, fail.

    SKIP LOCKED: a lease whose row a completion holds is left to that
    completion; the UPDATE re-checks status and expiry so a lease completed
    just before is never moved back (River #1302).
    """
    session_filter = "AND session = %(session)s" if scoped else ""
    # The session routes the UPDATE to one partition or shard too (docs/scaling.md).
    update_filter = "AND l.session = %(session)s" if scoped else ""
    return f"""
WITH expired AS (
    SELECT id, lease_expires_at FROM leads
    WHERE status = 'leased' AND lease_expires_at <= {NOW} {session_filter}
    ORDER BY lease_expires_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
swept AS (
    UPDATE leads AS l
    SET status = CASE WHEN {_LAST_ATTEMPT} THEN 'failed' ELSE 'queued' END,
        error = CASE WHEN {_LAST_ATTEMPT}
                     THEN 'lease expired on attempt ' || l.attempts || ' of ' || l.max_attempts
                     ELSE l.error END,
        lease_token = NULL, lease_expires_at = NULL, available_at = {NOW}, updated_at = {NOW}
    FROM expired
    WHERE l.id = expired.id AND l.status = 'leased' AND l.lease_expires_at <= {NOW}
          {update_filter}
    RETURNING l.id, l.session, l.status, l.attempts, l.owner, expired.lease_expires_at AS expired_at
){_ledger("swept", "expired", expires_at="expired_at", enabled=ledger)}
SELECT
    count(*) FILTER (WHERE status = 'queued') AS requeued,
    count(*) FILTER (WHERE status = 'failed') AS failed,
    (SELECT count(pg_notify('{NOTIFY_CHANNEL}', s.session || ' ' || s.n))
     FROM (SELECT session, count(*) AS n FROM swept WHERE status = 'queued' GROUP BY session)
         AS s) AS notified
FROM swept
"""


@cache
def cancel(ledger: bool) -> str:
    """An operator fails a queued or leased lead; its holder's next renew or complete loses."""
    return f"""
WITH cancelled AS (
    UPDATE leads
    SET status = 'failed', error = 'cancelled', lease_token = NULL, lease_expires_at = NULL,
        scheduled = false, updated_at = {NOW}
    WHERE id = %(lead_id)s AND status IN ('queued', 'leased')
    RETURNING *
){_ledger("cancelled", "cancelled", enabled=ledger)}
SELECT {LEAD_COLUMNS} FROM cancelled
"""


@cache
def retry(ledger: bool) -> str:
    """Dead-letter replay: a failed lead is queued again with room for one more attempt.

    ``attempts`` is a fencing number and never goes down; ``max_attempts`` is
    raised when needed so the replayed lead gets its attempt.
    """
    return f"""
WITH retried AS (
    UPDATE leads
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = {NOW},
        max_attempts = greatest(max_attempts, attempts + 1), updated_at = {NOW}
    WHERE id = %(lead_id)s AND status = 'failed'
    RETURNING *
){_ledger("retried", "retried", enabled=ledger)}
SELECT {LEAD_COLUMNS}, (SELECT pg_notify('{NOTIFY_CHANNEL}', session || ' 1')) AS notified
FROM retried
"""


@cache
def prune(*, scoped: bool) -> str:
    """Delete up to ``limit`` terminal leads unchanged for ``older_than_s``, and their events.

    Retention, one batch per statement. SKIP LOCKED leaves a row someone holds
    (an operator's retry) for a later batch, so pruning never waits on a lock
    and holds at most ``limit`` row locks. Queued and leased leads never match.
    The predicate and order are those of index ``leads_terminal_updated``: a
    batch reads the oldest terminal leads, never the live ones.
    """
    session_filter = "AND session = %(session)s" if scoped else ""
    return f"""
WITH doomed AS (
    SELECT id FROM leads
    WHERE status IN {TERMINAL}
      AND updated_at < {NOW} - make_interval(secs => %(older_than_s)s::float8)
      {session_filter}
    ORDER BY updated_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
events AS (
    DELETE FROM lead_events WHERE lead_id IN (SELECT id FROM doomed)
),
pruned AS (
    DELETE FROM leads WHERE id IN (SELECT id FROM doomed) RETURNING id
)
SELECT count(*) AS pruned FROM pruned
"""


@cache
def valid_leases() -> str:
    """Those of the given leases (lead id and token) that are still valid, in leasing order."""
    return f"""
SELECT {_qualified(LEAD_COLUMNS)}, l.lease_token, l.runtime_ends_at
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS req(lead_id, token), leads AS l
WHERE l.id = req.lead_id AND {_VALID_LEASE}
ORDER BY l.priority DESC, l.id
"""


# -- idempotency keys (app.domain.idempotency) ----------------------------------------------


@cache
def claim_key() -> str:
    """Claim a key for a request; no row back when it is taken.

    A key another open transaction claimed makes this one wait for it to end:
    a retry that overtakes its first try gets that try's answer, or the key.
    """
    return f"""
INSERT INTO idempotency_keys (verb, key, request, created_at)
VALUES (%(verb)s, %(key)s, %(request)s, {NOW})
ON CONFLICT (verb, key) DO NOTHING
RETURNING verb
"""


@cache
def remember_answer() -> str:
    """Store the answer of the request that claimed the key (in its transaction)."""
    return """
UPDATE idempotency_keys SET answer = CAST(%(answer)s AS jsonb)
WHERE verb = %(verb)s AND key = %(key)s
"""


@cache
def remembered() -> str:
    """The request a key was claimed for, and its answer."""
    return "SELECT request, answer FROM idempotency_keys WHERE verb = %(verb)s AND key = %(key)s"


@cache
def prune_keys() -> str:
    """Delete up to ``limit`` idempotency keys older than ``older_than_s`` (oldest first)."""
    return f"""
WITH doomed AS (
    SELECT verb, key FROM idempotency_keys
    WHERE created_at < {NOW} - make_interval(secs => %(older_than_s)s::float8)
    ORDER BY created_at
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
),
pruned AS (
    DELETE FROM idempotency_keys AS k USING doomed
    WHERE k.verb = doomed.verb AND k.key = doomed.key
    RETURNING 1
)
SELECT count(*) AS pruned FROM pruned
"""


@cache
def get() -> str:
    """One lead by id."""
    return f"SELECT {LEAD_COLUMNS} FROM leads WHERE id = %(lead_id)s"


@cache
def stats() -> str:
    """Lead counts by status in one session (the slots of ``lead_counts`` added up), each row
    with the age of its oldest available lead (``age_s``); no counts: one row of NULLs but it."""
    return f"""
WITH counted AS (
    SELECT status, sum(n)::bigint AS n FROM lead_counts WHERE session = %(session)s
    GROUP BY status HAVING sum(n) <> 0
)
SELECT counted.status, counted.n, {_age("oldest.at")} AS age_s,
       (SELECT {PAUSED_UNTIL} FROM session_settings WHERE session = %(session)s)
FROM (SELECT {_oldest_available("%(session)s")} AS at) AS oldest LEFT JOIN counted ON true
"""


@cache
def stats_all() -> str:
    """Lead counts by session and status (``lead_counts``: its cost follows the sessions, not
    the leads)."""
    return """
SELECT session, status, sum(n)::bigint AS n FROM lead_counts
GROUP BY session, status HAVING sum(n) <> 0
"""


@cache
def paused_all() -> str:
    """The sessions paused now, and until when."""
    return f"SELECT session, paused_until FROM session_settings WHERE paused_until > {NOW}"


@cache
def fold_counts() -> str:
    """Add every other slot of ``lead_counts`` into slot 0, so the table keeps about one row
    per session and status however many backends wrote it; the pruner's, across sessions.

    SKIP LOCKED leaves a slot a statement is writing to a later pass, and slot 0 rows are
    upserted in (session, status) order as the triggers do, so no lock waits on another in
    a cycle. The sums are unchanged at every commit.
    """
    return """
WITH moving AS (
    SELECT session, status, slot FROM lead_counts WHERE slot <> 0 FOR UPDATE SKIP LOCKED
),
moved AS (
    DELETE FROM lead_counts AS c USING moving AS m
    WHERE c.session = m.session AND c.status = m.status AND c.slot = m.slot
    RETURNING c.session, c.status, c.n
),
folded AS (
    INSERT INTO lead_counts AS c (session, status, slot, n)
    SELECT session, status, 0, sum(n) FROM moved GROUP BY session, status
    ORDER BY session, status
    ON CONFLICT (session, status, slot) DO UPDATE SET n = c.n + excluded.n
    RETURNING 1
)
SELECT count(*) AS folded FROM folded
"""


@cache
def forget_zero_counts() -> str:
    """Delete the slot-0 counts that came to zero (a pruned session leaves no row behind)."""
    return """
WITH zero AS (
    SELECT session, status FROM lead_counts WHERE slot = 0 AND n = 0 FOR UPDATE SKIP LOCKED
),
forgotten AS (
    DELETE FROM lead_counts AS c USING zero AS z
    WHERE c.session = z.session AND c.status = z.status AND c.slot = 0
    RETURNING 1
)
SELECT count(*) AS forgotten FROM forgotten
"""


@cache
def db_now() -> str:
    """The database clock."""
    return "SELECT now() AS now"


@cache
def autovacuum() -> str:
    """Whether the server runs autovacuum (``SHOW autovacuum``): the reclaimer of churned rows."""
    return "SELECT current_setting('autovacuum') = 'on' AS enabled"


@cache
def schema_revision() -> str:
    """The Alembic revision of the schema (raises UndefinedTable on a database without one)."""
    return "SELECT version_num FROM alembic_version"


# -- the session report (app.domain.report): the ledger alone ---------------------------


@cache
def session_report() -> str:
    """One pass over a session's events (index ``lead_events_session_lead``)."""
    return """
WITH ev AS (
    SELECT id, lead_id, event, attempt, at, expires_at FROM lead_events WHERE session = %(session)s
),
-- One row per lease: a lead's attempt number is handed out once.
leases AS (
    SELECT lead_id, attempt, min(at) AS leased_at
    FROM ev WHERE event = 'leased' GROUP BY lead_id, attempt
),
-- When each lease stopped being valid. An expiry ends it at the expiry the
-- sweeper found (renewals included), not at the sweep.
ends AS (
    SELECT lead_id, attempt,
           min(CASE WHEN event = 'expired' THEN coalesce(expires_at, at) ELSE at END) AS ended_at,
           bool_or(event = 'completed') AS completed
    FROM ev WHERE event IN ('completed', 'released', 'cancelled', 'expired')
    GROUP BY lead_id, attempt
),
spans AS (
    SELECT l.lead_id, l.attempt, l.leased_at, e.ended_at, coalesce(e.completed, false) AS completed,
           lead(l.leased_at) OVER (PARTITION BY l.lead_id ORDER BY l.attempt) AS next_leased_at
    FROM leases AS l LEFT JOIN ends AS e USING (lead_id, attempt)
),
-- Completions counted per lead between an operator's retries: failed, retried
-- and completed again is a dead-letter replay (SPEC invariant 4), not a double.
epochs AS (
    SELECT lead_id, event,
           count(*) FILTER (WHERE event = 'retried')
               OVER (PARTITION BY lead_id ORDER BY id) AS epoch
    FROM ev
),
completions AS (
    SELECT lead_id, epoch, count(*) AS n FROM epochs WHERE event = 'completed'
    GROUP BY lead_id, epoch
)
SELECT
    (SELECT count(DISTINCT lead_id) FROM ev) AS leads,
    (SELECT count(*) FROM ev WHERE event = 'pushed') AS pushed,
    (SELECT count(*) FROM spans) AS leases,
    (SELECT count(DISTINCT lead_id) FROM completions) AS completed,
    (SELECT coalesce(sum(n), 0) FROM completions) AS completions,
    (SELECT count(DISTINCT lead_id) FROM completions WHERE n > 1) AS double_completions,
    (SELECT count(*) FROM spans
     WHERE next_leased_at IS NOT NULL AND (ended_at IS NULL OR next_leased_at < ended_at))
        AS overlapping_leases,
    (SELECT count(*) FROM spans WHERE ended_at IS NOT NULL AND NOT completed) AS wasted_attempts,
    (SELECT count(*) FROM ev WHERE event = 'expired') AS expired,
    (SELECT count(*) FROM ev WHERE event = 'released') AS released,
    (SELECT count(*) FROM ev WHERE event = 'cancelled') AS cancelled,
    (SELECT count(*) FROM ev WHERE event = 'retried') AS retried
"""


@cache
def attempts_per_lead() -> str:
    """Leads by the number of leases they took (a lead never leased: 0)."""
    return """
SELECT leases, count(*) AS leads FROM (
    SELECT lead_id, count(DISTINCT attempt) FILTER (WHERE event = 'leased') AS leases
    FROM lead_events WHERE session = %(session)s GROUP BY lead_id
) AS per_lead
GROUP BY leases ORDER BY leases
"""


@cache
def owners() -> str:
    """Per owner: leases handed out, completions written, leases that ended without one."""
    return """
WITH ev AS (
    SELECT lead_id, event, attempt, owner FROM lead_events WHERE session = %(session)s
),
leases AS (
    SELECT lead_id, attempt, min(owner) AS owner FROM ev WHERE event = 'leased'
    GROUP BY lead_id, attempt
),
ends AS (
    SELECT lead_id, attempt, bool_or(event = 'completed') AS completed
    FROM ev WHERE event IN ('completed', 'released', 'cancelled', 'expired')
    GROUP BY lead_id, attempt
),
tally AS (
    SELECT l.owner, 1 AS leases, 0 AS completions,
           CASE WHEN e.lead_id IS NOT NULL AND NOT e.completed THEN 1 ELSE 0 END AS wasted
    FROM leases AS l LEFT JOIN ends AS e USING (lead_id, attempt)
    UNION ALL
    SELECT owner, 0, 1, 0 FROM ev WHERE event = 'completed'
)
SELECT coalesce(owner, '') AS owner, sum(leases) AS leases, sum(completions) AS completions,
       sum(wasted) AS wasted
FROM tally GROUP BY 1 ORDER BY 1
"""


# -- the dashboard's overview (app.domain.overview) ---------------------------------------


@cache
def per_minute(window_minutes: int) -> str:
    """Completions and wasted attempts (expired or released leases) per session and minute ago,
    over the last ``window_minutes`` (the oldest minute gathers anything older in the window).

    The event filter is the predicate of index ``lead_events_outcomes_at``, word for word.
    """
    minutes = int(window_minutes)
    return f"""
SELECT session,
       least(floor(extract(epoch FROM now() - at) / 60), {minutes - 1})::int AS ago,
       count(*) FILTER (WHERE event = 'completed') AS completed,
       count(*) FILTER (WHERE event IN ('expired', 'released')) AS wasted
FROM lead_events
WHERE event IN {in_list(OUTCOME_EVENTS)}
  AND at >= now() - interval '{minutes} minutes' AND at <= now()
GROUP BY 1, 2
"""


@cache
def expiring() -> str:
    """The leases that end soonest (index ``leads_leased_expiry``)."""
    return f"""
SELECT id, session, owner, attempts, {_seconds_between("now()", "lease_expires_at")} AS expires_in_s
FROM leads WHERE status = 'leased'
ORDER BY lease_expires_at LIMIT %(limit)s
"""


@cache
def failures() -> str:
    """The most recently failed leads."""
    return """
SELECT id, session, owner, attempts, error, updated_at
FROM leads WHERE status = 'failed'
ORDER BY updated_at DESC, id DESC LIMIT %(limit)s
"""


# -- fleets: settings per session, limited leases, the scaling signal (app.leasing.fleet) ----

# A session whose leases are held to a cap or a rate: leased under its settings' lock.
LIMITED = "(max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)"
# The limited lease's clock: the statement's start, after the lock was granted, so
# leases of one session are stamped in the order they took the lock.
LOCKED_NOW = "coalesce(%(now)s::timestamptz, statement_timestamp())"
SETTINGS_COLUMNS = "weight, max_leased, rate_per_s, burst, max_leased_per_key, max_runtime_s"
# The longest span of time a statement works with, in seconds (about 31,700 years): any two
# finite timestamps are closer; only an infinite one, written by hand, is further.
MAX_SPAN_S = 1e12


def _within(column: str, low: float, high: float) -> str:
    """``column`` held to [``low``, ``high``], NULL kept as NULL (``least`` and ``greatest``
    alone skip NULLs). NaN, which PostgreSQL orders above every number, reads as ``high``."""
    return f"CASE WHEN {column} IS NOT NULL THEN least(greatest({column}, {low!r}), {high!r}) END"


# The settings as every statement reads them: each held to its range (``leaseq.limits``), so
# a row stored before the ranges, or written by hand, reads and leases as the nearest
# setting the API accepts, never as arithmetic that fails. max_leased is an integer >= 0.
SETTINGS = (
    f"{_within('weight', MIN_WEIGHT, MAX_WEIGHT)} AS weight, max_leased, "
    f"{_within('rate_per_s', MIN_RATE_PER_S, MAX_RATE_PER_S)} AS rate_per_s, "
    f"{_within('burst', MIN_BURST, MAX_BURST)} AS burst, max_leased_per_key, max_runtime_s"
)


def _seconds_between(earlier: str, later: str) -> str:
    """Seconds from ``earlier`` to ``later`` (SQL timestamps), held to ±MAX_SPAN_S: taken from
    their epochs (numeric, where an infinite timestamp is an infinite number instead of the
    error of subtracting it), so no timestamp a row holds can fail the statement."""
    span = f"extract(epoch FROM {later}) - extract(epoch FROM {earlier})"
    return f"({_within(span, -MAX_SPAN_S, MAX_SPAN_S)})::float8"


def _oldest_available(session: str) -> str:
    """When the oldest lead of ``session`` (an SQL expression) that could be leased now became
    available: the oldest ready one (``leads_ready_age``) or due scheduled one
    (``leads_scheduled_due``), one index probe each; NULL when there is none."""
    return f"""least(
        (SELECT min(available_at) FROM leads
         WHERE session = {session} AND status = 'queued' AND NOT scheduled),
        (SELECT min(available_at) FROM leads
         WHERE session = {session} AND scheduled AND available_at <= {NOW}))"""


def _age(since: str) -> str:
    """Seconds from ``since`` (a column) to now on the database clock: never below 0, and NULL
    for NULL (which ``greatest`` alone would turn into 0)."""
    return f"CASE WHEN {since} IS NOT NULL THEN greatest(0, {_seconds_between(since, NOW)}) END"


@cache
def oldest_available() -> str:
    """Per session with queued leads, the age of its oldest lead that could be leased now
    (sessions with none left out): two index probes per such session, whatever the leads.
    The scaling signal, the dashboard's oldest age, and the fleet's view of who has work."""
    return f"""
SELECT c.session, {_age("o.at")} AS age_s
FROM (SELECT session FROM lead_counts WHERE status = 'queued'
      GROUP BY session HAVING sum(n) > 0) AS c
CROSS JOIN LATERAL (SELECT {_oldest_available("c.session")} AS at) AS o
WHERE o.at IS NOT NULL
"""


@cache
def settings_get() -> str:
    """One session's settings; no row: the defaults."""
    return f"SELECT {SETTINGS}, {PAUSED_UNTIL} FROM session_settings WHERE session = %(session)s"


@cache
def settings_all() -> str:
    """Every session's settings that an operator set (a small table: one row per such session)."""
    return f"SELECT session, {SETTINGS}, {PAUSED_UNTIL} FROM session_settings ORDER BY session"


@cache
def settings_barrier() -> str:
    """Wait for every statement that read the settings to end, and hold back new ones until
    this transaction commits: a cap or rate stored after it binds every lease begun later.

    The lease statements read ``session_settings`` (a share lock for their one statement);
    this is the one lock that waits for them. Operators' changes are rare and take
    milliseconds; ``lock_timeout`` keeps a stuck reader from holding the change for long.
    """
    return "LOCK TABLE session_settings IN ACCESS EXCLUSIVE MODE"


@cache
def lock_timeout() -> str:
    """This transaction's ``lock_timeout`` (``%(timeout)s``, text such as '2s')."""
    return "SELECT set_config('lock_timeout', %(timeout)s, true)"


@cache
def settings_put() -> str:
    """Store a session's settings. A bucket that keeps a rate keeps its level (a change is no
    burst); a rate newly set starts with a full bucket; no rate, no bucket."""
    return f"""
INSERT INTO session_settings AS s (session, {SETTINGS_COLUMNS}, updated_at)
VALUES (%(session)s, %(weight)s, %(max_leased)s, %(rate_per_s)s, %(burst)s,
        %(max_leased_per_key)s, %(max_runtime_s)s, {NOW})
ON CONFLICT (session) DO UPDATE SET
    weight = excluded.weight, max_leased = excluded.max_leased,
    rate_per_s = excluded.rate_per_s, burst = excluded.burst,
    max_leased_per_key = excluded.max_leased_per_key, max_runtime_s = excluded.max_runtime_s,
    tokens = CASE WHEN excluded.rate_per_s IS NOT NULL AND s.rate_per_s IS NOT NULL
                  THEN s.tokens END,
    refilled_at = CASE WHEN excluded.rate_per_s IS NOT NULL AND s.rate_per_s IS NOT NULL
                       THEN s.refilled_at END,
    updated_at = {NOW}
RETURNING {SETTINGS}, {PAUSED_UNTIL}
"""


@cache
def pause() -> str:
    """Pause a session until now + ``for_s`` (NULL: until resumed, shown as ``FOREVER``); its
    settings. A lease statement that begins after this commits reads the pause."""
    return f"""
INSERT INTO session_settings AS s (session, paused_until, updated_at)
VALUES (%(session)s,
        coalesce({NOW} + make_interval(secs => %(for_s)s::float8), {FOREVER}), {NOW})
ON CONFLICT (session) DO UPDATE SET paused_until = excluded.paused_until
RETURNING {SETTINGS}, {PAUSED_UNTIL}
"""


@cache
def resume() -> str:
    """End a session's pause; its settings (no row: it had none). Wakes its waiting leases."""
    return f"""
WITH resumed AS (
    UPDATE session_settings SET paused_until = NULL WHERE session = %(session)s RETURNING *
)
SELECT {SETTINGS}, NULL::timestamptz AS paused_until,
       pg_notify('{NOTIFY_CHANNEL}', session) AS notified
FROM resumed
"""


@cache
def lock_settings() -> str:
    """Lock a limited session's settings row, in the transaction of its lease: the session's
    limited leases take turns, each counting what is held after the one before committed.
    No row back: the session has no limits (any more)."""
    return f"SELECT FROM session_settings WHERE session = %(session)s AND {LIMITED} FOR UPDATE"


@cache
def lease_limited(ledger: bool) -> str:
    """``lease_next`` for a session with a cap or a rate, run after ``lock_settings``.

    A statement after the lock sees every lease of the session committed before it: the
    leads it holds now (``lead_counts``, an expired lease not yet swept included) and its
    bucket. It leases at most ``max``, the room under ``max_leased`` and the whole tokens
    in the bucket (refilled at ``rate_per_s`` since it was drawn, up to ``burst``), and
    takes one token per lead leased. Each lead leased is a row; none, one row of NULLs;
    every row says ``room`` (leads it could hold more before; NULL without a cap),
    ``tokens`` (the bucket before; NULL without a rate) and ``rate_per_s``, so the caller
    knows what held the session back and when to try it again.
    """
    return _claim_and_lease(
        ledger,
        clock=LOCKED_NOW,
        before=f"""stored AS (
    SELECT {SETTINGS}, tokens, refilled_at FROM session_settings WHERE session = %(session)s
),
settings AS (
    SELECT max_leased, rate_per_s, max_leased_per_key,
           coalesce(burst, greatest(1, ceil(rate_per_s)))::float8 AS burst, tokens,
           greatest(0, {_seconds_between("refilled_at", LOCKED_NOW)}) AS elapsed_s
    FROM stored
),
bucket AS (
    -- Full until first drawn. Else its level held to [0, burst] (NaN: full), refilled for
    -- the time since it was drawn, but never for more than twice the time it takes to fill
    -- (a longer quiet time fills it all the same): with the settings in their ranges every
    -- term lies within [0, 2 * burst], and a refill above 0 is at least rate * 1 µs (1e-12),
    -- so double precision carries each one, with no overflow and no underflow.
    SELECT CASE WHEN tokens IS NULL THEN burst
                ELSE least(burst, least(greatest(tokens, 0), burst)
                                  + rate_per_s * least(elapsed_s, 2 * burst / rate_per_s))
           END AS tokens
    FROM settings WHERE rate_per_s IS NOT NULL
),
{_KEYS_HELD}room AS (
    SELECT (SELECT max_leased FROM settings)::bigint - (
        SELECT coalesce(sum(n), 0) FROM lead_counts
        WHERE session = %(session)s AND status = 'leased')::bigint AS n
),
allowance AS (
    SELECT greatest(0, least(%(max)s, (SELECT n FROM room), (SELECT floor(tokens) FROM bucket)))
        ::int AS n
),
""",
        only_if=_KEY_HAS_ROOM,
        limit="(SELECT n FROM allowance)",
        picked=_KEYED_PICK.format(limit="(SELECT n FROM allowance)"),
        after=f""",
spent AS (
    UPDATE session_settings AS s
    SET tokens = bucket.tokens - (SELECT count(*) FROM leased), refilled_at = {LOCKED_NOW}
    FROM bucket WHERE s.session = %(session)s
)""",
        answer=f"""SELECT {LEASE_COLUMNS}, gate.*
FROM (SELECT (SELECT n FROM room) AS room, (SELECT tokens FROM bucket) AS tokens,
             (SELECT rate_per_s FROM settings) AS rate_per_s) AS gate
LEFT JOIN leased ON true
ORDER BY priority DESC, id""",
    )


# -- an operator's view of one lead, and the replay of a session's dead letters -------


@cache
def lead_events() -> str:
    """The newest ``limit`` events of one lead, oldest first, each with ``total``: how many the
    lead has. The session routes it to one shard (index ``lead_events_session_lead``)."""
    return """
SELECT id, event, status, attempt, owner, at, expires_at, total FROM (
    SELECT id, event, status, attempt, owner, at, expires_at, count(*) OVER () AS total
    FROM lead_events WHERE session = %(session)s AND lead_id = %(lead_id)s
    ORDER BY id DESC LIMIT %(limit)s
) AS newest
ORDER BY id
"""


@cache
def retry_failed(ledger: bool) -> str:
    """Dead-letter replay of up to ``limit`` failed leads of a session, as ``retry`` of each.

    Only leads failed by ``before`` (NULL: now; the caller passes back the first batch's
    ``started`` to the next ones), so a lead this call requeued, leased and failed again is
    not requeued twice. FOR UPDATE waits for a row another statement holds and re-checks it
    (a lead retried alone meanwhile is queued, and passed over); only statements that lock
    one row or skip locked rows touch failed leads, so the wait closes no cycle.
    """
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
    SET status = 'queued', error = NULL, result = NULL, lease_token = NULL, available_at = {NOW},
        max_attempts = greatest(l.max_attempts, l.attempts + 1), updated_at = {NOW}
    FROM failed
    WHERE l.id = failed.id AND l.session = %(session)s AND l.status = 'failed'
    RETURNING l.*
){_ledger("retried", "retried", enabled=ledger)}
SELECT count(*) AS retried, {NOW} AS started,
       (SELECT pg_notify('{NOTIFY_CHANNEL}', %(session)s || ' ' || count(*))
        FROM retried HAVING count(*) > 0) AS notified
FROM retried
"""


@cache
def one_snapshot() -> str:
    """The first statement of a read-only transaction whose statements see one instant."""
    return "SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY"
