"""Bearer-token authentication, a pure ASGI middleware installed when tokens are configured.

Every HTTP request but ``/healthz``, ``/readyz`` and ``/dashboard`` needs
``Authorization: Bearer <token>`` naming one of ``Settings.token_list`` (a
bootstrap token: full access) or a live scoped token of the database
(``app.domain.tokens``: its role and sessions); otherwise the answer is 401
``unauthorized`` with ``WWW-Authenticate: Bearer``. The request then carries
whom it acts as (``PRINCIPAL``, in the ASGI scope's state) for the routes'
access checks (``app.api.access``). An expired or revoked token is 401 like
an unknown one.
That includes ``/docs``, ``/openapi.json``, ``/metrics`` and
``/dashboard/data``: the API description is not public when the API is not.
``/dashboard`` is the page's static shell, with no data and no secret in it: a
browser cannot send a bearer header when it opens a page, so the shell's
script asks for the token and sends it on every fetch (a deliberate exception
to SPEC, which exempts only the probes). Unknown paths answer 401 too, so
routes are not revealed.

The token is compared with every configured token by ``hmac.compare_digest``
(no early exit), so timing reveals neither the token nor which one matched.
A scoped token is looked up by its SHA-256 (the cache's key, the table's
index): timing can reveal at most something of a hash, which helps nobody
find a token of 256 random bits. Tokens are never logged.

Without configured tokens the service is open (loopback, ``app.api.hosts``):
every request acts with full access (``principal_of``'s default), whatever it sends.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import problem, unavailable
from app.domain.access import FULL, Principal
from app.domain.tokens import Tokens
from leaseq.errors import Unavailable

OPEN_PATHS = frozenset({"/healthz", "/readyz", "/dashboard"})
PRINCIPAL = "leaseq.principal"


def principal_of(scope: Scope) -> Principal:
    """Whom the request acts as (full access when no middleware said: an open service)."""
    found: Principal = scope.get("state", {}).get(PRINCIPAL, FULL)
    return found


def _acting(scope: Scope, principal: Principal) -> None:
    scope.setdefault("state", {})[PRINCIPAL] = principal


def _tokens_of(scope: Scope) -> Tokens:
    runtime = scope["app"].state.runtime
    tokens: Tokens = runtime.tokens
    return tokens


class BearerAuth:
    """Refuse requests without a configured bearer token (except ``open_paths``)."""

    def __init__(
        self, app: ASGIApp, *, tokens: Iterable[str], open_paths: frozenset[str] = OPEN_PATHS
    ) -> None:
        self.app = app
        self._tokens = [token.encode() for token in tokens]
        self.open_paths = open_paths
        if not self._tokens:
            raise ValueError("BearerAuth needs at least one token")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or _route_path(scope) in self.open_paths:
            await self.app(scope, receive, send)
            return
        given = _bearer(scope)
        principal: Principal | None = None
        if given is not None:
            if self._known(given):
                principal = FULL
            else:
                try:
                    principal = await _tokens_of(scope).principal(given)
                except Unavailable as exc:
                    await unavailable(exc.detail)(scope, receive, send)
                    return
        if principal is not None:
            _acting(scope, principal)
            await self.app(scope, receive, send)
            return
        challenge = 'Bearer realm="leaseq"'
        if given is not None:
            challenge += ', error="invalid_token"'
        detail = "a valid bearer token is required" if given is None else "the token is not valid"
        response = problem(401, "unauthorized", detail, headers={"WWW-Authenticate": challenge})
        await response(scope, receive, send)

    def _known(self, given: bytes) -> bool:
        found = False
        for token in self._tokens:
            found |= hmac.compare_digest(given, token)
        return found


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path


def _bearer(scope: Scope) -> bytes | None:
    """The token of an ``Authorization: Bearer`` header, or None."""
    for name, value in scope["headers"]:
        if name == b"authorization":
            scheme, _, token = bytes(value).partition(b" ")
            token = token.strip()
            return token if scheme.lower() == b"bearer" and token else None
    return None
