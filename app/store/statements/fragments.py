"""The pieces every statement is written from: the clock, the ledger, the lease check.

Rules that hold for every statement of ``app.store.statements``:

* One statement per operation: the ledger row is written by a data-modifying
  CTE in the same statement, so a transition and its event commit together.
* Every guarded statement re-checks the lease in its own WHERE clause —
  status, token and expiry against the database clock — never by reading first
  and writing after. "No row matched" is how a lost lease shows.
* ``NOW`` is the database clock, or an injected instant in tests: the
  parameter ``now`` is bound to that instant, or to ``DB_CLOCK`` (the builders
  of ``_build`` do it). Inside one statement the instant is constant, so a
  statement reaches one verdict. No ``coalesce(%(now)s, now())`` (River's way):
  Citus refuses a stable function inside ``COALESCE`` or ``CASE`` in a
  modification, and a stable function of a column (``timestamptz + interval``)
  anywhere in an ``UPDATE``, so an instant plus a column's seconds is
  ``plus_seconds`` (docs/scaling.md, "The clock on a cluster").
* No SQL is built from input: only constants are interpolated; values are
  bound parameters, written ``%(name)s`` as psycopg takes them (a literal
  ``%`` is ``%%``). Nothing is compiled: the text is what PostgreSQL gets, and
  ``app/store/sql/`` shows every one whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import fields

from leaseq.limits import (
    MAX_BURST,
    MAX_RATE_PER_S,
    MAX_WEIGHT,
    MIN_BURST,
    MIN_RATE_PER_S,
    MIN_WEIGHT,
)
from leaseq.model import FINAL_STATUSES, Lead

# PostgreSQL's input for the start of the current transaction: ``'now'::timestamptz`` is
# the instant ``now()`` gives, read when the parameter is bound.
DB_CLOCK = "now"
NOW = "%(now)s::timestamptz"


def plus_seconds(instant: str, seconds: str) -> str:
    """``instant + seconds`` in immutable arithmetic (on UTC timestamps, exact to the
    microsecond as ``timestamptz + interval`` is), so Citus may ship it to a shard with a
    column in ``seconds`` (the stable ``timestamptz + interval`` it refuses there)."""
    return f"(({instant} AT TIME ZONE 'UTC') + make_interval(secs => {seconds})) AT TIME ZONE 'UTC'"


# A notification's payload: the session, a space, and how many leads became available
# (session names hold no space), so a process wakes that many of its waiters.
NOTIFY_CHANNEL = "leaseq_queued"


def notify(payload: str) -> str:
    """A notification on ``NOTIFY_CHANNEL`` as a boolean column (always false): ``pg_notify``
    itself returns ``void``, a column Citus cannot keep in the intermediate result of a
    statement it plans through the coordinator (where the notification is then sent)."""
    return f"pg_notify('{NOTIFY_CHANNEL}', {payload}) IS NULL"


# The events that end an attempt: the dashboard's throughput counts them, and
# index lead_events_outcomes_at (app.store.schema) covers exactly them.
OUTCOME_EVENTS = ("completed", "expired", "released")


def in_list(values: Iterable[str]) -> str:
    """Constants as an SQL list: ``('a', 'b')``. Only for the statements' own constants."""
    return f"({', '.join(repr(value) for value in values)})"


TERMINAL = in_list(FINAL_STATUSES)


# A lead's columns: the fields of the client's ``Lead``, the one list of them.
LEAD_COLUMNS = ", ".join(field.name for field in fields(Lead))
# A lease statement's row: the lead, the lease's token, and where its maximum runtime ends.
LEASE_COLUMNS = f"{LEAD_COLUMNS}, lease_token, runtime_ends_at"


EVENT_COLUMNS = "lead_id, session, event, status, attempt, owner, at, expires_at"


def ledger_rows(
    source: str,
    event: str,
    *,
    expires_at: str = "NULL",
    enabled: bool,
    clock: str = NOW,
    name: str = "ledger",
) -> str:
    """A CTE (``name``) that appends one lead_events row per row of ``source``; empty when
    off."""
    if not enabled:
        return ""
    return f""",
{name} AS (
    INSERT INTO lead_events ({EVENT_COLUMNS})
    SELECT id, session, '{event}', status, attempts, owner, {clock}, {expires_at} FROM {source}
)"""


def logged(event: str) -> str:
    """The SET item that names ``event`` for the ledger's row trigger of a Citus cluster
    (revision 0016, docs/scaling.md, "The ledger on a cluster"), when the statement is given
    ``ledger_by_row``; else NULL, the column at rest. There a statement's ``ledger_rows``
    CTE would make Citus plan it in pieces through every node; the trigger writes the row on
    the lead's shard instead, and nulls the column again."""
    return f"ledger_event = CASE WHEN %(ledger_by_row)s::bool THEN '{event}' END"


def valid_lease(routed: bool = False) -> str:
    """The lease of ``req`` is valid on lead ``l``; ``routed``: and ``l`` is of the session
    ``%(session)s`` (the lease token's: ``app.domain.lease_tokens``), which on a Citus
    cluster routes the statement to that session's shard alone."""
    return (
        f"l.status = 'leased' AND l.lease_token = req.token AND l.lease_expires_at > {NOW}"
        f"{' AND l.session = %(session)s' if routed else ''}"
    )


VALID_LEASE = valid_lease()


def locked_rows(routed: bool) -> str:
    """A grouped statement locks the rows it changes first, skipping those another
    transaction holds (an operator's SELECT … FOR UPDATE, a slow migration): it never waits
    on a row lock, so one locked lead cannot hold up the other callers of its group nor the
    groups after."""
    return f"""
locked AS MATERIALIZED (
    SELECT l.id FROM req JOIN leads AS l ON l.id = req.lead_id
    WHERE {valid_lease(routed)}
    FOR UPDATE OF l SKIP LOCKED
),"""


def busy_answer(changed: str, items: str, columns: str, *, routed: bool) -> str:
    """``columns`` of every row of ``changed``, each with ``busy``: the positions (from 0) of
    the items of ``items`` whose lease was valid but whose row another transaction held, so it
    was skipped; one row of NULLs and ``busy`` when nothing changed. The caller sends those
    items again with the plain statement, which waits for the row."""
    return f"""
SELECT {columns}, busy.items AS busy FROM (
    SELECT array(
        SELECT req.ord - 1 FROM {items} AS req
        WHERE req.lead_id NOT IN (SELECT id FROM locked)
          AND EXISTS (SELECT FROM leads AS l WHERE l.id = req.lead_id AND {valid_lease(routed)})
        ORDER BY req.ord
    ) AS items
) AS busy LEFT JOIN {changed} ON true
"""


ONLY_LOCKED = " AND l.id IN (SELECT id FROM locked)"


def only_session(scoped: bool, column: str = "session") -> str:
    """``AND column = %(session)s`` in a statement scoped to one session; nothing across
    sessions."""
    return f"AND {column} = %(session)s" if scoped else ""


def qualified(columns: str) -> str:
    """``a, b`` as ``l.a, l.b``."""
    return ", ".join(f"l.{name.strip()}" for name in columns.split(","))


# -- fleets: settings per session, limited leases, the scaling signal -----------------------

# A session whose leases are held to a cap or a rate: leased under its settings' lock.
LIMITED = "(max_leased IS NOT NULL OR rate_per_s IS NOT NULL OR max_leased_per_key IS NOT NULL)"


# The limited lease's clock: the statement's start, after the lock was granted, so
# leases of one session are stamped in the order they took the lock. On the database clock
# ``now`` is the transaction's start, so the time since is added; an injected instant
# (never the transaction's start) is taken as it is. No CASE: Citus refuses one here.
LOCKED_NOW = f"""({NOW} + (statement_timestamp() - transaction_timestamp())
        * ({NOW} = transaction_timestamp())::int)"""


SETTINGS_COLUMNS = (
    "weight, max_leased, rate_per_s, burst, max_leased_per_key, max_runtime_s, max_queued"
)


# The longest span of time a statement works with, in seconds (about 31,700 years): any two
# finite timestamps are closer; only an infinite one, written by hand, is further.
MAX_SPAN_S = 1e12


def within(column: str, low: float, high: float) -> str:
    """``column`` held to [``low``, ``high``], NULL kept as NULL (``least`` and ``greatest``
    alone skip NULLs). NaN, which PostgreSQL orders above every number, reads as ``high``."""
    return f"CASE WHEN {column} IS NOT NULL THEN least(greatest({column}, {low!r}), {high!r}) END"


# The settings as every statement reads them: each held to its range (``leaseq.limits``), so
# a row stored before the ranges, or written by hand, reads and leases as the nearest
# setting the API accepts, never as arithmetic that fails. max_leased is an integer >= 0.
SETTINGS = (
    f"{within('weight', MIN_WEIGHT, MAX_WEIGHT)} AS weight, max_leased, "
    f"{within('rate_per_s', MIN_RATE_PER_S, MAX_RATE_PER_S)} AS rate_per_s, "
    f"{within('burst', MIN_BURST, MAX_BURST)} AS burst, max_leased_per_key, max_runtime_s, "
    "max_queued"
)

# -- flow control (docs/contract.md#flow-control) -------------------------------------------

# A pause without an end: shown as this instant, far in the future.
FOREVER = "'9999-12-31 00:00:00+00'::timestamptz"
# When a session's pause ends, NULL when it is not paused now (settings and stats show it).
PAUSED_UNTIL = f"CASE WHEN paused_until > {NOW} THEN paused_until END AS paused_until"
# A lease on its lead's last attempt: the leases ended by a throttled release are not counted.
LAST_ATTEMPT = "l.attempts - l.throttles >= l.max_attempts"


def seconds_between(earlier: str, later: str) -> str:
    """Seconds from ``earlier`` to ``later`` (SQL timestamps), held to ±MAX_SPAN_S: taken from
    their epochs (numeric, where an infinite timestamp is an infinite number instead of the
    error of subtracting it), so no timestamp a row holds can fail the statement."""
    span = f"extract(epoch FROM {later}) - extract(epoch FROM {earlier})"
    return f"({within(span, -MAX_SPAN_S, MAX_SPAN_S)})::float8"


def oldest_available_probes(session: str) -> tuple[str, str, str]:
    """When the oldest lead of ``session`` (an SQL expression) that could be leased now became
    available, as three queries of one row, NULL for none: its oldest ready lead
    (``leads_ready_age``), its oldest due scheduled one (``leads_scheduled_due``), one
    index probe each, and the best parked lead of each key that freed room since the
    session's last limited lease, which its next one brings back (a probe of
    ``leads_parked`` per such key: app.store.statements.parking)."""
    return (
        f"""SELECT min(available_at) AS at FROM leads
         WHERE session = {session} AND status = 'queued' AND NOT scheduled""",
        f"""SELECT min(available_at) AS at FROM leads
         WHERE session = {session} AND scheduled AND available_at <= {NOW}""",
        f"""SELECT min(back.at) AS at FROM lead_key_frees AS f
         CROSS JOIN LATERAL (
             SELECT ready_at AS at FROM leads
             WHERE session = {session} AND concurrency_key = f.concurrency_key
               AND status = 'queued' AND parked
             ORDER BY priority DESC, id LIMIT 1) AS back
         WHERE f.session = {session}""",
    )


def oldest_available_at(session: str) -> str:
    """The earliest of ``oldest_available_probes``: NULL when ``session`` has no such lead."""
    ready, due, back = oldest_available_probes(session)
    return f"least(\n        ({ready}),\n        ({due}),\n        ({back}))"


def age_of(since: str) -> str:
    """Seconds from ``since`` (a column) to now on the database clock: never below 0, and NULL
    for NULL (which ``greatest`` alone would turn into 0)."""
    return f"CASE WHEN {since} IS NOT NULL THEN greatest(0, {seconds_between(since, NOW)}) END"


def held_of_key(key: str, cap: str) -> str:
    """The leads of one concurrency key of the session leased now, counted up to ``cap``
    (SQL for each), through the index ``leads_leased_keys``: the leased leads of that key
    alone, never the waiting ones nor other keys'."""
    return f"""(SELECT count(*) FROM (
            SELECT FROM leads AS h
            WHERE h.session = %(session)s AND h.status = 'leased' AND h.concurrency_key = {key}
            LIMIT {cap}) AS held)"""
