"""One session's lease: plain, grouped, limited or keyed, each its statement or transaction.

A session without limits is one statement (``statements.lease_next``), and
the plain leases of one session that arrive while one of its lease
statements runs go together as the next (``statements.lease_group``, through
the ``Grouper``): one round trip per plain lease, never more. A session with
a cap or a rate (found so by that statement, or last time) is leased in a
transaction that first locks its settings row (``statements.lock_settings``;
then, with a cap per key, ``statements.tend_keys``; then
``statements.lease_limited``), so its leases take turns and each counts what
is held after the one before committed: across every API process, it never
holds more than ``max_leased``. A request with an idempotency key, and a
completion with ``next``, run in one statement that stores the key's answer too
(``statements.lease_keyed``, ``statements.complete_and_lease``), or together with the
others of their session that arrived with them (``app.leasing.together``); for a limited
session or a retry that overtakes its first try, in a transaction with its key
(``app.domain.idempotency``).

Knows nothing of HTTP, of the fleet and of the long poll.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any

from app import metrics
from app.domain import idempotency, lease_tokens
from app.domain.access import in_scope
from app.domain.queue import MAX_GROUP_ITEMS, Queue
from app.leasing.request import LeaseRequest
from app.leasing.together import Plain, Together, Took, lease_of, take_together
from app.store import statements
from app.store.group_commit import Grouper
from app.store.pool import Connection, execute
from app.store.statements import PARK_MARGIN, Statement
from leaseq.model import CompleteItem, Lead, Lease

# What shares a lease statement: a session, the instant (tests), and a scoped token's hash.
GroupKey = tuple[str, datetime | None, str | None]
# together.py's: also where its callers' keys are kept (one session's, or across sessions').
TogetherKey = tuple[str, datetime | None, str | None, str]


@dataclass(frozen=True, slots=True)
class Leased:
    """What a lease of one session took, and what held it back, if anything.

    ``capped``: the session holds ``max_leased`` leads now (no room is left);
    ``next_token_s``: its bucket holds no whole token, and will in this many
    seconds. A caller choosing among sessions skips such a session meanwhile.
    """

    leases: list[Lease] = field(default_factory=list)
    capped: bool = False
    next_token_s: float | None = None


def _held_back(leases: list[Lease], gate: Mapping[str, Any]) -> Leased:
    """``leases``, and what ``statements.lease_limited``'s answer (``gate``, any of its rows)
    says held the session back once they were taken: no room under its cap, no whole token
    left."""
    room, tokens, rate = gate["room"], gate["tokens"], gate["rate_per_s"]
    capped = room is not None and room <= len(leases)
    left = None if tokens is None else tokens - len(leases)
    next_token_s = None if left is None or left >= 1 else (1 - left) / rate
    return Leased(leases, capped, next_token_s)


class SessionLeases:
    """The leases of one session at a time, for this process (see the module docstring)."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        # Sessions last found limited: their leases go straight to the limited path, whose
        # lock finds out if they still are. A hint that saves a round trip, never a decision.
        self._limited: set[str] = set()
        # Keyed by session (and instant, and a scoped token's hash, which a lease statement
        # checks for all its callers at once): one lease statement per session at a time.
        self._groups: Grouper[GroupKey, Plain, Leased | None] = Grouper(
            self._lease_group,
            max_size=MAX_GROUP_ITEMS,
            size=lambda call: call.max,
            on_group=metrics.GROUP_SIZES.labels("lease").observe,
            enabled=queue.group_commit,
        )
        # Keyed leases and completions with next, by session (and instant, token, and where
        # their keys are kept): together.py.
        self._together: Grouper[TogetherKey, Together, Took | None] = Grouper(
            lambda key, calls: take_together(self.queue, key[0], key[1], calls),
            max_size=MAX_GROUP_ITEMS,
            size=Together.size,
            conflicts=Together.conflicts,
            on_group=metrics.GROUP_SIZES.labels("lease_together").observe,
            enabled=queue.group_commit,
        )

    async def lease(
        self, session: str, request: LeaseRequest, now: datetime | None = None
    ) -> Leased:
        """Lease up to ``request.max`` leads of ``session``, highest priority then oldest,
        saying what held the session back (its cap, its rate). ``now`` replaces the
        database clock (tests); production passes None. A session outside the request's
        ``scope`` (a scoped token's patterns) is never leased: no statement runs."""
        if not in_scope(request.scope, session):
            return Leased()
        call = self._call(session, request)
        db = self.queue.db
        await db.know_topology()  # its statements name the session on a cluster
        if request.idempotency_key is not None:
            if session not in self._limited:
                keyed = await self._lease_keyed(session, request, now, call)
                if keyed is not None:
                    return keyed
            return await db.run(
                lambda conn: idempotency.once(
                    conn,
                    "lease",
                    idempotency.session_of(request.session),
                    request.idempotency_key,  # type: ignore[arg-type]
                    request.stands_for(call.ttl),
                    lambda conn: self._lease_one(conn, session, now, call),
                    encode=_encode,
                    decode=lambda conn, answer: _decode(conn, answer, now),
                    now=now,
                )
            )
        if session in self._limited:
            return await db.run(lambda conn: self._lease_one(conn, session, now, call))
        grouped = await self._groups.submit((session, now, call.api_token), call)
        if grouped is not None:
            return grouped
        return await db.run(lambda conn: self._lease_limited(conn, session, now, call))

    def _lease_next(self, session: str, now: datetime | None, call: Plain) -> Statement:
        """The plain lease statement of one caller."""
        return statements.lease_next(
            session=session,
            max=call.max,
            owner=call.owner,
            tokens=call.tokens,
            ttl_s=call.ttl,
            now=now,
            ledger=self.queue.ledger_in_statement,
            ledger_by_row=self.queue.ledger_by_row,
            api_token=call.api_token,
        )

    def _ttl(self, request: LeaseRequest) -> float:
        """The ttl ``request`` is granted: its own, else the service's default."""
        return self.queue.default_ttl_s if request.ttl_s is None else request.ttl_s

    def _call(self, session: str, request: LeaseRequest) -> Plain:
        """``request`` as one caller's lease of ``session``: its ttl and a new token for each
        lead it may take."""
        tokens = [lease_tokens.mint(session) for _ in range(request.max)]
        return Plain(request.owner, request.max, self._ttl(request), tokens, request.api_token)

    async def remembered(self, request: LeaseRequest, now: datetime | None) -> list[Lease]:
        """The leases a keyed request's first try took that are still valid; [] when it has
        no key, or its key is free. Raises InvalidInput when the key was used for another
        request."""
        if request.idempotency_key is None:
            return []
        found = await self.queue.db.rows(
            statements.remembered(
                session=idempotency.session_of(request.session),
                verb="lease",
                key=request.idempotency_key,
            )
        )
        if not found:
            return []
        asked = idempotency.fingerprint(request.stands_for(self._ttl(request)))
        answer = idempotency.answer_for(asked, found[0]["request"], found[0]["answer"])
        return (await self.queue.db.run(lambda conn: _decode(conn, answer, now))).leases

    async def refuse_reused_key(self, request: LeaseRequest) -> None:
        """Raise InvalidInput when ``request``'s key names another request already; nothing
        when it has no key, its key is free, or names this very request (a retry).

        One read of the key, by a keyed request only: on a cluster by its session (its
        shard), on one PostgreSQL by ``(verb, key)``, where a key is one whatever its
        session (revision 0026), as the lease's own claim would find it."""
        key = request.idempotency_key
        if key is None:
            return
        await self.queue.db.know_topology()
        if self.queue.sharded:
            session = idempotency.session_of(request.session)
            look = statements.remembered(session=session, verb="lease", key=key)
        else:
            look = statements.remembered_anywhere(verb="lease", key=key)
        found = await self.queue.db.rows(look)
        if found:
            asked = idempotency.fingerprint(request.stands_for(self._ttl(request)))
            idempotency.answer_for(asked, found[0]["request"], found[0]["answer"])

    async def complete_and_lease(
        self,
        session: str,
        request: LeaseRequest,
        item: CompleteItem,
        result: str | None,
        now: datetime | None,
    ) -> tuple[Lead, Leased | None] | None:
        """``item``'s completion (``result``: its result checked, as JSON text) and then
        ``request``'s lease of ``session``, in one statement (``statements.complete_and_lease``).

        None when it changed nothing: the completion was refused or made before (a retry),
        its key was used for another request, the session is out of the request's scope or
        known to be limited, or a first try with the same key committed meanwhile; and on a
        cluster when the lead completed is of another session (its token's) than the lease:
        then no one statement is of one shard. The caller then completes and leases in two
        steps, which say why. Else the lead completed, and the leases, or None when the
        session turned out limited: the caller leases it then."""
        if not in_scope(request.scope, session) or session in self._limited:
            return None
        await self.queue.db.know_topology()  # its statements name the session on a cluster
        if self.queue.sharded and lease_tokens.session_of(item.token) != session:
            return None  # two sessions: two steps, each routed to its own (docs/scaling.md)
        call = self._call(session, request)
        together = self._together_of(request, call, [item], [result], gated=True)
        took = await self._take(session, now, together)
        if took is None:
            return None
        [lead] = took.completed.values()
        return lead, await self._answered(session, took, request, call, now)

    def _together_of(
        self,
        request: LeaseRequest,
        call: Plain,
        items: Sequence[CompleteItem] = (),
        results: Sequence[str | None] = (),
        *,
        gated: bool = False,
    ) -> Together:
        """``call`` with its request's key and fingerprint, and the completions it makes
        first."""
        key = request.idempotency_key
        asked = None if key is None else idempotency.fingerprint(request.stands_for(call.ttl))
        home = idempotency.session_of(request.session)
        return Together(call, key, asked, items, results, gated, home)

    async def _take(self, session: str, now: datetime | None, call: Together) -> Took | None:
        """``call`` through the grouper of keyed leases and completions with next; on a cluster
        alone, routed (together.py), as soon as the queue knows it is one."""

        async def alone() -> Took | None:
            [took] = await take_together(self.queue, session, now, [call])
            return took

        return await self.queue.across_shards(
            lambda: self._together.submit(
                (session, now, call.call.api_token, call.key_session), call
            ),
            alone,
        )

    async def _answered(
        self,
        session: str,
        took: Took,
        request: LeaseRequest,
        call: Plain,
        now: datetime | None,
    ) -> Leased | None:
        """What a keyed or grouped lease took: its leases, those its key's first request took
        that are still valid, or None when the session turned out limited. Raises
        InvalidInput when its key was used for another request."""
        if took.limited:
            self._limited.add(session)
            return None
        if took.known is not None and request.idempotency_key is not None:
            asked = idempotency.fingerprint(request.stands_for(call.ttl))
            answer = idempotency.answer_for(asked, *took.known)
            return await self.queue.db.run(lambda conn: _decode(conn, answer, now))
        return Leased(took.leases)

    async def _lease_keyed(
        self, session: str, request: LeaseRequest, now: datetime | None, call: Plain
    ) -> Leased | None:
        """A keyed lease in one statement, alone or with others of its session (together.py):
        the leases it took, or those the key's first request took that are still valid. None
        when the session turned out limited, or a first try with the same key committed
        while this one ran: the caller then leases through ``idempotency.once``'s
        transaction."""
        took = await self._take(session, now, self._together_of(request, call))
        if took is None:
            return None
        return await self._answered(session, took, request, call, now)

    async def _lease_one(
        self, conn: Connection, session: str, now: datetime | None, call: Plain
    ) -> Leased:
        """One lease on ``conn``, not grouped (a keyed lease, a session found limited)."""
        if session not in self._limited:
            rows = await execute(conn, self._lease_next(session, now, call))
            if not rows or not rows[0]["limited"]:
                return Leased([lease_of(row, call.ttl) for row in rows if row["id"] is not None])
            self._limited.add(session)
        return await self._lease_limited(conn, session, now, call)

    async def _lease_group(self, key: GroupKey, calls: Sequence[Plain]) -> list[Leased | None]:
        """One lease statement for the callers of one session, each its own leases in its
        turn (``statements.lease_group``; ``lease_next`` for a caller alone). None for every
        caller when the session turned out limited: each then leases through the limited
        path."""
        session, now, api_token = key
        if len(calls) == 1:
            statement = self._lease_next(session, now, calls[0])
        else:
            statement = statements.lease_group(
                session=session,
                max=sum(call.max for call in calls),
                owners=[call.owner for call in calls for _ in range(call.max)],
                tokens=list(chain.from_iterable(call.tokens for call in calls)),
                ttls=[call.ttl for call in calls for _ in range(call.max)],
                now=now,
                ledger=self.queue.ledger_in_statement,
                ledger_by_row=self.queue.ledger_by_row,
                api_token=api_token,
            )
        rows = await self.queue.db.rows(statement)
        if rows and rows[0]["limited"]:
            self._limited.add(session)
            return [None] * len(calls)
        caller_of = {token: i for i, call in enumerate(calls) for token in call.tokens}
        taken: list[list[Lease]] = [[] for _ in calls]
        for row in rows:
            if row["id"] is not None:
                i = caller_of[row["lease_token"]]
                taken[i].append(lease_of(row, calls[i].ttl))
        return [Leased(leases) for leases in taken]

    async def _lease_limited(
        self, conn: Connection, session: str, now: datetime | None, call: Plain
    ) -> Leased:
        """Lease a session with a cap or a rate: lock its settings, then lease what they allow."""
        async with conn.transaction():
            if locked := await execute(conn, statements.lock_settings(session=session)):
                if locked[0]["max_leased_per_key"] is not None:
                    await _tend_keys(conn, session, call.max, now)
                limited = statements.lease_limited(
                    session=session,
                    max=call.max,
                    owner=call.owner,
                    tokens=call.tokens,
                    ttl_s=call.ttl,
                    now=now,
                    ledger=self.queue.ledger_in_statement,
                    ledger_by_row=self.queue.ledger_by_row,
                    api_token=call.api_token,
                )
                rows = await execute(conn, limited)
            else:  # its limits were lifted
                self._limited.discard(session)
                rows = await execute(conn, self._lease_next(session, now, call))
        leases = [lease_of(row, call.ttl) for row in rows if row["id"] is not None]
        return _held_back(leases, rows[0]) if "room" in rows[0] else Leased(leases)


async def _tend_keys(conn: Connection, session: str, wanted: int, now: datetime | None) -> None:
    """Park the full keys' leads at the session's head until the first ``wanted`` and a
    margin it looked at are leads a lease may take, or it saw them all: the lease's claim
    then walks no further (``statements.tend_keys``). Each look parks more than the margin,
    so each lead is parked once however long a full key's backlog."""
    window = wanted + PARK_MARGIN
    while True:
        [tended] = await execute(
            conn, statements.tend_keys(session=session, window=window, now=now)
        )
        if tended["looked_at"] < window or tended["looked_at"] - tended["parked"] >= wanted:
            return


def _encode(leased: Leased) -> Any:
    """What an idempotency key remembers of a lease: the leases taken (None: nothing taken,
    the key stays free)."""
    if not leased.leases:
        return None
    ttl = leased.leases[0].ttl_s
    return {"ttl_s": ttl, "leases": [[lease.lead.id, lease.token] for lease in leased.leases]}


async def _decode(conn: Connection, answer: Any, now: datetime | None) -> Leased:
    """The leases a key remembers that are still valid."""
    ids, tokens = zip(*answer["leases"], strict=True)
    # The leases of one key's answer are of one session, which their tokens carry.
    sessions = {lease_tokens.session_of(token) for token in tokens}
    session = sessions.pop() if len(sessions) == 1 else None
    held = statements.valid_leases(
        ids=list(ids), tokens=list(tokens), now=now, session=session, routed=session is not None
    )
    rows = await execute(conn, held)
    return Leased([lease_of(row, answer["ttl_s"]) for row in rows])
