"""Scoped API tokens: create, list, revoke, and check one on every request through a cache.

``Tokens.principal(secret)`` is on every request's path. A token found valid
is kept in this process's cache, keyed by its hash, for at most
``RECHECK_S`` (and never past its expiry, measured on the database clock
when it was read): at steady state a request costs no round trip to check
its token, and one per token per ``RECHECK_S`` re-reads it. A revocation
NOTIFYs every process (``app.store.statements.TOKENS_CHANNEL``); the listener
hands the hash to ``changed``, which drops it at once. A notification lost
(the listener reconnecting, a pooler in the way) costs at most ``RECHECK_S``:
that is the bound docs/security.md states. After the listener reconnects,
the whole cache is dropped (``changed(None)``): whatever was revoked meanwhile
is read anew.

An unknown token is never cached: each try costs a lookup by hash, as the
first use of a real one does. ``last_used_at`` is stamped by the lookup, at
most once a minute (``app.store.statements.tokens.TOUCH_EVERY_S``), never per request.

The audit trail (``audit``) is written after the action it records
succeeded, by the name of the token that took it.

Knows nothing of HTTP.
"""

from __future__ import annotations

import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from app.domain import access
from app.domain.access import Principal
from app.store import statements
from app.store.pool import Database
from leaseq.errors import InvalidInput, NotFound
from leaseq.limits import MAX_LEAD_ID

RECHECK_S = 5.0  # the longest a revoked token is honoured by a process that missed the NOTIFY
CACHE_SIZE = 10_000  # tokens kept per process; the least recently used goes first
LEAD_SESSIONS_SIZE = 100_000  # lead ids whose session is kept (a lead's session never changes)
MAX_EXPIRES_S = 10 * 365 * 86400.0


@dataclass(frozen=True, slots=True)
class TokenInfo:
    """A token as listed: everything but the token and its hash."""

    name: str
    role: str
    sessions: str
    created_at: datetime
    expires_at: datetime | None
    last_used_at: datetime | None
    revoked_at: datetime | None


@dataclass(frozen=True, slots=True)
class Created:
    """A token just created: its secret, shown once, and what is kept of it."""

    token: str
    info: TokenInfo


def _info(row: Mapping[str, Any]) -> TokenInfo:
    return TokenInfo(**{name: row[name] for name in TokenInfo.__slots__})


def check_expires(value: object) -> float | None:
    """Seconds a new token lives (None: no expiry). Raises InvalidInput."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise InvalidInput("expires_s", "a number of seconds")
    if not 1 <= value <= MAX_EXPIRES_S:
        raise InvalidInput("expires_s", f"from 1 to {MAX_EXPIRES_S:.0f} seconds")
    return float(value)


class Tokens:
    """This process's scoped tokens over ``db`` (see the module docstring)."""

    def __init__(
        self,
        db: Database,
        locate: Callable[[Sequence[int]], Awaitable[dict[int, str]]],
        *,
        recheck_s: float = RECHECK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """``locate``: the session of each of some leads that exist (``Queue.sessions_of``,
        which a Citus cluster answers node by node)."""
        self.db = db
        self.locate = locate
        self.recheck_s = recheck_s
        self._clock = clock
        # hash → (principal, when this process must read it again)
        self._cache: OrderedDict[str, tuple[Principal, float]] = OrderedDict()
        self._lead_sessions: OrderedDict[int, str] = OrderedDict()
        self.lookups = 0  # round trips spent checking tokens (the bench reads it)

    # -- checking ------------------------------------------------------------

    async def principal(self, secret: bytes) -> Principal | None:
        """Whom ``secret`` acts as; None when it is no live token (unknown, revoked, expired).
        Raises Unavailable in an outage."""
        return await self.by_key(access.digest(secret))

    async def by_key(self, key: str) -> Principal | None:
        """``principal`` of the token whose hash is ``key``."""
        now = self._clock()
        cached = self._cache.get(key)
        if cached is not None and cached[1] > now:
            self._cache.move_to_end(key)
            return cached[0]
        self._cache.pop(key, None)
        self.lookups += 1
        rows = await self.db.rows(statements.token_lookup(hash=key))
        if not rows:
            return None
        row = rows[0]
        found = Principal(row["name"], row["role"], row["sessions"], key)
        valid_s = row["valid_s"]
        if valid_s is not None and valid_s <= 0:
            return None
        until = now + (self.recheck_s if valid_s is None else min(self.recheck_s, valid_s))
        self._cache[key] = (found, until)
        if len(self._cache) > CACHE_SIZE:
            self._cache.popitem(last=False)
        return found

    async def live(self, key: str) -> bool:
        """Whether the token of hash ``key`` is still live (a long poll asks at each wake-up
        that took nothing: its lease statements took nothing from a revoked token)."""
        return await self.by_key(key) is not None

    def changed(self, key: str | None) -> None:
        """A NOTIFY said the token of hash ``key`` was revoked: forget it now. None: the
        listener (re)connected, a revocation may have been missed: forget every token."""
        if key is None:
            self._cache.clear()
        else:
            self._cache.pop(key, None)

    # -- managing ------------------------------------------------------------

    async def create(
        self, name: object, role: object, sessions: object, expires_s: object = None
    ) -> Created:
        """A new token: its secret is answered once, only its hash is stored; ``name`` None:
        one is made up (``worker-1f2e3d4c``). Raises InvalidInput (a bad name, role, pattern
        or expiry; a live token of that name)."""
        role = access.check_role(role)
        if name is None:
            name = f"{role}-{secrets.token_hex(4)}"
        secret = access.new_secret()
        create = statements.token_create(
            name=access.check_token_name(name),
            role=role,
            sessions=access.check_pattern(sessions),
            expires_s=check_expires(expires_s),
            hash=access.digest(secret),
        )
        rows = await self.db.rows(create)
        if not rows:
            raise InvalidInput("name", f"a live token is named {name}; revoke it first")
        return Created(secret, _info(rows[0]))

    async def listing(self) -> list[TokenInfo]:
        """Every token, live, expired or revoked, newest first."""
        return [_info(row) for row in await self.db.rows(statements.tokens_listing())]

    async def revoke(self, name: str) -> TokenInfo:
        """Revoke the live token of ``name`` in every process. Raises NotFound."""
        rows = await self.db.rows(statements.token_revoke(name=access.check_token_name(name)))
        if not rows:
            raise NotFound(f"no live token named {name}")
        self.changed(rows[0]["hash"])  # this process at once, the others by the NOTIFY
        return _info(rows[0])

    # -- the audit trail ---------------------------------------------------------

    async def audit(
        self,
        principal: Principal,
        action: str,
        *,
        session: str | None = None,
        lead_id: int | None = None,
        detail: Mapping[str, Any] | None = None,
    ) -> None:
        """Record that ``principal`` took ``action`` (after it succeeded)."""
        await self.db.rows(
            statements.audit(
                token=principal.name,
                action=action,
                session=session,
                lead_id=lead_id,
                detail=None if detail is None else json.dumps(dict(detail)),
            )
        )

    async def audit_trail(self, limit: int = 100) -> list[dict[str, Any]]:
        """The latest operator actions, newest first."""
        return [dict(row) for row in await self.db.rows(statements.audit_trail(limit=limit))]

    # -- scope helpers -------------------------------------------------------------

    def lead_session_known(self, lead_id: int, session: str) -> None:
        """Remember a lead's session (it never changes), e.g. from a lease answered."""
        self._lead_sessions[lead_id] = session
        self._lead_sessions.move_to_end(lead_id)
        if len(self._lead_sessions) > LEAD_SESSIONS_SIZE:
            self._lead_sessions.popitem(last=False)

    async def lead_sessions(self, lead_ids: Iterable[int]) -> dict[int, str]:
        """The session of each of these leads that exists (read once, then remembered)."""
        wanted = {i for i in lead_ids if 1 <= i <= MAX_LEAD_ID}
        known = {i: self._lead_sessions[i] for i in wanted if i in self._lead_sessions}
        missing = sorted(wanted - known.keys())
        if missing:
            for lead_id, session in (await self.locate(missing)).items():
                known[lead_id] = session
                self.lead_session_known(lead_id, session)
        return known

    async def sessions_in(self, pattern: str) -> list[str]:
        """The sessions with leads that ``pattern`` covers."""
        rows = await self.db.rows(statements.sessions_like(like=access.like(pattern)))
        return sorted(row["session"] for row in rows if access.matches(pattern, row["session"]))
