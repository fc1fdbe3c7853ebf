"""The domain: push, renew, complete, release, sweep, cancel, retry, stats, settings.

State machine of a lead::

    push ──▶ queued ───lease────▶ leased ──complete──▶ done | failed | cached
               ▲  ▲                  │  │
               │  └────release───────┤  │ (lease expired) sweep
               │  └────sweep─────────┼──┤ release or sweep: queued while attempts < max_attempts,
               │                     └──┴─▶ failed once attempts reached it
               └──retry (operator)── failed
    cancel (operator): queued | leased ──▶ failed, error "cancelled"

A lease is valid iff status is ``leased``, the token matches and the database
clock is before ``lease_expires_at``; every guarded statement checks that in
its WHERE clause (see ``app.store.statements``). Each method is one statement, so one round
trip (a push whose keys already exist reads their ids with a second one; a
completion refused looks once more for the same completion done before). A
push with an idempotency key runs in a transaction with its key
(``app.domain.idempotency``). Leasing is ``app.leasing``'s, over this queue.

Group commit (``app.store.group_commit``, on unless ``group_commit=False``): renewals
and completions that arrive while a statement of
their kind runs go together as the next one; each caller still gets its own
answer, checked on its own before it joins. A grouped renewal or completion skips
the rows another transaction holds; their callers send those items again alone,
waiting for the row (one more round trip, for them only), so a lead locked from
outside holds up no caller but its own.

Every method takes ``now``: an instant that replaces the database clock for
that statement, so tests move time without sleeping. Production passes None.

Knows nothing of HTTP, nor of leasing.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, fields, replace
from datetime import datetime
from itertools import accumulate
from typing import Any, NamedTuple, TypeVar

import psycopg
from psycopg.pq import TransactionStatus

from app import metrics
from app.config import DEFAULT_LEASE_TTL_S, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES
from app.domain import dependencies, idempotency, lease_tokens, validation
from app.store import statements
from app.store.group_commit import Grouper
from app.store.pool import Connection, Database, Row, execute
from app.store.statements import Statement
from leaseq.errors import Conflict, LeaseLost, NotFound, QuotaExceeded, Unavailable
from leaseq.limits import INT32_MAX, MAX_ATTEMPTS, MAX_ERROR_CHARS, MAX_KEY_CHARS
from leaseq.model import (
    AllCounts,
    CompleteItem,
    Counts,
    FinalStatus,
    ItemResult,
    Lead,
    NewLead,
    PushResult,
    Renewal,
    RenewItem,
    SessionSettings,
    SweepResult,
)

T = TypeVar("T")

SWEEP_BATCH = 1000
PRUNE_BATCH = 1000
PROMOTE_BATCH = 1000
RETRY_BATCH = 1000
MAX_RETENTION_S = 100 * 366 * 24 * 3600.0
# How long a change of settings waits for the leases in flight (statements.settings_barrier).
SETTINGS_LOCK_TIMEOUT = "2s"
# Items (renew, complete) or leads (lease) one grouped statement carries at most; the calls
# that do not fit go in the next group.
MAX_GROUP_ITEMS = 1000
# A lead's session as a cluster's nodes told it (None: no node in reach has the lead), and
# the nodes out of reach (``host:port, …``; empty when every node answered).
_Located = tuple[str | None, str]
_UNREACHABLE = "database unavailable: node {nodes} is out of reach, and may hold the lead"
# At most this share of the pool's connections waits on rows another transaction holds (the
# renewals and completions sent again alone); the rest of those callers wait for a turn
# without a connection, so many held rows cannot take the pool from everyone else.
HELD_ROWS_POOL_SHARE = 4


async def in_batches(
    batch: Callable[[], Awaitable[Sequence[Row]]], size: int, *counted: str
) -> list[int]:
    """Run ``batch`` (one statement that acts on at most ``size`` rows, answering one row of
    counts) until one comes back short; the sum of each ``counted`` column over the batches.

    Maintenance works so (sweep, promote, prune, the replay of dead letters): each statement
    holds few row locks, for a short time, and the next one sees what the last committed.
    """
    totals = [0] * len(counted)
    while True:
        [row] = await batch()
        done = [int(row[name]) for name in counted]
        totals = [total + n for total, n in zip(totals, done, strict=True)]
        if sum(done) < size:
            return totals


def lead_of(row: Mapping[str, Any]) -> Lead:
    return Lead(**{name: row[name] for name in Lead.__slots__})


def _push_result(
    leads: Sequence[NewLead],
    inserting: set[int],
    inserted: Sequence[Row],
    id_by_key: Mapping[str, int],
) -> PushResult:
    """A push's answer: the ids in input order, a duplicate's existing id in its place."""
    new_keys = {row["key"] for row in inserted if row["key"] is not None}
    # Inserted rows got ascending ids in input order (drawn so by statements.push).
    fresh = iter(row["id"] for row in inserted)
    ids: list[int] = []
    for i, lead in enumerate(leads):
        is_new = i in inserting and (lead.key is None or lead.key in new_keys)
        if is_new:
            ids.append(next(fresh))
        elif lead.key is not None and lead.key in id_by_key:
            ids.append(id_by_key[lead.key])
        else:  # the older lead was pruned between our insert and our read
            raise Conflict(f"leads[{i}].key: the lead with this key vanished; push again")
    return PushResult(ids=ids, created=len(inserted), duplicates=len(leads) - len(inserted))


async def _push_on_shard(conn: Connection, push: Statement) -> list[Row]:
    """``push`` (a built ``statements.push``) as a cluster runs it on the session's shard
    alone: its ids drawn first, in input order, then its rows in key order (as ``push``
    inserts them: two pushes sharing keys take them in one order) by ``push_rows``
    statements of a power of two rows each, in one transaction when there are several, then
    the notification of those available now. The rows inserted, by id (as ``push``'s)."""
    given = push.params
    n = len(given["payloads"])
    ids = [row["id"] for row in await execute(conn, statements.lead_ids(n=n))]
    keys = given["keys"]
    order = sorted(range(n), key=lambda i: (keys[i] is None, keys[i] or ""))
    chunks: list[list[int]] = []
    while order:
        size = min(statements.PUSH_ROWS_MAX, 1 << (len(order).bit_length() - 1))
        chunks.append(order[:size])
        order = order[size:]
    columns = [name for name in _PUSH_COLUMNS if name in given]
    inserted: list[Row] = []
    async with contextlib.AsyncExitStack() as stack:
        if len(chunks) > 1 and conn.info.transaction_status == TransactionStatus.IDLE:
            await stack.enter_async_context(conn.transaction())
        for chunk in chunks:
            rows = statements.push_rows(
                session=given["session"],
                ids=[ids[i] for i in chunk],
                now=given["now"],
                ledger_by_row=given["ledger_by_row"],
                rows=len(chunk),
                **{name: [given[name][i] for i in chunk] for name in columns},
            )
            inserted += await execute(conn, rows)
        if available := sum(row["available"] for row in inserted):
            await execute(conn, statements.pushed_notice(session=given["session"], n=available))
    return sorted(inserted, key=lambda row: row["id"])


# The per-lead columns of ``statements.push``, given to ``push_rows`` in slices.
_PUSH_COLUMNS = (
    "concurrency_keys",
    "delays",
    "depths",
    "has_dependents",
    "keys",
    "max_attempts",
    "max_runtimes",
    "parent_ids",
    "payloads",
    "priorities",
    "traceparents",
)


def counts_by_session(
    rows: Sequence[Mapping[str, Any]],
    ages: Sequence[Mapping[str, Any]] = (),
    blocked: Sequence[Mapping[str, Any]] = (),
) -> dict[str, Counts]:
    """The rows of ``statements.stats_all`` (session, status, n) as counts per session, by
    name, with the age of each session's oldest available lead from those of
    ``statements.oldest_available``, and its blocked leads from ``statements.blocked``."""
    by_session: dict[str, dict[str, Any]] = {}
    for row in rows:
        by_session.setdefault(row["session"], {})[row["status"]] = int(row["n"])
    oldest = {row["session"]: float(row["age_s"]) for row in ages}
    waiting = {row["session"]: int(row["n"]) for row in blocked}
    return {
        name: Counts(
            **counts, blocked=waiting.get(name, 0), oldest_available_age_s=oldest.get(name)
        )
        for name, counts in sorted(by_session.items())
    }


def settings_of(row: Mapping[str, Any] | None) -> SessionSettings:
    """A row of ``statements.settings_get`` or ``settings_all`` as settings; None: the defaults."""
    if row is None:
        return SessionSettings()
    return SessionSettings(
        weight=row["weight"],
        max_leased=row["max_leased"],
        rate_per_s=row["rate_per_s"],
        burst=row["burst"],
        max_leased_per_key=row["max_leased_per_key"],
        max_runtime_s=row["max_runtime_s"],
        max_queued=row["max_queued"],
        paused_until=row.get("paused_until"),
    )


class _Route(NamedTuple):
    """What the renewals or completions of one group share: the injected instant (None: the
    database clock) and, on a cluster, the one session every lease of the group is of (its
    tokens', ``lease_tokens``), whose shard the statement then runs on alone; None: across
    sessions, or on one PostgreSQL, where any leases group together."""

    now: datetime | None
    session: str | None


@dataclass(frozen=True, slots=True)
class _Renewing:
    """One caller's renewals, checked: the columns of ``statements.renew_many``."""

    ids: list[int]
    tokens: list[str]
    ttls: list[float]
    checkpoints: list[str | None]

    def only(self, positions: Sequence[int]) -> _Renewing:
        """The renewals at ``positions``, in that order."""
        return _Renewing(
            [self.ids[i] for i in positions],
            [self.tokens[i] for i in positions],
            [self.ttls[i] for i in positions],
            [self.checkpoints[i] for i in positions],
        )


# The fields of a lead that every push's idempotency key has named since keys came (revision
# 0003); a field added since is named only when set, so a key stored by an older version and
# retried after an upgrade still names the same request.
FIRST_NAMED = ("payload", "priority", "key", "depth", "parent_id", "max_attempts", "delay_s")
_UNSET: dict[str, Any] = {f.name: f.default for f in fields(NewLead)}


def named_by_key(lead: NewLead) -> dict[str, Any]:
    """What a pushed lead says, as its push's idempotency key names it."""
    return {
        name: value
        for name, value in asdict(lead).items()
        if name in FIRST_NAMED or (value != _UNSET[name] and value not in ((), []))
    }


@dataclass(frozen=True, slots=True)
class _Completing:
    """One caller's completions, checked; ``lean``: it needs no lead back (a batch)."""

    items: Sequence[CompleteItem]
    results: list[str | None]
    lean: bool

    def only(self, positions: Sequence[int]) -> _Completing:
        """The completions at ``positions``, in that order."""
        items = [self.items[i] for i in positions]
        return _Completing(items, [self.results[i] for i in positions], self.lean)


# What a grouped renewal or completion answers its caller: its answer, and the positions of
# its items whose row another transaction held (``statements.fragments.busy_answer``):
# those the caller sends again alone, so only it waits for that transaction.
Renewed = tuple[list[ItemResult], list[int]]
Completed = tuple[dict[int, Lead | None], list[int]]


def _per_caller(positions: Iterable[int], sizes: Sequence[int]) -> list[list[int]]:
    """Positions over the items of all callers, as each caller's own (``sizes``: its items)."""
    mine: list[list[int]] = [[] for _ in sizes]
    ends = list(accumulate(sizes))
    caller = start = 0
    for position in sorted(positions):
        while position >= ends[caller]:
            start = ends[caller]
            caller += 1
        mine[caller].append(position - start)
    return mine


def _lead_ids(call: _Renewing) -> frozenset[Hashable]:
    """The leads a renewal names: a second renewal of one of them waits for the next group,
    so each caller is answered with the ttl and checkpoint it sent, never another's."""
    return frozenset(call.ids)


class Queue:
    """The lease queue over one PostgreSQL database (``app.store.pool.Database``).

    Every statement goes through the database's one error mapping and
    cancellation shield: an outage or an exhausted pool is Unavailable.
    With ``group_commit`` (the default), concurrent renewals, completions and
    the plain leases of one session (``app.leasing.session``) share statements
    (``app.store.group_commit``).
    """

    def __init__(
        self,
        db: Database,
        *,
        ledger: bool = True,
        default_ttl_s: float = DEFAULT_LEASE_TTL_S,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
        group_commit: bool = True,
        default_max_queued: int | None = None,
        quota_retry_after_s: int = 5,
    ) -> None:
        self.db = db
        # Backpressure (docs/beyond.md#backpressure): the max_queued of sessions without their
        # own, kept in the database by ``keep_config`` for the trigger that enforces it, and
        # the Retry-After of a refused push.
        self.default_max_queued = default_max_queued
        self.quota_retry_after_s = quota_retry_after_s
        self.ledger = ledger
        self.default_ttl_s = default_ttl_s
        self.default_max_attempts = default_max_attempts
        self.max_payload_bytes = max_payload_bytes
        self.group_commit = group_commit  # leasing groups its plain leases too
        self._held_rows = asyncio.Semaphore(max(1, db.size // HELD_ROWS_POOL_SHARE))
        # Keyed by their route (``_Route``): calls of one instant, and on a cluster of one
        # session, only.
        self._renewals: Grouper[_Route, _Renewing, Renewed] = Grouper(
            self._renew_group,
            max_size=MAX_GROUP_ITEMS,
            size=lambda call: len(call.ids),
            conflicts=_lead_ids,
            on_group=metrics.GROUP_SIZES.labels("renew").observe,
            enabled=group_commit,
        )
        self._completions: Grouper[_Route, _Completing, Completed] = Grouper(
            self._complete_group,
            max_size=MAX_GROUP_ITEMS,
            size=lambda call: len(call.items),
            on_group=metrics.GROUP_SIZES.labels("complete").observe,
            enabled=group_commit,
        )
        # On a cluster, the lookups of the session of one lead each (``session_of``) that
        # arrive together share one ask of every node: a crowd waiting on a few leads'
        # outcomes costs the nodes a few statements, not one each.
        self._locating: Grouper[None, int, _Located] = Grouper(
            self._locate_group, max_size=MAX_GROUP_ITEMS, enabled=group_commit
        )

    @property
    def sharded(self) -> bool:
        """Whether ``leads`` is distributed by session (a Citus cluster), as the database's
        catalog told when the pool connected (``Database.know_topology``): every call of one
        session then names it, so it runs on that session's shard alone from the first
        request on; renewals and completions are grouped by the session of their tokens (a
        group across sessions waits for held rows instead of skipping them); and the upkeep
        of every session (sweep, promote, the counts) runs session by session
        (docs/scaling.md)."""
        return self.db.topology.sharded

    async def _where(self) -> bool:
        """``sharded``, read from the catalog first if the pool has not yet (a fresh
        process, a reconnect): what every verb that builds its statement asks first."""
        return (await self.db.know_topology()).sharded

    @property
    def ledger_in_statement(self) -> bool:
        """Whether a statement writes its own ledger rows (its ``ledger_rows`` CTE): with the
        ledger on, on one PostgreSQL (and on a cluster until the queue knows it is one)."""
        return self.ledger and not self.sharded

    @property
    def ledger_by_row(self) -> bool:
        """Whether a statement names its event in ``leads.ledger_event`` instead, for the row
        trigger that writes the ledger on the lead's shard (a Citus cluster: revision 0016)."""
        return self.ledger and self.sharded

    @property
    def notify_ended(self) -> bool:
        """Whether a statement that ends leads sends the NOTIFY of the watched ones itself
        (``statements.ended_notice``): on a cluster, where no trigger does (docs/scaling.md,
        "Outcome waits on a cluster")."""
        return self.sharded

    async def _rows(self, query: str, params: Mapping[str, Any]) -> list[Row]:
        """The one way the queue's own statements reach the pool (tests watch them here)."""
        return await self.db.rows(query, params)

    async def _run(self, statement: Statement) -> list[Row]:
        """The rows of one built statement, on a pooled connection."""
        return await self._rows(statement.text, statement.params)

    async def across_shards(
        self, locking: Callable[[], Awaitable[T]], otherwise: Callable[[], Awaitable[T]]
    ) -> T:
        """``locking()``, whose statements a cluster refuses or runs on every shard (they lock
        rows of many sessions, or by lead id alone); on a cluster (``sharded``) ``otherwise()``."""
        if await self._where():
            return await otherwise()
        return await locking()

    def _route(self, now: datetime | None, tokens: Iterable[str]) -> _Route:
        """The group of a call with leases of ``tokens``: by session only on a cluster."""
        if not self.sharded:
            return _Route(now, None)
        sessions = {lease_tokens.session_of(token) for token in tokens}
        return _Route(now, sessions.pop() if len(sessions) == 1 else None)

    async def _run_skipping(
        self, build: Callable[[bool], Statement], skip_locked: bool
    ) -> tuple[list[Row], bool]:
        """The rows of ``build(skip_locked)``, and whether it skipped locked rows: a cluster
        refuses to, for rows named by lead id alone."""

        async def run(skipping: bool) -> tuple[list[Row], bool]:
            return await self._run(build(skipping)), skipping

        if not skip_locked:
            return await run(False)
        return await self.across_shards(lambda: run(True), lambda: run(False))

    async def _each_session(
        self,
        of: str,
        now: datetime | None,
        one: Callable[[str | None], Awaitable[T]],
        add: Callable[[list[T]], T],
        *,
        older_than_s: float | None = None,
    ) -> T:
        """``one(None)``, an upkeep of every session at once; on a cluster, ``one(session)`` for
        each session ``sessions_to_keep(of)`` names, each on its own shard, added up."""

        async def each() -> T:
            keep = statements.sessions_to_keep(of=of, now=now, older_than_s=older_than_s)
            rows = await self._run(keep)
            return add([await one(row["session"]) for row in rows])

        return await self.across_shards(lambda: one(None), each)

    # -- producers ---------------------------------------------------------

    async def push(
        self,
        session: str,
        leads: Sequence[NewLead],
        *,
        idempotency_key: str | None = None,
        traceparent: str | None = None,
        now: datetime | None = None,
    ) -> PushResult:
        """Queue up to 1,000 leads; a key already in the session is not pushed again.

        With an ``idempotency_key`` the push happens once: the same push again
        with that key gets the first answer (``app.domain.idempotency``). Raises
        InvalidInput (nothing written) for a bad session, lead or key.

        ``traceparent`` (the request's header, already checked) is stored on each lead that
        carries none of its own. It is not part of the request an idempotency key names: a
        retry sent in another span is the same push (docs/contract.md#trace-context).
        """
        validation.session(session)
        validation.push_batch(leads)
        await self._where()
        wanted = dependencies.Wanted.of(leads)
        to_insert: list[int] = []  # input positions; the first lead of each key only
        first_of_key: set[str] = set()
        payloads: list[str] = []
        for i, lead in enumerate(leads):
            payloads.append(self._check_new_lead(i, lead))
            if lead.key is None or lead.key not in first_of_key:
                to_insert.append(i)
                if lead.key is not None:
                    first_of_key.add(lead.key)
        inserting = set(to_insert)
        rows = [leads[i] for i in to_insert]

        def push_of(parents: frozenset[int]) -> Statement:
            return statements.push(
                session=session,
                has_dependents=[i in parents for i in to_insert],
                priorities=[lead.priority for lead in rows],
                payloads=[payloads[i] for i in to_insert],
                keys=[lead.key for lead in rows],
                depths=[lead.depth for lead in rows],
                parent_ids=[lead.parent_id for lead in rows],
                max_attempts=[lead.max_attempts or self.default_max_attempts for lead in rows],
                delays=[float(lead.delay_s) for lead in rows],
                concurrency_keys=[lead.concurrency_key for lead in rows],
                max_runtimes=[lead.max_runtime_s for lead in rows],
                traceparents=[lead.traceparent or traceparent for lead in rows],
                now=now,
                ledger=self.ledger_in_statement,
                ledger_by_row=self.ledger_by_row,
            )

        async def pushed(conn: Connection, parents: frozenset[int]) -> tuple[PushResult, list[Row]]:
            if self.sharded:
                inserted = await _push_on_shard(conn, push_of(parents))
            else:
                inserted = await execute(conn, push_of(parents))
            id_by_key = {row["key"]: row["id"] for row in inserted if row["key"] is not None}
            if missing := sorted(first_of_key - id_by_key.keys()):
                found = await execute(
                    conn, statements.existing_keys(session=session, keys=list(missing))
                )
                id_by_key.update({row["key"]: row["id"] for row in found})
            return _push_result(leads, inserting, inserted, id_by_key), inserted

        async def insert(conn: Connection) -> PushResult:
            if not wanted.refs:
                return (await pushed(conn, frozenset()))[0]
            async with conn.transaction():  # the leads and their edges, or nothing
                resolved = await dependencies.resolve(conn, session, leads, wanted)
                result, inserted = await pushed(conn, resolved.parents)
                new_ids = {row["id"] for row in inserted}
                await dependencies.add(
                    conn,
                    session,
                    resolved,
                    result.ids,
                    new_ids,
                    now,
                    ledger=self.ledger_in_statement,
                    ledger_by_row=self.ledger_by_row,
                    sharded=self.sharded,
                )
                return result

        try:
            if idempotency_key is None:
                return await self.db.run(insert)
            key = idempotency.check_key(idempotency_key)
            request = {"session": session, "leads": [named_by_key(lead) for lead in leads]}

            async def decode(conn: Connection, answer: Any) -> PushResult:
                return PushResult(**answer)

            return await self.db.run(
                lambda conn: idempotency.once(
                    conn,
                    "push",
                    session,
                    key,
                    request,
                    insert,
                    encode=asdict,
                    decode=decode,
                    now=now,
                )
            )
        except psycopg.Error as exc:
            # The trigger leads_max_queued refused it: the statement (and the key's claim,
            # in the same transaction) rolled back, so a retry is a first try again.
            if exc.sqlstate != statements.QUOTA_SQLSTATE:
                raise
            detail = exc.diag.message_primary or "the push would pass the session's max_queued"
            raise QuotaExceeded(detail, retry_after_s=self.quota_retry_after_s) from None

    async def pushed(self, session: str, key: str) -> PushResult:
        """The answer of the push into ``session`` stored under the ``Idempotency-Key``
        ``key`` (``app.domain.idempotency.pushed``). Raises NotFound when there is none,
        InvalidInput for a bad session or key."""
        validation.session(session)
        checked = idempotency.check_key(key)
        answer = await self.db.run(lambda conn: idempotency.pushed(conn, session, checked))
        if answer is None:
            raise NotFound(f"no push into {session!r} with Idempotency-Key {checked!r}")
        return PushResult(**answer)

    async def keep_config(self) -> None:
        """Keep the service's settings that the database enforces on its own (the default
        max_queued, for leaseq_push in a producer's transaction) in ``leaseq_config``; run
        as the service starts. Several processes: the last to start is the one kept."""
        value = None if self.default_max_queued is None else str(self.default_max_queued)
        await self._run(statements.config_put(name="max_queued", value=value))

    def _check_new_lead(self, i: int, lead: NewLead) -> str:
        """Validate one lead to push; returns its payload as JSON text."""
        field = f"leads[{i}]"
        validation.integer(f"{field}.priority", lead.priority, low=-INT32_MAX - 1, high=INT32_MAX)
        validation.text(f"{field}.key", lead.key, max_chars=MAX_KEY_CHARS, optional=True)
        validation.integer(f"{field}.depth", lead.depth, low=0, high=INT32_MAX)
        if lead.parent_id is not None:
            validation.lead_id(lead.parent_id, f"{field}.parent_id")
        if lead.max_attempts is not None:
            validation.integer(f"{field}.max_attempts", lead.max_attempts, low=1, high=MAX_ATTEMPTS)
        validation.delay(lead.delay_s, f"{field}.delay_s")
        validation.concurrency_key(lead.concurrency_key, f"{field}.concurrency_key")
        validation.max_runtime(lead.max_runtime_s, f"{field}.max_runtime_s")
        validation.traceparent(lead.traceparent, f"{field}.traceparent")
        return validation.payload(
            lead.payload, f"{field}.payload", max_bytes=self.max_payload_bytes
        )

    # -- workers -----------------------------------------------------------

    async def renew(
        self,
        lead_id: int,
        token: str,
        ttl_s: float | None = None,
        *,
        checkpoint: Any = None,
        now: datetime | None = None,
    ) -> Renewal:
        """Extend a valid lease to now + ttl; its new expiry and ttl granted. Raises LeaseLost.

        A ``checkpoint`` (any JSON but null) is stored on the lead, for its next holder.
        """
        item = RenewItem(lead_id, token, ttl_s, checkpoint)
        [answer] = await self._renew([item], now, batch=False)
        if not answer.ok or answer.expires_at is None or answer.ttl_s is None:
            raise await self._why_lost(lead_id, token, now)
        return Renewal(expires_at=answer.expires_at, ttl_s=answer.ttl_s, attempt=answer.attempt)

    async def _why_lost(self, lead_id: int, token: str, now: datetime | None) -> LeaseLost:
        """The refusal of a renewal, with its reason when the lease ended at its maximum
        runtime (a read of its own, on the refused path only)."""
        session = self._route(now, [token]).session
        ran_out = statements.runtime_ran_out(
            ids=[lead_id], tokens=[token], now=now, session=session, routed=session is not None
        )
        if await self._run(ran_out):
            return LeaseLost("the lead's maximum runtime ended", reason="max_runtime")
        return LeaseLost()

    async def renew_many(
        self, items: Sequence[RenewItem], *, now: datetime | None = None
    ) -> list[ItemResult]:
        """Renew up to 100 leases in one statement; one answer per item, in order."""
        validation.item_batch(items)
        return await self._renew(items, now, batch=True)

    async def _renew(
        self, items: Sequence[RenewItem], now: datetime | None, *, batch: bool
    ) -> list[ItemResult]:
        """Every item checked (its checkpoint too) before the one statement renews them."""
        ttls = []
        checkpoints: list[str | None] = []
        for i, item in enumerate(items):
            validation.lead_id(item.lead_id)
            validation.token(item.token)
            ttls.append(validation.ttl(self.default_ttl_s if item.ttl_s is None else item.ttl_s))
            checkpoints.append(
                None
                if item.checkpoint is None
                else validation.json_text(
                    f"items[{i}].checkpoint" if batch else "checkpoint",
                    item.checkpoint,
                    max_bytes=self.max_payload_bytes,
                )
            )
        call = _Renewing(
            [item.lead_id for item in items], [item.token for item in items], ttls, checkpoints
        )
        await self._where()
        route = self._route(now, call.tokens)
        answers, busy = await self._renewals.submit(route, call)
        if busy:  # rows another transaction holds: wait for them, alone
            async with self._held_rows:
                [(again, _)] = await self._renew_group(route, [call.only(busy)], skip_locked=False)
            for position, answer in zip(busy, again, strict=True):
                answers[position] = answer
        return answers

    async def _renew_group(
        self, route: _Route, calls: Sequence[_Renewing], *, skip_locked: bool = True
    ) -> list[Renewed]:
        """One ``renew_many`` for the renewals of every caller (no lead in two of them).

        Grouped, it skips the rows another transaction holds (their items come back busy, to
        be sent again alone); ``skip_locked=False`` waits for them.
        """
        now = route.now
        rows, skip_locked = await self._run_skipping(
            lambda skipping: statements.renew_many(
                ids=[lead_id for call in calls for lead_id in call.ids],
                tokens=[token for call in calls for token in call.tokens],
                ttls=[ttl for call in calls for ttl in call.ttls],
                checkpoints=[checkpoint for call in calls for checkpoint in call.checkpoints],
                session=route.session,
                now=now,
                skip_locked=skipping,
                routed=route.session is not None,
            ),
            skip_locked,
        )
        renewed = {(row["id"], row["token"]): row for row in rows if row["id"] is not None}
        busy = _per_caller(rows[0]["busy"] if skip_locked else [], [len(c.ids) for c in calls])
        answers: list[Renewed] = []
        for call, held in zip(calls, busy, strict=True):
            mine: list[ItemResult] = []
            for lead_id, token in zip(call.ids, call.tokens, strict=True):
                row = renewed.get((lead_id, token))
                if row is None:  # lost, or held (then answered by the renewal sent alone)
                    mine.append(ItemResult(lead_id, False, code=LeaseLost.code))
                else:
                    expires_at, ttl = row["lease_expires_at"], row["ttl_s"]
                    mine.append(
                        ItemResult(
                            lead_id, True, expires_at=expires_at, ttl_s=ttl, attempt=row["attempt"]
                        )
                    )
            answers.append((mine, held))
        return answers

    async def complete(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
        *,
        now: datetime | None = None,
    ) -> Lead:
        """Finish a valid lease as done, failed or cached; returns the lead. Raises LeaseLost.

        Idempotent: the same lead, token and status again after it succeeded
        returns the lead as it was finished and changes nothing.
        """
        item = CompleteItem(lead_id, token, status, result, error)
        leads = await self._complete([item], now, batch=False)
        lead = next(iter(leads.values()), None)
        if lead is None:
            raise LeaseLost()
        return lead

    async def complete_many(
        self, items: Sequence[CompleteItem], *, now: datetime | None = None
    ) -> list[ItemResult]:
        """Complete up to 100 leases in one statement; one answer per item, in order.

        An item its lease already completed with the same status is ok again.
        """
        validation.item_batch(items)
        completed = await self._complete(items, now, batch=True)
        return [
            ItemResult(item.lead_id, True)
            if i in completed
            else ItemResult(item.lead_id, False, code=LeaseLost.code)
            for i, item in enumerate(items)
        ]

    def checked_completions(
        self, items: Sequence[CompleteItem], *, batch: bool
    ) -> list[str | None]:
        """Check each completion; each one's result as JSON text (None: none). Raises
        InvalidInput naming the field (``items[i].result`` in a batch)."""
        for item in items:
            validation.lead_id(item.lead_id)
            validation.token(item.token)
            validation.final_status(item.status)
            validation.text("error", item.error, max_chars=MAX_ERROR_CHARS, optional=True)
        return [
            None
            if item.result is None
            else validation.json_text(
                f"items[{i}].result" if batch else "result",
                item.result,
                max_bytes=self.max_payload_bytes,
            )
            for i, item in enumerate(items)
        ]

    async def _complete(
        self, items: Sequence[CompleteItem], now: datetime | None, *, batch: bool
    ) -> dict[int, Lead | None]:
        """The leads completed, now or by the same completion before, by their item's position.

        A batch reads back only the positions (the leads are None). The items
        not completed now are looked up once more: a completion whose answer
        was lost and which the worker sent again (one more round trip, only
        when something was refused).
        """
        results = self.checked_completions(items, batch=batch)
        call = _Completing(items, results, lean=batch)
        await self._where()
        route = self._route(now, [item.token for item in items])
        done, busy = await self._completions.submit(route, call)
        if busy:  # rows another transaction holds: wait for them, alone
            async with self._held_rows:
                [(again, _)] = await self._complete_group(
                    route, [call.only(busy)], skip_locked=False
                )
            done.update({busy[i]: lead for i, lead in again.items()})
        return done

    async def _complete_group(
        self, route: _Route, calls: Sequence[_Completing], *, skip_locked: bool = True
    ) -> list[Completed]:
        """One ``complete_many`` for the items of every caller, then one ``completed_already``
        for those it refused; each caller's answer by its own item positions.

        Grouped, it skips the rows another transaction holds: their items are neither done
        nor refused but busy, to be sent again alone; ``skip_locked=False`` waits for them.

        A lease named twice (a retry racing its original, in one group or one batch) is
        completed at its first item; the later one is then found done by the same
        completion, as it would be sent after. The leads are read back only when a caller
        needs them (``complete``, not ``complete_many``).
        """
        items = [item for call in calls for item in call.items]
        lean = all(call.lean for call in calls)
        rows, skip_locked = await self._run_skipping(
            lambda skipping: statements.complete_many(
                ids=[item.lead_id for item in items],
                tokens=[item.token for item in items],
                statuses=[item.status for item in items],
                results=[result for call in calls for result in call.results],
                errors=[item.error for item in items],
                session=route.session,
                now=route.now,
                ledger=self.ledger_in_statement,
                ledger_by_row=self.ledger_by_row,
                notify_ended=self.notify_ended,
                lean=lean,
                skip_locked=skipping,
                routed=route.session is not None,
            ),
            skip_locked,
        )
        done = {
            row["item"]: None if lean else lead_of(row) for row in rows if row["item"] is not None
        }
        held = set(rows[0]["busy"]) if skip_locked else set()
        if refused := [i for i in range(len(items)) if i not in done and i not in held]:
            again = statements.completed_already(
                session=route.session,
                routed=route.session is not None,
                ids=[items[i].lead_id for i in refused],
                tokens=[items[i].token for i in refused],
                statuses=[items[i].status for i in refused],
                items=refused,
                lean=lean,
            )
            rows = await self._run(again)
            done.update({row["item"]: None if lean else lead_of(row) for row in rows})
        answers: list[Completed] = []
        start = 0
        for call, busy in zip(calls, _per_caller(held, [len(c.items) for c in calls]), strict=True):
            end = start + len(call.items)
            answers.append(({i - start: done[i] for i in range(start, end) if i in done}, busy))
            start = end
        return answers

    async def release(
        self,
        lead_id: int,
        token: str,
        delay_s: float = 0.0,
        *,
        error: str | None = None,
        throttle_s: float | None = None,
        unstarted: bool = False,
        now: datetime | None = None,
    ) -> Lead:
        """Give a valid lease back: the lead is queued again after ``delay_s``. Raises LeaseLost.

        On the lead's last attempt it fails instead (docs/contract.md#invariant-7), its error
        saying so and carrying ``error``, the holder's reason, when given.
        ``throttle_s``: a cooldown (docs/contract.md#flow-control): the lead is queued
        whatever its attempt, this lease does not count against ``max_attempts``, and the
        lead's session is paused until now + ``throttle_s`` (or later, if it already was).
        ``unstarted``: the holder never started the lead (a lead prefetched, given back at
        a shutdown): this lease does not count against ``max_attempts``, so it cannot fail
        the lead.
        """
        validation.lead_id(lead_id)
        validation.token(token)
        delay = validation.delay(delay_s)
        validation.text("error", error, max_chars=MAX_ERROR_CHARS, optional=True)
        await self._where()
        route = self._route(now, [token])
        throttle = validation.throttle(throttle_s)
        release = statements.release(
            lead_id=lead_id,
            token=token,
            delay_s=delay,
            error=error,
            throttle_s=throttle,
            unstarted=unstarted is True,
            session=route.session,
            now=now,
            ledger=self.ledger_in_statement,
            ledger_by_row=self.ledger_by_row,
            notify_ended=self.notify_ended,
            routed=route.session is not None,
        )
        if route.session is None or throttle is None:
            rows = await self._run(release)
        else:  # routed: the session's pause is a statement of its own, on the same shard

            async def throttled(conn: Connection) -> list[Row]:
                async with conn.transaction():
                    released = await execute(conn, release)
                    if released:
                        await execute(
                            conn,
                            statements.throttle_session(
                                session=released[0]["session"], throttle_s=throttle, now=now
                            ),
                        )
                    return released

            rows = await self.db.run(throttled)
        if not rows:
            raise LeaseLost()
        return lead_of(rows[0])

    # -- maintenance -------------------------------------------------------

    async def sweep(self, session: str, *, now: datetime | None = None) -> SweepResult:
        """Requeue one session's expired leases (failed at max_attempts); others untouched."""
        validation.session(session)
        return await self._sweep(session, now)

    async def sweep_all(self, *, now: datetime | None = None) -> SweepResult:
        """Requeue expired leases in every session: boot recovery and the background sweeper."""
        return await self._each_session(
            "expired",
            now,
            lambda session: self._sweep(session, now),
            lambda swept: SweepResult(
                requeued=sum(one.requeued for one in swept), failed=sum(one.failed for one in swept)
            ),
        )

    async def _sweep(self, session: str | None, now: datetime | None) -> SweepResult:
        """Sweep in batches of SWEEP_BATCH so no statement holds many row locks for long."""
        statement = statements.sweep(
            session=session,
            limit=SWEEP_BATCH,
            now=now,
            ledger=self.ledger_in_statement,
            ledger_by_row=self.ledger_by_row,
            notify_ended=self.notify_ended,
            scoped=session is not None,
        )
        requeued, failed = await in_batches(
            lambda: self._run(statement), SWEEP_BATCH, "requeued", "failed"
        )
        return SweepResult(requeued=requeued, failed=failed)

    async def promote(self, *, now: datetime | None = None) -> int:
        """Make delayed leads that came due ready to lease (any session); returns how many.

        A lease promotes its own session's due leads too; this keeps the rest
        (and the dashboard's oldest age) current. Batches of PROMOTE_BATCH.
        """

        async def promote(session: str | None) -> int:
            statement = statements.promote(
                session=session, limit=PROMOTE_BATCH, now=now, scoped=session is not None
            )
            [promoted] = await in_batches(lambda: self._run(statement), PROMOTE_BATCH, "promoted")
            return promoted

        return await self._each_session("due", now, promote, sum)

    async def prune(
        self,
        older_than_s: float,
        session: str | None = None,
        *,
        now: datetime | None = None,
        batch: int = PRUNE_BATCH,
    ) -> int:
        """Delete terminal leads unchanged for ``older_than_s`` seconds; returns how many.

        Terminal is done, failed or cached; their ``lead_events`` rows go with
        them, and queued or leased leads are never touched. Runs in batches of
        ``batch`` leads, one short statement each, so no lock is held for long.
        A pruned lead's key can be pushed again.
        """
        older = validation.seconds("older_than_s", older_than_s, low=0, high=MAX_RETENTION_S)
        limit = validation.integer("batch", batch, low=1, high=100_000)

        async def prune(scope: str | None) -> int:
            statement = statements.prune(
                session=scope, older_than_s=older, limit=limit, now=now, scoped=scope is not None
            )
            [pruned] = await in_batches(lambda: self._run(statement), limit, "pruned")
            return pruned

        if session is not None:
            return await prune(validation.session(session))
        return await self._each_session("terminal", now, prune, sum, older_than_s=older)

    async def prune_keys(
        self, older_than_s: float, *, now: datetime | None = None, batch: int = PRUNE_BATCH
    ) -> int:
        """Forget idempotency keys older than ``older_than_s`` seconds; returns how many."""
        older = validation.seconds("older_than_s", older_than_s, low=0, high=MAX_RETENTION_S)

        async def prune(skip_locked: bool) -> int:
            statement = statements.prune_keys(
                older_than_s=older, limit=batch, now=now, skip_locked=skip_locked
            )
            [pruned] = await in_batches(lambda: self._run(statement), batch, "pruned")
            return pruned

        return await self.across_shards(lambda: prune(True), lambda: prune(False))

    async def fold_counts(self) -> None:
        """Keep ``lead_counts`` small: fold its slots into one row per session and status, and
        forget the counts that came to zero (the pruner's; the counts read the same after)."""

        async def fold(session: str | None) -> None:
            scoped = session is not None
            await self._run(statements.fold_counts(session=session, scoped=scoped))
            await self._run(statements.forget_zero_counts(session=session, scoped=scoped))

        await self._each_session("counts", None, fold, lambda _: None)

    async def forget_frees(self) -> None:
        """Delete the frees of keys in sessions without a cap per key: no lease reads them
        (the pruner's; ``app.store.statements.parking``)."""

        async def forget(session: str | None) -> None:
            scoped = session is not None
            await self._run(statements.forget_frees(session=session, scoped=scoped))

        await self._each_session("frees", None, forget, lambda _: None)

    async def cancel(self, lead_id: int, *, now: datetime | None = None) -> Lead:
        """Fail a queued or leased lead with error "cancelled".

        Raises NotFound, or Conflict if the lead is terminal.
        """
        validation.lead_id(lead_id)
        session = await self.session_of(lead_id)
        return await self._operator(
            statements.cancel(
                lead_id=lead_id,
                now=now,
                ledger=self.ledger_in_statement,
                ledger_by_row=self.ledger_by_row,
                notify_ended=self.notify_ended,
                routed=session is not None,
                session=session,
            ),
            "terminal",
        )

    async def retry(self, lead_id: int, *, now: datetime | None = None) -> Lead:
        """Queue a failed lead again (dead-letter replay).

        Raises NotFound, or Conflict if the lead is not failed.
        """
        validation.lead_id(lead_id)
        session = await self.session_of(lead_id)
        return await self._operator(
            statements.retry(
                lead_id=lead_id,
                now=now,
                ledger=self.ledger_in_statement,
                ledger_by_row=self.ledger_by_row,
                routed=session is not None,
                session=session,
            ),
            "not failed",
        )

    async def retry_failed(
        self, session: str, *, now: datetime | None = None, batch: int = RETRY_BATCH
    ) -> int:
        """Queue every failed lead of a session again, as ``retry`` does each; returns how many.

        The leads failed when it began, each once, in batches of ``batch`` so no statement
        holds many row locks for long; a lead that fails after it began is left for the next
        call. Raises InvalidInput.
        """
        validation.session(session)
        limit = validation.integer("batch", batch, low=1, high=100_000)
        before: datetime | None = None  # the first batch's start, for the batches after

        async def one_batch() -> list[Row]:
            nonlocal before
            rows = await self._run(
                statements.retry_failed(
                    session=session,
                    before=before,
                    limit=limit,
                    now=now,
                    ledger=self.ledger_in_statement,
                    ledger_by_row=self.ledger_by_row,
                )
            )
            before = before or rows[0]["started"]
            return rows

        [retried] = await in_batches(one_batch, limit, "retried")
        return retried

    async def _operator(self, statement: Statement, why: str) -> Lead:
        """An operator's verb on one lead (``cancel``, ``retry``); Conflict says why not."""
        rows = await self._run(statement)
        if rows:
            return lead_of(rows[0])
        lead_id = statement.params["lead_id"]
        current = await self.get(lead_id)  # only on the refusal path: which refusal?
        raise Conflict(f"cannot {statement.name} lead {lead_id}: it is {current.status} ({why})")

    # -- reading -----------------------------------------------------------

    async def get(self, lead_id: int) -> Lead:
        """One lead by id. Raises NotFound."""
        validation.lead_id(lead_id)
        session = await self.session_of(lead_id)
        rows = await self._run(
            statements.get(lead_id=lead_id, routed=session is not None, session=session)
        )
        if not rows:
            raise NotFound(f"no lead {lead_id}")
        return lead_of(rows[0])

    async def session_of(self, lead_id: int) -> str | None:
        """The session a statement by ``lead_id`` names beside it: None on one PostgreSQL
        (the lead's id finds it); on a Citus cluster the lead's session, found first
        (``_sessions_on_nodes``' ask of every node, shared by the lookups that arrive together),
        so that the statement touches that session's shard alone. Raises NotFound (a lead
        no node has), Unavailable (a node that may have it is stopped)."""
        if not await self._where():
            return None
        session, unreachable = await self._locating.submit(None, lead_id)
        if session is not None:
            return session
        if unreachable:
            raise Unavailable(_UNREACHABLE.format(nodes=unreachable))
        raise NotFound(f"no lead {lead_id}")

    async def sessions_of(self, lead_ids: Iterable[int]) -> dict[int, str]:
        """The session of each of these leads that exists.

        On a Citus cluster a lead id alone names no shard, and a statement by id reaches every
        node: one stopped node would fail it for every lead. So each node that holds shards
        of ``leads`` is asked for its own (``statements.lead_sessions_on_nodes``): a node out
        of reach fails only the leads no other node has (Unavailable), never the others.
        """
        ids = sorted(set(lead_ids))
        if not ids:
            return {}
        if not await self._where():
            rows = await self._run(statements.lead_sessions(ids=ids))
            return {row["id"]: row["session"] for row in rows}
        found, unreachable = await self._sessions_on_nodes(ids)
        if unreachable and len(found) < len(ids):
            raise Unavailable(_UNREACHABLE.format(nodes=unreachable))
        return found

    async def _locate_group(self, key: None, lead_ids: Sequence[int]) -> list[_Located]:
        found, unreachable = await self._sessions_on_nodes(sorted(set(lead_ids)))
        return [(found.get(lead_id), unreachable) for lead_id in lead_ids]

    async def _sessions_on_nodes(self, ids: list[int]) -> tuple[dict[int, str], str]:
        """The session of each of ``ids`` that a node in reach has, and the nodes out of
        reach (``host:port, …``; empty when every node answered)."""
        found: dict[int, str] = {}
        unreachable: list[str] = []
        for row in await self._run(statements.lead_sessions_on_nodes(ids=ids)):
            if not row["success"]:
                unreachable.append(f"{row['node']}:{row['port']}")
                continue
            for pair in filter(None, (row["result"] or "").split(",")):
                lead, _, session = pair.partition(" ")
                found[int(lead)] = session
        return found, ", ".join(sorted(unreachable))

    async def stats(self, session: str, *, now: datetime | None = None) -> Counts:
        """Lead counts by status in one session (all zero for an unknown session), with the age
        of its oldest lead that could be leased now."""
        validation.session(session)
        rows = await self._run(statements.stats(session=session, now=now))
        counts = {row["status"]: row["n"] for row in rows if row["status"] is not None}
        blocked = await self._run(statements.blocked(session=session))
        first = rows[0]
        return Counts(
            **counts,
            blocked=sum(int(row["n"]) for row in blocked),
            oldest_available_age_s=first["age_s"],
            paused_until=first["paused_until"],
        )

    async def stats_all(self, *, now: datetime | None = None) -> AllCounts:
        """Lead counts per session, and their total; each with its oldest available lead's age."""

        async def read(conn: Connection) -> tuple[list[Row], list[Row], list[Row], list[Row]]:
            counts = await execute(conn, statements.stats_all())
            ages = await execute(conn, statements.oldest_available(now=now))
            paused = await execute(conn, statements.paused_all(now=now))
            return counts, ages, paused, await execute(conn, statements.blocked(session=None))

        counts, ages, paused, blocked = await self.db.run(read)
        sessions = counts_by_session(counts, ages, blocked)
        for row in paused:
            if row["session"] in sessions:
                counts_of = sessions[row["session"]]
                sessions[row["session"]] = replace(counts_of, paused_until=row["paused_until"])
        return AllCounts(sessions=sessions, total=sum(sessions.values(), Counts()))

    async def available(self, *, now: datetime | None = None) -> dict[str, float]:
        """The sessions with a lead that could be leased now, and that lead's age in seconds."""
        rows = await self._run(statements.oldest_available(now=now))
        return {row["session"]: float(row["age_s"]) for row in rows}

    # -- settings ----------------------------------------------------------

    async def settings(self, session: str) -> SessionSettings:
        """A session's settings (the defaults for one never set)."""
        validation.session(session)
        rows = await self._run(statements.settings_get(session=session, now=None))
        return settings_of(rows[0] if rows else None)

    async def settings_all(self) -> dict[str, SessionSettings]:
        """The settings of every session they were set for, by name."""
        return {
            row["session"]: settings_of(row)
            for row in await self._run(statements.settings_all(now=None))
        }

    async def put_settings(
        self, session: str, settings: SessionSettings, *, now: datetime | None = None
    ) -> SessionSettings:
        """Store a session's weight, cap and rate; returns them. Raises InvalidInput (nothing
        stored) for a bad one, Unavailable when leases in flight hold the change back too long.

        The change waits for the lease statements in flight and holds new ones back until it
        is stored (milliseconds), so a cap binds every lease that begins after it answers.
        The leads parked behind a full key are brought back (``statements.unpark_session``).
        """
        validation.session(session)
        validation.session_settings(settings)
        put = statements.settings_put(
            session=session,
            weight=settings.weight,
            max_leased=settings.max_leased,
            rate_per_s=settings.rate_per_s,
            burst=settings.burst,
            max_leased_per_key=settings.max_leased_per_key,
            max_runtime_s=settings.max_runtime_s,
            max_queued=settings.max_queued,
            now=now,
        )

        async def store(conn: Connection) -> SessionSettings:
            async with conn.transaction():
                await execute(conn, statements.lock_timeout(timeout=SETTINGS_LOCK_TIMEOUT))
                await execute(conn, statements.settings_barrier())
                [row] = await execute(conn, put)
                # Under the settings' lock, after them: the parked leads of a key at its
                # cap go back, and the next leases park what the new settings hold back.
                await execute(conn, statements.unpark_session(session=session, now=now))
            return settings_of(row)

        return await self.db.run(store)

    # -- pause and resume (docs/contract.md#flow-control) -------------------------------------

    async def pause(
        self, session: str, for_s: float | None = None, *, now: datetime | None = None
    ) -> SessionSettings:
        """Pause a session: no lease of it begins until now + ``for_s`` (None: until resumed).
        Leases held go on. One statement: every lease statement begun after it answers, in any
        process, reads the pause. Returns the settings, with ``paused_until``."""
        validation.session(session)
        [row] = await self._run(
            statements.pause(session=session, for_s=validation.pause_for(for_s), now=now)
        )
        return settings_of(row)

    async def resume(self, session: str, *, now: datetime | None = None) -> SessionSettings:
        """End a session's pause (a throttled release's too) and wake its waiting leases."""
        validation.session(session)
        rows = await self._run(statements.resume(session=session))
        return settings_of(rows[0] if rows else None)

    async def db_now(self) -> datetime:
        """The database clock (tests build injected instants from it)."""
        [row] = await self._run(statements.db_now())
        return row["now"]  # type: ignore[no-any-return]
