"""The router's index: a request for a path without parameters goes straight to its route.

FastAPI's router finds a request's route by asking each route in turn, and an
included router asks its own routes twice (once to match, once to handle): at a
worker's rate that search is about a tenth of a request's CPU. ``install(app)``
puts an index in front of that search: a table from (method, path) to the
route, for every route whose path has no parameters, built from the route
table itself. A pair stays in the table only if the router's own search picks
that same route for it, so the index answers nothing the router would answer
differently; it is rebuilt whenever the route table changes.

A request the index knows is handed to its route as the router hands it: the
same scope keys (``router``, ``route``, ``endpoint``, ``path_params`` and
FastAPI's own), then the same ``APIRoute.handle``. Every other request goes
through the router's search. The index skips only the search: the middlewares,
the exception handlers, the front door (``app.api.front_door``) and the route's
handler are the ones every request passes, which ``tests/api/test_route_index.py``
checks by sending the same requests, hostile bodies included, with and
without it.
"""

from __future__ import annotations

from dataclasses import dataclass

from fastapi import FastAPI
from fastapi import routing as fastapi_routing
from fastapi.routing import APIRoute, APIRouter
from fastapi.telemetry._api import _route_selected
from starlette._utils import get_route_path
from starlette.routing import Match
from starlette.types import ASGIApp, Receive, Scope, Send

_IncludedRouter = fastapi_routing._IncludedRouter
_EffectiveRouteContext = fastapi_routing._EffectiveRouteContext
_FASTAPI = fastapi_routing._FASTAPI_SCOPE_KEY
_INCLUDED = fastapi_routing._FASTAPI_INCLUDED_ROUTER_KEY
_EFFECTIVE = fastapi_routing._FASTAPI_EFFECTIVE_ROUTE_CONTEXT_KEY


@dataclass(frozen=True)
class Entry:
    """A route as an included router holds it: the router and the route's context there."""

    included: fastapi_routing._IncludedRouter
    context: fastapi_routing._EffectiveRouteContext

    @property
    def route(self) -> APIRoute:
        route = self.context.original_route
        assert isinstance(route, APIRoute)
        return route


class RouteIndex:
    """The ASGI app in front of ``router``'s search (its ``middleware_stack``)."""

    def __init__(self, router: APIRouter) -> None:
        self.router = router
        self.search: ASGIApp = router.app
        self.version: int | None = None
        self.table: dict[tuple[str, str], Entry] = {}

    def entries(self) -> dict[tuple[str, str], Entry]:
        """The table, rebuilt when the route table changed since it was built."""
        version = self.router._get_routes_version()
        if version != self.version:
            self.table = build(self.router)
            self.version = version
        return self.table

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.search(scope, receive, send)
            return
        entry = self.entries().get((scope["method"], get_route_path(scope)))
        if entry is None:
            await self.search(scope, receive, send)
            return
        await self._hand_over(entry, scope, receive, send)

    async def _hand_over(self, entry: Entry, scope: Scope, receive: Receive, send: Send) -> None:
        """What ``APIRouter.app``, ``_IncludedRouter.handle`` and ``_handle_selected`` do for
        this route, without the search."""
        router = self.router
        fastapi_routing._apply_router_form_limits(scope, router.form_limits)
        scope.setdefault("router", router)
        fastapi_routing._apply_router_form_limits(scope, entry.included.include_context.form_limits)
        route = entry.route
        fastapi_scope = fastapi_routing._get_fastapi_scope(scope)
        fastapi_scope[_INCLUDED] = entry.included
        scope["endpoint"] = entry.context.endpoint
        scope["path_params"] = dict(scope.get("path_params", {}))
        scope["route"] = route
        context = entry.context
        path = getattr(context.starlette_route, "path_format", None) or context.path_format
        _route_selected(scope=scope, path=path)
        fastapi_scope[_EFFECTIVE] = context
        await route.handle(scope, receive, send)


def build(router: APIRouter) -> dict[tuple[str, str], Entry]:
    """(method, path) → route, for each route of an included router whose path has no
    parameters and which the router's own search picks for that method and path."""
    table: dict[tuple[str, str], Entry] = {}
    for included in router.routes:
        if not isinstance(included, _IncludedRouter):
            continue
        for context in included.effective_candidates():
            if not isinstance(context, _EffectiveRouteContext):
                continue  # a router included in an included router: left to the search
            if not isinstance(context.original_route, APIRoute) or context.param_convertors:
                continue
            for method in context.methods or ():
                entry = Entry(included, context)
                if (method, context.path) not in table and _searched(router, method, entry):
                    table[(method, context.path)] = entry
    return table


def _searched(router: APIRouter, method: str, entry: Entry) -> bool:
    """Whether the router's search, for ``method`` and the entry's path, ends at the entry."""
    probe: Scope = {
        "type": "http",
        "method": method,
        "path": entry.context.path,
        "root_path": "",
        "headers": [],
        "query_string": b"",
    }
    for route in router.routes:
        match, _ = route.matches(probe)
        if match is Match.FULL:
            if route is not entry.included:
                return False
            found, _, _, context = entry.included._match(probe)
            return found is Match.FULL and context is entry.context
    return False


def install(app: FastAPI) -> RouteIndex:
    """Put the index in front of ``app``'s router search, once every router is included."""
    index = RouteIndex(app.router)
    app.router.middleware_stack = index
    return index
