"""Who may do what: roles, session patterns, and the principal a request acts as.

A scoped token (kept in the database, ``app.domain.tokens``) has a role and a
session pattern; a bootstrap token of ``LEASEQ_API_TOKENS`` (and a request to
a service without tokens) acts with full access. What each role may do is
``ROLE_ACTIONS``, named once (docs/contract.md#who-may-do-what):

* ``producer``: push, and read its sessions' leads and stats (wait for an outcome);
* ``worker``: what a producer may, and lease, renew, complete, release;
* ``reader``: read leads and stats, reports, ``/metrics`` and the dashboard's data;
* ``operator``: everything on its sessions (cancel, retry, settings, sweep, reports).

A pattern is a session name with an optional trailing ``*``: ``tenant-a``
(that session), ``tenant-a:*`` (every session whose name begins ``tenant-a:``),
``*`` (every session). Managing tokens needs full access or an operator whose
pattern is ``*``.

Knows nothing of HTTP and of the database.
"""

from __future__ import annotations

import enum
import hashlib
import re
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

from leaseq.errors import InvalidInput
from leaseq.limits import (
    MAX_SESSION_CHARS,
    SESSION_SCOPE_PATTERN,
    TOKEN_NAME_PATTERN,
    TOKEN_ROLES,
)

ROLES = TOKEN_ROLES
ANY_SESSION = "*"
_PATTERN = re.compile(SESSION_SCOPE_PATTERN)
_TOKEN_NAME = re.compile(TOKEN_NAME_PATTERN)
TOKEN_PREFIX = "lq_"
FULL_ACCESS = "full-access"  # the name the audit gives a bootstrap token or an open service


class Action(enum.Enum):
    """What a route does, as far as access goes."""

    PUSH = "push"
    READ = "read"  # leads, their events, session stats, wait for an outcome
    LEASE = "lease"  # lease, renew, complete, release
    OBSERVE = "observe"  # reports, settings, /metrics, the dashboard's data
    OPERATE = "operate"  # cancel, retry, settings, sweep
    MANAGE_TOKENS = "manage_tokens"
    AUTHENTICATED = "authenticated"  # any valid token: the API's description, whoami


_ANY = Action.AUTHENTICATED
# What each role may do (managing tokens: ``Principal.may``).
ROLE_ACTIONS: dict[str, frozenset[Action]] = {
    "producer": frozenset({_ANY, Action.PUSH, Action.READ}),
    "worker": frozenset({_ANY, Action.PUSH, Action.READ, Action.LEASE}),
    "reader": frozenset({_ANY, Action.READ, Action.OBSERVE}),
    "operator": frozenset(
        {_ANY, Action.PUSH, Action.READ, Action.LEASE, Action.OBSERVE, Action.OPERATE}
    ),
}


def check_role(value: object) -> str:
    """A role name. Raises InvalidInput."""
    if not isinstance(value, str) or value not in ROLES:
        raise InvalidInput("role", f"must be one of {', '.join(ROLES)}")
    return value


def check_pattern(value: object) -> str:
    """A session pattern: a session name, optionally ending in ``*``, or ``*``. Raises
    InvalidInput (a ``*`` elsewhere, an empty pattern, a character no name may hold)."""
    if not isinstance(value, str) or _PATTERN.fullmatch(value) is None:
        raise InvalidInput(
            "sessions", "a session name, optionally ending in * (tenant-a, tenant-a:*), or *"
        )
    return value


def check_token_name(value: object) -> str:
    """A token's name: the characters of a session name. Raises InvalidInput."""
    if not isinstance(value, str) or _TOKEN_NAME.fullmatch(value) is None:
        raise InvalidInput(
            "name", f"1 to {MAX_SESSION_CHARS} of A-Z a-z 0-9 . _ : - (not first: . _ : -)"
        )
    return value


def matches(pattern: str, session: str) -> bool:
    """Whether ``pattern`` covers ``session``."""
    if pattern.endswith("*"):
        return session.startswith(pattern[:-1])
    return session == pattern


def like(pattern: str) -> str:
    """``pattern`` as an SQL LIKE pattern (``_`` escaped; no name holds ``%`` or ``\\``)."""
    exact = pattern.removesuffix("*").replace("_", "\\_")
    return exact + "%" if pattern.endswith("*") else exact


def new_secret() -> str:
    """A new token: 256 random bits, with a prefix that says what it is."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def digest(secret: str | bytes) -> str:
    """What is stored of a token: its SHA-256, hex. The token has 256 random bits, so a
    fast hash is enough (nothing to guess), and a lookup by it reveals nothing of the
    token through timing."""
    raw = secret.encode() if isinstance(secret, str) else secret
    return hashlib.sha256(raw).hexdigest()


@dataclass(frozen=True, slots=True)
class Principal:
    """Whom a request acts as: a scoped token (``name``, ``role``, ``pattern``), or full
    access (``role`` None: a bootstrap token, or a service without tokens)."""

    name: str
    role: str | None = None
    pattern: str = ANY_SESSION
    key: str | None = None  # a scoped token's hash (``digest``), which a lease re-reads

    @property
    def full(self) -> bool:
        return self.role is None

    @property
    def everywhere(self) -> bool:
        """Whether every session is in scope (no filter needed)."""
        return self.pattern == ANY_SESSION

    @property
    def scope(self) -> tuple[str, ...] | None:
        """The patterns a lease or a read across sessions is limited to; None: none."""
        return None if self.everywhere else (self.pattern,)

    def may(self, action: Action) -> bool:
        if self.full:
            return True
        if action is Action.MANAGE_TOKENS:
            return self.role == "operator" and self.everywhere
        return action in ROLE_ACTIONS[self.role or ""]

    def covers(self, session: str) -> bool:
        return self.everywhere or matches(self.pattern, session)

    def covers_all(self, sessions: Iterable[str]) -> bool:
        return all(self.covers(session) for session in sessions)


FULL = Principal(FULL_ACCESS)


def in_scope(scope: tuple[str, ...] | None, session: str) -> bool:
    """Whether ``session`` is within ``scope`` (patterns; None: everything)."""
    return scope is None or any(matches(pattern, session) for pattern in scope)
