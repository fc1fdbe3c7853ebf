"""The front door: every route's body is read whole and parsed once, by ``app.api.body``.

``FrontDoorRoute`` is the ``route_class`` of every router. Before its route
runs, a route that takes a body reads it whole (``FrontDoorRequest.body``: a
body cut short, by a disconnect or before its ``Content-Length``, is
``IncompleteBody``, 400, and nothing runs) and parses it with the one parser
(``FrontDoorRequest.json``, which FastAPI's own handler calls too). Errors are
raised inside Starlette's ``request_response``, so the app's exception
handlers answer them, as any error of any route.

A route whose parameters are only its body model, path, query, header and
cookie parameters, the request, and dependencies that take nothing but the
request (every worker route) is then served by ``lean_handler``: the same
FastAPI functions validate its parameters and body (``request_params_to_args``,
``request_body_to_args``) and serialize its answer once
(``serialize_response``), without the general dependency solver around them.
Any other route keeps FastAPI's handler. Either way the route table is the
one source: nothing here names a route.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Coroutine
from contextlib import aclosing
from typing import Any

from fastapi import routing as fastapi_routing
from fastapi.datastructures import DefaultPlaceholder
from fastapi.dependencies.models import Dependant
from fastapi.dependencies.utils import request_body_to_args, request_params_to_args
from fastapi.exceptions import RequestValidationError
from fastapi.routing import APIRoute, serialize_response
from fastapi.utils import is_body_allowed_for_status_code
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from app.api import body
from leaseq.errors import IncompleteBody

Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class FrontDoorRequest(Request):
    """A request whose body is whole or refused, and whose JSON is ``app.api.body.parse``'s."""

    async def body(self) -> bytes:
        if not hasattr(self, "_body"):
            chunks: list[bytes] = []
            try:
                async with aclosing(self.stream()) as stream:
                    async for chunk in stream:
                        chunks.append(chunk)
            except ClientDisconnect:
                raise IncompleteBody("the client hung up before the body ended") from None
            whole = b"".join(chunks)
            declared = self.headers.get("content-length")
            if declared is not None and declared.isdigit() and len(whole) < int(declared):
                raise IncompleteBody(
                    f"the body ended after {len(whole)} of the {declared} bytes "
                    "its Content-Length announced"
                )
            self._body = whole
        return self._body

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            self._json = body.parse(await self.body())
        return self._json


class FrontDoorRoute(APIRoute):
    """An API route behind the front door (see the module's docstring)."""

    def get_route_handler(self) -> Handler:
        route = _as_included(self)
        framework = super().get_route_handler()
        handler = lean_handler(route, framework) or framework
        takes_body = route.body_field is not None

        async def front_door(request: Request) -> Response:
            request = FrontDoorRequest(request.scope, request.receive)
            if takes_body:
                await request.json()  # whole and parsed, before anything runs
            return await handler(request)

        return front_door


def _as_included(route: APIRoute) -> APIRoute:
    """The route as its router was included (with that router's dependencies), as FastAPI's
    own ``APIRoute.get_route_handler`` reads it while building the included route's app."""
    context_var = getattr(fastapi_routing, "_effective_route_context_var", None)
    context = context_var.get() if context_var is not None else None
    if context is not None and context.original_route is route:
        return context  # type: ignore[no-any-return]
    return route


def _special_params(dependant: Dependant) -> tuple[str | None, ...]:
    """The parameters only FastAPI's solver fills (a response, background tasks, …)."""
    return (
        dependant.websocket_param_name,
        dependant.http_connection_param_name,
        dependant.response_param_name,
        dependant.background_tasks_param_name,
        dependant.security_scopes_param_name,
    )


def _request_only(dependant: Dependant) -> bool:
    """A dependency FastAPI would call with the request alone, awaiting it."""
    params = (
        dependant.path_params,
        dependant.query_params,
        dependant.header_params,
        dependant.cookie_params,
        dependant.body_params,
        dependant.dependencies,
    )
    return (
        dependant.call is not None
        and dependant.request_param_name is not None
        and not any(params)
        and not any(name is not None for name in _special_params(dependant))
        and _is_coroutine_callable(dependant.call)
    )


def _is_coroutine_callable(call: Callable[..., Any]) -> bool:
    """A coroutine function, or an instance whose ``__call__`` is one (a security scheme)."""
    if inspect.isroutine(call):
        return inspect.iscoroutinefunction(call)
    return inspect.iscoroutinefunction(type(call).__call__)


def lean_handler(route: APIRoute, framework: Handler) -> Handler | None:
    """The route's handler without the general dependency solver, or None where it needs it.

    ``framework`` (FastAPI's handler) still serves a request while the app has dependency
    overrides (tests set them)."""
    dependant = route.dependant
    call = dependant.call
    serialized = route.response_field is not None and isinstance(
        route.response_class, DefaultPlaceholder
    )
    if (
        call is None
        or not _is_coroutine_callable(call)
        or not serialized
        or len(dependant.body_params) > 1
        or any(name is not None for name in _special_params(dependant))
        or not all(_request_only(sub) for sub in dependant.dependencies)
    ):
        return None
    subs = [(sub.name, sub.call) for sub in dependant.dependencies]
    kinds: list[tuple[list[Any], Callable[[Request], Any]]] = [
        (dependant.path_params, lambda request: request.path_params),
        (dependant.query_params, lambda request: request.query_params),
        (dependant.header_params, lambda request: request.headers),
        (dependant.cookie_params, lambda request: request.cookies),
    ]
    params = [(fields, received) for fields, received in kinds if fields]
    status = route.status_code or 200
    overrides = route.dependency_overrides_provider

    async def lean(request: Request) -> Response:
        if getattr(overrides, "dependency_overrides", None):
            return await framework(request)
        values: dict[str, Any] = {}
        for name, sub in subs:
            solved = await sub(request)  # type: ignore[misc]
            if name is not None:
                values[name] = solved
        if dependant.request_param_name is not None:
            values[dependant.request_param_name] = request
        errors: list[Any] = []
        for fields, received in params:
            found, faults = request_params_to_args(fields, received(request))
            values.update(found)
            errors += faults
        parsed: Any = None
        if dependant.body_params:
            parsed = await request.json()
            found, faults = await request_body_to_args(
                dependant.body_params, parsed, route._embed_body_fields
            )
            values.update(found)
            errors += faults
        if errors:
            raise RequestValidationError(errors, body=parsed)
        answer = await call(**values)
        if isinstance(answer, Response):
            return answer
        content = await serialize_response(
            field=route.response_field,
            response_content=answer,
            include=route.response_model_include,
            exclude=route.response_model_exclude,
            by_alias=route.response_model_by_alias,
            exclude_unset=route.response_model_exclude_unset,
            exclude_defaults=route.response_model_exclude_defaults,
            exclude_none=route.response_model_exclude_none,
            dump_json=True,
        )
        response = Response(content, status_code=status, media_type="application/json")
        if not is_body_allowed_for_status_code(status):
            response.body = b""
        return response

    return lean
