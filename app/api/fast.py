"""The workers' hot routes without the framework's per-request machinery.

``POST /lease``, ``/renew``, ``/renew/batch``, ``/complete`` and
``/complete/batch`` are answered by their own route functions
(``app.api.routes``), called directly: the body parsed and validated by the
same models, the answer serialized by its model. What is skipped is routing,
dependency injection and the second validation of the answer. A request the
models refuse (or a bad ``Idempotency-Key``, or a long poll) goes to the
framework as it was sent, so every refusal is answered as before; a domain
error is answered by the app's own exception handler. It sits inside every
other middleware (hosts, auth, body limits, metrics), so they all still apply.
"""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request
from pydantic import BaseModel, ValidationError
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app.api import routes
from app.api.runtime import Runtime
from app.api.schemas import (
    Body,
    CompleteBatchIn,
    CompleteIn,
    LeaseIn,
    RenewBatchIn,
    RenewIn,
)
from leaseq.limits import IDEMPOTENCY_KEY_PATTERN

Call = Callable[[Any, Runtime, Request, str | None], Awaitable[BaseModel]]

# Each fast route: its body model, the route function behind it, and whether it takes a key.
ROUTES: dict[str, tuple[type[Body], Call, bool]] = {
    "/lease": (LeaseIn, routes.lease, True),
    "/renew": (RenewIn, lambda body, runtime, _r, _k: routes.renew(body, runtime.queue), False),
    "/renew/batch": (
        RenewBatchIn,
        lambda body, runtime, _r, _k: routes.renew_batch(body, runtime.queue),
        False,
    ),
    "/complete": (CompleteIn, routes.complete, True),
    "/complete/batch": (CompleteBatchIn, routes.complete_batch, True),
}
_key_re = re.compile(IDEMPOTENCY_KEY_PATTERN)
_JSON = [(b"content-type", b"application/json")]


class WorkerFastPath:
    """Answer the workers' routes directly; hand anything else to the framework unchanged."""

    def __init__(self, app: ASGIApp, *, fastapi: FastAPI) -> None:
        self.app = app
        self.fastapi = fastapi
        # The route objects, left in the scope as the router would (the latency metric's label).
        self.matched = {
            route.path: route
            for route in routes.router.routes
            if isinstance(route, Route) and route.path in ROUTES
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path")
        if scope["type"] != "http" or scope["method"] != "POST" or path not in ROUTES:
            await self.app(scope, receive, send)
            return
        model, call, keyed = ROUTES[path]
        raw = await _body(receive)
        key_ok, key = _idempotency_key(scope) if keyed else (True, None)
        body = _parsed(model, raw) if key_ok else None
        if body is None or _waits(body):
            await self.app(scope, _replay(raw, receive), send)  # the framework answers it
            return
        scope["route"] = self.matched[path]
        request = Request(scope, receive)
        runtime: Runtime = self.fastapi.state.runtime
        try:
            answer = await call(body, runtime, request, key)
        except Exception as exc:
            handler = self._handler(exc)
            if handler is None:
                raise
            response = await handler(request, exc)
            await response(scope, receive, send)
            return
        content = answer.model_dump_json().encode()
        headers = [*_JSON, (b"content-length", str(len(content)).encode())]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": content})

    def _handler(self, exc: Exception) -> Any:
        """The app's handler of a domain error (as the framework would pick it), else None."""
        for cls in type(exc).__mro__:
            if cls is Exception:
                return None
            handler = self.fastapi.exception_handlers.get(cls)
            if handler is not None:
                return handler
        return None


async def _body(receive: Receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(raw: bytes, receive: Receive) -> Receive:
    """``receive`` with the body read already given once more, first."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": raw, "more_body": False}

    return again


def _idempotency_key(scope: Scope) -> tuple[bool, str | None]:
    """Whether the request's key is one this path takes, and the key (None without one)."""
    found = [value for name, value in scope["headers"] if name == b"idempotency-key"]
    if not found:
        return True, None
    key = found[0].decode("latin-1")
    return len(found) == 1 and _key_re.fullmatch(key) is not None, key


def _parsed(model: type[Body], raw: bytes) -> Body | None:
    """The body as the framework would validate it (JSON, then the model), or None."""
    try:
        data = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    try:
        return model.model_validate(data)
    except ValidationError:
        return None


def _waits(body: Body) -> bool:
    """A long poll needs the framework's view of a client that hangs up: it goes there."""
    if isinstance(body, LeaseIn):
        return body.wait_s > 0
    ask = getattr(body, "next", None)
    return isinstance(ask, LeaseIn) and ask.wait_s > 0
