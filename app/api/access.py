"""Every route's role and scope, declared with the route (``app.api.routes``), and checked.

A route declares ``Depends(Access(action, scope))``: what it does
(``app.domain.access.Action``: the roles that may) and where its sessions
come from (``Where``). The dependency answers 403 ``forbidden`` before the
route runs when the token's role may not, or when the session of the path is
not the token's. A route whose sessions are in its body, or behind a lead id,
checks them with the helpers here before it changes anything; what covers
many sessions (``Where.OWN``) shows or touches only the token's own. A test
walks the route table (tests/api/test_access_matrix.py): a route without a
declaration fails it.

Reading a lead of another session answers 404 as if it did not exist;
changing one (renew, complete, release, cancel, retry) answers 403.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, replace

from fastapi import Request

from app.api.auth import principal_of
from app.domain.access import Action, Principal
from app.domain.tokens import Tokens
from app.leasing.request import LeaseRequest
from leaseq.errors import Forbidden, NotFound
from leaseq.model import Lead, Lease


class Where(enum.Enum):
    """Where a route's sessions come from."""

    SESSION = "session"  # the path's {session}
    LEAD = "lead"  # the path's {lead_id}: its lead's session
    BODY = "body"  # the sessions, or the leases' leads, its body names
    SCHEDULE = "schedule"  # the path's {name}: its schedule's session (the route checks)
    OWN = "own"  # many sessions: only the token's own are shown or touched
    NONE = "none"  # no session: the API's description, the token itself, token management


@dataclass(frozen=True, slots=True)
class Access:
    """A route's declaration, and the dependency that checks its role (and a path's session).

    ``public``: served without a token (the probes, the dashboard's empty shell).
    """

    action: Action
    where: Where
    public: bool = False

    async def __call__(self, request: Request) -> Principal:
        principal = principal_of(request.scope)
        if self.public:
            return principal
        if not principal.may(self.action):
            raise Forbidden(f"a {principal.role} token may not {self.action.value}")
        if self.where is Where.SESSION:
            session = str(request.path_params.get("session", ""))
            if not principal.covers(session):
                raise Forbidden(f"session {session} is not this token's")
        return principal


# The routes FastAPI declares itself (the API's description and its page, ``app.api.app``):
# any valid token.
FRAMEWORK = Access(Action.AUTHENTICATED, Where.NONE)
FRAMEWORK_PATHS = frozenset(
    {"/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc", "/docs/assets"}
)


def declared(route: object) -> Access | None:
    """A route's declaration: found among its dependencies, ``FRAMEWORK`` for FastAPI's own
    routes; None when it has none."""
    if getattr(route, "path", None) in FRAMEWORK_PATHS:
        return FRAMEWORK
    dependant = getattr(route, "dependant", None)
    stack = list(getattr(dependant, "dependencies", []))
    while stack:
        dependency = stack.pop()
        if isinstance(dependency.call, Access):
            return dependency.call
        stack.extend(dependency.dependencies)
    return None


def every_route(routes: Iterable[object]) -> Iterator[object]:
    """Every route of a route table, those of included routers too."""
    for route in routes:
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from every_route(included.routes)
        else:
            yield route


def check_declared(routes: Iterable[object]) -> None:
    """Raise ValueError for a route that declares no role and scope (at the app's build)."""
    for route in every_route(routes):
        if getattr(route, "dependant", None) is not None and declared(route) is None:
            raise ValueError(f"route {getattr(route, 'path', route)} declares no Access")


def sessions_named(principal: Principal, sessions: Iterable[str]) -> None:
    """403 unless every session named is the token's."""
    outside = sorted({s for s in sessions if not principal.covers(s)})
    if outside:
        raise Forbidden(f"session {outside[0]} is not this token's")


def scoped_lease(principal: Principal, request: LeaseRequest) -> LeaseRequest:
    """A lease request as this token may send it: 403 when it names a session not the
    token's; limited to the token's sessions when it names none (any session)."""
    named = [request.session] if request.session is not None else list(request.sessions or ())
    sessions_named(principal, named)
    if principal.key is not None:  # a scoped token: the lease statements re-read it
        request = replace(request, api_token=principal.key)
    if principal.everywhere:
        return request
    return replace(request, scope=principal.scope)


def remember_leads(tokens: Tokens, leases: Iterable[Lease]) -> None:
    """Note the session of each lead leased, so its renewals check their scope for free."""
    for lease in leases:
        tokens.lead_session_known(lease.lead.id, lease.lead.session)


async def changes_leads(principal: Principal, tokens: Tokens, lead_ids: Iterable[int]) -> None:
    """403 when any of these leads (those that exist) is of a session not the token's."""
    if principal.everywhere:
        return
    sessions = await tokens.lead_sessions(lead_ids)
    sessions_named(principal, sessions.values())


def reads_lead(principal: Principal, lead: Lead) -> Lead:
    """The lead, or 404 as if it did not exist when it is of a session not the token's."""
    if not principal.covers(lead.session):
        raise NotFound(f"no lead {lead.id}")
    return lead
