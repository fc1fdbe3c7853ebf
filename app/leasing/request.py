"""A lease request: what a worker asks for, checked once, then carried as it is.

``LeaseRequest.checked`` is where a request comes in (the API's wire model,
a completion's ``next``, a Python caller): it raises InvalidInput for a bad
field and nothing is leased. Past it, nothing on the lease path checks a
field again: the route, the long poll, the fleet, one session's lease and
the statement take the request as it is.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from typing import Any

from app.domain import idempotency, validation
from leaseq.errors import InvalidInput
from leaseq.limits import MAX_WAIT_S


@dataclass(frozen=True, slots=True)
class LeaseRequest:
    """Up to ``max`` leads for ``owner``, from ``session``; else from one of ``sessions``, or
    (both None) from any session, the one furthest below its fair share.

    ``ttl_s`` None: the service's default. ``wait_s`` > 0: held until work
    arrives or it ends. With an ``idempotency_key``, the same request again
    gets the leases the first took (those still valid), never new ones.
    ``scope``: the session patterns of a scoped token (``app.domain.access``);
    nothing outside them is leased. None: every session. ``api_token``: that token's hash,
    which every lease statement of the request reads (app.store.statements.lease), so a
    revocation binds a request already in flight.
    """

    session: str | None
    sessions: frozenset[str] | None
    owner: str
    max: int = 1
    ttl_s: float | None = None
    wait_s: float = 0.0
    idempotency_key: str | None = None
    scope: tuple[str, ...] | None = None
    api_token: str | None = None

    @classmethod
    def checked(
        cls,
        owner: Any,
        *,
        session: Any = None,
        sessions: Collection[str] | None = None,
        max: Any = 1,
        ttl_s: Any = None,
        wait_s: Any = 0.0,
        idempotency_key: Any = None,
    ) -> LeaseRequest:
        """The request, every field checked. Raises InvalidInput."""
        if session is not None and sessions is not None:
            raise InvalidInput("session", 'give "session" or "sessions", not both')
        return cls(
            session=None if session is None else validation.session(session),
            sessions=None if sessions is None else validation.lease_sessions(sessions),
            owner=validation.owner(owner),
            max=validation.lease_max(max),
            ttl_s=None if ttl_s is None else validation.ttl(ttl_s),
            wait_s=validation.seconds("wait_s", wait_s, low=0, high=MAX_WAIT_S),
            idempotency_key=None
            if idempotency_key is None
            else idempotency.check_key(idempotency_key),
        )

    @property
    def waits_on(self) -> str | frozenset[str] | None:
        """The sessions a long poll waits for work in: one, several, or None (any)."""
        return self.session if self.session is not None else self.sessions

    def stands_for(self, ttl_s: float) -> dict[str, Any]:
        """What an idempotency key names (``ttl_s``: the ttl granted). Across sessions, the
        sessions asked, not the one chosen, and the ttl as asked. A scoped token's request
        names its scope too: another token's key never hands it leases of another scope."""
        scope = {} if self.scope is None else {"scope": list(self.scope)}
        if self.session is not None:
            one = {"session": self.session, "owner": self.owner, "max": self.max, "ttl_s": ttl_s}
            return {**one, **scope}
        listed = None if self.sessions is None else sorted(self.sessions)
        many = {"sessions": listed, "owner": self.owner, "max": self.max, "ttl_s": self.ttl_s}
        return {**many, **scope}
