"""Keyed leases and completions with ``next``, of one session, grouped: one statement for many.

A worker's steady state is one request per lead: a completion whose ``next`` leases the
slot's next lead, with an idempotency key (the SDK and ``leaseq worker`` key every lease).
Each such call is a statement of its own (``statements.complete_and_lease``, or
``statements.lease_keyed`` for a keyed lease alone); the calls of one session that arrive
while one of theirs runs go together as the next (``statements.lease_together``, through
a ``Grouper``), as plain leases and plain completions do: a busy session's workers share
statements, commits and the ledger's triggers, instead of taking turns for them.

What each caller gets is what its call alone would have got (``Took``): the lead its
completion completed, or None when its completion changed nothing (refused, made before,
or its row held by another transaction: the caller then takes the two steps, which say
why); its leases; whether the session turned out limited; and, when its key named a
request committed before, that request and its answer. Callers are served in their
order: the first gets the best leads. Two calls on one lead, or with one key, never share
a statement. A statement that fails on a key another request committed meanwhile
(``unique_violation``) changed nothing: each of its callers then goes its own way
(``idempotency.once``).

On a Citus cluster every call goes alone, routed to its session's shard (the grouped
statement is not routed: docs/scaling.md). Knows nothing of HTTP.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain
from typing import Any

import psycopg

from app.domain import lease_tokens
from app.domain.queue import Queue, lead_of
from app.store import statements
from app.store.pool import Connection, Row, execute
from app.store.statements import Statement
from leaseq.model import CompleteItem, Lead, Lease


@dataclass(frozen=True, slots=True)
class Plain:
    """One caller's lease of a session: its owner, ``max``, ttl and a new token per slot."""

    owner: str
    max: int
    ttl: float
    tokens: list[str]
    api_token: str | None = None  # a scoped token's hash: its lease stops at its revocation


@dataclass(frozen=True, slots=True)
class Together:
    """One caller of a group: its lease (``call``), its key and its request's fingerprint
    (both None: unkeyed; ``key_session``: where the key is kept), and the completion it
    makes first (``items``: one, its result checked as JSON text in ``results``), if any.
    ``gated``: it leases only when that completion went through (a completion with
    ``next``; a keyed lease is not)."""

    call: Plain
    key: str | None
    asked: str | None
    items: Sequence[CompleteItem] = ()
    results: Sequence[str | None] = ()
    gated: bool = False
    key_session: str = ""  # where its key is kept (idempotency.session_of), if keyed

    def conflicts(self) -> set[Hashable]:
        """What another caller of the same statement may not name: its leads, its key."""
        named: set[Hashable] = {("lead", item.lead_id) for item in self.items}
        if self.key is not None:
            named.add(("key", self.key))
        return named

    def size(self) -> int:
        """What it adds to a group: its leads to lease and its leads to complete."""
        return self.call.max + len(self.items)


@dataclass(frozen=True, slots=True)
class Took:
    """What one caller's lease took (the module docstring): ``completed``, the leads its
    items completed, by lead id and lease token."""

    completed: Mapping[tuple[int, str], Lead] = field(default_factory=dict)
    leases: list[Lease] = field(default_factory=list)
    limited: bool = False
    known: tuple[str, Any] | None = None  # its key's first request and answer


def lease_of(row: Mapping[str, Any], ttl_s: float) -> Lease:
    """A row a lease statement answered (a lead it leased) as the lease.

    A lease whose lead's maximum runtime ends before its ttl is granted only the time to
    that end (its expiry), so the worker times itself by what it really holds."""
    ends = row["runtime_ends_at"]
    if ends is not None and row["lease_expires_at"] == ends:
        ttl_s = min(ttl_s, max(0.0, (ends - row["updated_at"]).total_seconds()))
    return Lease(
        lead=lead_of(row),
        token=row["lease_token"],
        attempt=row["attempts"],
        owner=row["owner"],
        expires_at=row["lease_expires_at"],
        ttl_s=ttl_s,
    )


async def take_together(
    queue: Queue, session: str, now: datetime | None, calls: Sequence[Together]
) -> list[Took | None]:
    """One statement for ``calls`` (every one of ``session``), each caller's ``Took``, or None
    for a caller whose statement changed nothing for it (see the module docstring)."""
    statement = _alone(queue, session, now, calls[0]) if len(calls) == 1 else None
    if statement is None:
        statement = _together(queue, session, now, calls)
    try:
        if _keyed_apart(queue, calls):
            keyed = calls[0]
            rows = await queue.db.run(
                lambda conn: _lease_then_remember(conn, statement, keyed, now)
            )
        else:
            rows = await queue.db.rows(statement)
    except psycopg.errors.UniqueViolation:
        return [None] * len(calls)
    gate = rows[0]
    if "known" in gate:  # lease_together: each known key's request and answer
        known = gate["known"] or {}
    else:  # one caller alone (complete_and_lease, lease_keyed): its key's, if keyed
        known = {calls[0].key: [gate.get("known_request"), gate.get("known_answer")]}
    completed = {
        (row["id"], row["lease_token"]): lead_of(row) for row in rows if row.get("completion")
    }
    caller_of = {token: i for i, call in enumerate(calls) for token in call.call.tokens}
    leases: list[list[Lease]] = [[] for _ in calls]
    for row in rows:
        if row.get("completion") is False or ("completion" not in row and row["id"] is not None):
            i = caller_of[row["lease_token"]]
            leases[i].append(lease_of(row, calls[i].call.ttl))
    return [_took(call, completed, leases[i], gate, known) for i, call in enumerate(calls)]


def _keyed_apart(queue: Queue, calls: Sequence[Together]) -> bool:
    """Whether ``calls`` is one keyed call on a cluster, a lease or a completion with next:
    ``lease_keyed`` or ``complete_and_lease`` without its key's row, which
    ``_lease_then_remember`` writes after it (``statements.lease_keyed``)."""
    [call, *others] = calls
    return queue.sharded and not others and call.key is not None


async def _lease_then_remember(
    conn: Connection, statement: Statement, call: Together, now: datetime | None
) -> list[Row]:
    """A keyed lease (or completion with next), then its key's answer when it leased, in one
    transaction: two router statements on the session's shard. A first try that committed
    the key meanwhile makes the second fail (unique_violation), and the lease (and the
    completion) with it."""
    async with conn.transaction():
        rows = await execute(conn, statement)
        leased = [
            [row["id"], row["lease_token"]]
            for row in rows
            if row["id"] is not None and not row.get("completion")
        ]
        if leased:
            answer = json.dumps({"ttl_s": call.call.ttl, "leases": leased})
            remember = statements.remember_key(
                session=call.key_session,
                verb="lease",
                key=call.key or "",
                request=call.asked or "",
                answer=answer,
                now=now,
            )
            await execute(conn, remember)
    return rows


def _took(
    call: Together,
    completed: Mapping[tuple[int, str], Lead],
    leases: list[Lease],
    gate: Row,
    known: Mapping[Any, Any],
) -> Took | None:
    """What ``call`` took, of the statement's ``completed`` leads (by lead id and token), the
    ``leases`` that are its own, its ``gate`` row and the ``known`` keys; None when it is
    gated by a completion that did not go through."""
    mine = {
        (item.lead_id, item.token): completed[item.lead_id, item.token]
        for item in call.items
        if (item.lead_id, item.token) in completed
    }
    if call.gated and not mine:
        return None
    remembered = known.get(call.key) if call.key is not None else None
    first = None
    if remembered is not None and remembered[0] is not None:
        first = (remembered[0], remembered[1])
    return Took(mine, leases, bool(gate["limited"]), first)


def _alone(queue: Queue, session: str, now: datetime | None, call: Together) -> Statement | None:
    """The statement of one caller alone: its completion with ``next``
    (``complete_and_lease``), or its keyed lease (``lease_keyed``); None for any other
    (``lease_together`` with one caller)."""
    lease = call.call
    if call.gated:
        [item], [result] = call.items, call.results
        return statements.complete_and_lease(
            lead_id=item.lead_id,
            token=item.token,
            status=item.status,
            result=result,
            error=item.error,
            session=session,
            max=lease.max,
            owner=lease.owner,
            tokens=lease.tokens,
            ttl_s=lease.ttl,
            now=now,
            ledger=queue.ledger_in_statement,
            ledger_by_row=queue.ledger_by_row,
            notify_ended=queue.notify_ended,
            keyed=call.key is not None,
            routed=queue.sharded and lease_tokens.session_of(item.token) == session,
            remember=not queue.sharded,
            key=call.key,
            key_session=call.key_session,
            request=call.asked,
            api_token=lease.api_token,
        )
    if call.items or call.key is None:
        return None
    return statements.lease_keyed(
        session=session,
        max=lease.max,
        owner=lease.owner,
        tokens=lease.tokens,
        ttl_s=lease.ttl,
        key=call.key,
        key_session=call.key_session,
        request=call.asked or "",
        now=now,
        remember=not queue.sharded,
        ledger=queue.ledger_in_statement,
        ledger_by_row=queue.ledger_by_row,
        api_token=lease.api_token,
    )


def _together(
    queue: Queue, session: str, now: datetime | None, calls: Sequence[Together]
) -> Statement:
    """``statements.lease_together`` for ``calls``: caller i's (from 1) items, its gate and
    key, and its slots in order after the slots of the callers before it."""
    items = [(i + 1, item) for i, call in enumerate(calls) for item in call.items]
    slots = [(i + 1, call) for i, call in enumerate(calls) for _ in range(call.call.max)]
    return statements.lease_together(
        session=session,
        lead_ids=[item.lead_id for _, item in items],
        lease_tokens=[item.token for _, item in items],
        statuses=[item.status for _, item in items],
        results=list(chain.from_iterable(call.results for call in calls)),
        errors=[item.error for _, item in items],
        item_callers=[i for i, _ in items],
        gated=[call.gated for call in calls],
        keys=[call.key for call in calls],
        key_session=calls[0].key_session,  # one per group (its grouping names it)
        max=len(slots),
        tokens=list(chain.from_iterable(call.call.tokens for call in calls)),
        owners=[call.call.owner for _, call in slots],
        ttls=[call.call.ttl for _, call in slots],
        callers=[i for i, _ in slots],
        slot_keys=[call.key for _, call in slots],
        slot_requests=[call.asked for _, call in slots],
        now=now,
        ledger=queue.ledger_in_statement,
        ledger_by_row=queue.ledger_by_row,
        notify_ended=queue.notify_ended,
        api_token=calls[0].call.api_token,  # one token per group (its key names it)
    )
