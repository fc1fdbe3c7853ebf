"""Pure ASGI middlewares: JSON bodies only, the request body limit and request latency metrics."""

from __future__ import annotations

import time

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from app import metrics
from app.api.problems import problem

BODY_METHODS = frozenset({b"POST", b"PUT", b"PATCH"})


class JsonBodies:
    """Refuse a request body that is not ``application/json`` with 415, before it is read.

    A POST, PUT or PATCH naming another content type, or carrying a body with
    none, is refused; one with neither (the bodiless cancel and retry) passes.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"].encode() not in BODY_METHODS:
            await self.app(scope, receive, send)
            return
        content_type = _header(scope, b"content-type")
        if content_type is None:
            length = _content_length(scope)
            has_body = bool(length) or _header(scope, b"transfer-encoding") is not None
            acceptable = not has_body
        else:
            media = content_type.partition(b";")[0].strip().lower()
            acceptable = media == b"application/json"
        if acceptable:
            await self.app(scope, receive, send)
            return
        detail = "the body must be JSON, sent with Content-Type: application/json"
        await problem(415, "unsupported_media_type", detail)(scope, receive, send)


class _BodyTooLarge(Exception):
    """Raised into the app by ``receive`` when the body passes the limit."""


class BodyLimit:
    """Refuse bodies over ``max_body_bytes`` with 413 ``payload_too_large`` before they are parsed.

    A declared ``Content-Length`` over the limit is refused before any byte
    is read. A streamed body (chunked, or lying about its length) is counted
    as it arrives: past the limit, ``receive`` raises into the app, whatever
    the app answers is dropped, and the 413 is sent instead.
    """

    def __init__(self, app: ASGIApp, *, max_body_bytes: int) -> None:
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.max_body_bytes:
            await self._refuse(scope, receive, send)
            return

        received = 0
        too_large = False
        started = False

        async def limited_receive() -> Message:
            nonlocal received, too_large
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    too_large = True
                    raise _BodyTooLarge()
            return message

        async def guarded_send(message: Message) -> None:
            nonlocal started
            if too_large:  # the app's answer to a body it never got whole
                return
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except Exception:
            if not too_large:
                raise
        if too_large and not started:
            await self._refuse(scope, receive, send)

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        detail = f"the body is larger than {self.max_body_bytes} bytes"
        response = problem(413, "payload_too_large", detail, headers={"Connection": "close"})
        await response(scope, receive, send)


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope["headers"]:
        if name == wanted:
            return bytes(value)
    return None


def _content_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    try:
        return None if value is None else int(value)
    except ValueError:
        return None


_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


class RequestMetrics:
    """Observe each request's latency, labelled by method, route template and status."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # The router leaves the matched route in the scope; unmatched paths share one label.
            route = getattr(scope.get("route"), "path", None) or "unmatched"
            method = scope["method"] if scope["method"] in _METHODS else "other"
            metrics.REQUEST_LATENCY.labels(method, route, str(status)).observe(
                time.perf_counter() - start
            )
