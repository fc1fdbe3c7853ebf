"""Idempotency keys: a push or a lease retried with its key gets the first answer, not a new effect.

A client sends an ``Idempotency-Key`` with a push or a lease, and the same
key again when it retries because the answer was lost. The first request
claims the key and stores its answer in the transaction of its own work, so
the work and the memory of it commit together or not at all. A retry finds
the key and gets the answer back; a retry that overtakes a first try still
running waits on the claim's row lock, then gets that answer (or the key,
when the first try stored nothing). A key sent again with another request
is refused: it names one intent.

Keys are kept ``LEASEQ_IDEMPOTENCY_TTL_S`` at least; the background pruner
deletes older ones (``Queue.prune_keys``). Knows nothing of HTTP.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any, Literal, TypeVar

import psycopg

from app.store import statements
from app.store.pool import Connection, execute
from leaseq.errors import InvalidInput
from leaseq.limits import IDEMPOTENCY_KEY_PATTERN

Verb = Literal["push", "lease"]
T = TypeVar("T")
FIELD = "Idempotency-Key"
_key_re = re.compile(IDEMPOTENCY_KEY_PATTERN)


def check_key(key: Any) -> str:
    """An Idempotency-Key as the API takes it. Raises InvalidInput."""
    if not isinstance(key, str) or not _key_re.fullmatch(key):
        raise InvalidInput(FIELD, f"must match {IDEMPOTENCY_KEY_PATTERN}")
    return key


def fingerprint(request: Any) -> str:
    """What a key's request said, as a digest: the same request gives the same one."""
    text = json.dumps(request, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


ACROSS_SESSIONS = ""  # the session of a key whose request names several (a fleet's lease)


def session_of(session: str | None) -> str:
    """Where a key's row lives: the session its request names (on its shard on a cluster),
    or ``ACROSS_SESSIONS`` for a lease across sessions (never a session's name)."""
    return ACROSS_SESSIONS if session is None else session


async def once(
    conn: Connection,
    verb: Verb,
    session: str,
    key: str,
    request: Any,
    work: Callable[[Connection], Awaitable[T]],
    *,
    encode: Callable[[T], Any],
    decode: Callable[[Connection, Any], Awaitable[T]],
    now: datetime | None = None,
) -> T:
    """``work`` once per key: its result, or the answer stored for the key, through ``decode``.

    ``encode`` turns a result into the JSON to remember; None when there is
    nothing to remember (the work changed nothing: the key stays free).
    ``key`` was checked by the caller (``check_key``); ``session`` is where its row lives
    (``session_of``), so on a cluster every statement here runs on that session's shard.
    Raises InvalidInput when the key was used for another request.
    """
    asked = fingerprint(request)
    claim = statements.claim_key(session=session, verb=verb, key=key, request=asked, now=now)
    while True:
        claimed = False
        async with conn.transaction():
            claimed = bool(await execute(conn, claim))
            if claimed:
                result = await work(conn)
                answer = encode(result)
                if answer is None:
                    raise psycopg.Rollback()  # nothing was done: the key stays free
                remember = statements.remember_answer(
                    session=session, verb=verb, key=key, answer=json.dumps(answer)
                )
                await execute(conn, remember)
            else:  # taken by a request that committed (after we waited for it, if need be)
                found = await execute(
                    conn, statements.remembered(session=session, verb=verb, key=key)
                )
                if not found:  # one PostgreSQL: taken by a row of another session (0026)
                    found = await execute(conn, statements.remembered_anywhere(verb=verb, key=key))
        if claimed:
            return result
        if found:  # else it was pruned since: claim it again
            return await decode(conn, answer_for(asked, found[0]["request"], found[0]["answer"]))


def answer_for(asked: str, request: str, answer: Any) -> Any:
    """The answer a key remembers for ``request``, to a request whose fingerprint is
    ``asked``. Raises InvalidInput when the key was used for another request."""
    if request != asked:
        raise InvalidInput(FIELD, "was used before for another request; use a new key")
    return answer


async def pushed(conn: Connection, session: str, key: str) -> Any | None:
    """The answer stored for a push into ``session`` under ``key``, or None: no push of the
    session's committed with that key (yet, or since the key was pruned).

    A producer whose push's answers were all lost asks this before it pushes again, so it
    learns whether the push was stored instead of guessing. Read by the key's session (its
    shard on a cluster): a token bound to one session learns nothing of another's keys. A
    push still running is not seen until it commits."""
    found = await execute(conn, statements.remembered(session=session, verb="push", key=key))
    return found[0]["answer"] if found else None
