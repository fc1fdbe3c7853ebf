"""Every error answer is ``application/problem+json`` (RFC 9457); this module builds them all.

``install`` registers the one mapping from errors to answers: a domain error's
``code`` picks the status; FastAPI's validation errors (wrong types, malformed
JSON) become 422 ``validation_error``; Starlette's HTTP errors (unknown route,
wrong method) keep their status with a ``code``; anything else is a 500
without detail, so no traceback leaks. The middlewares (auth, body limit) use
``problem`` directly. A body carries ``type``, ``title``, ``status``,
``detail`` and ``code``, and ``errors`` (loc, msg, type) for validation.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, Field
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from leaseq.errors import LeaseqError

log = logging.getLogger("leaseq.api")

MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_S = 1

STATUS_BY_CODE: dict[str, int] = {
    "lease_lost": 409,
    "not_found": 404,
    "validation_error": 422,
    "conflict": 409,
    "incomplete_body": 400,
    "unauthorized": 401,
    "forbidden": 403,
    "payload_too_large": 413,
    "unsupported_media_type": 415,
    "unavailable": 503,
}
CODE_BY_STATUS: dict[int, str] = {
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "validation_error",
    503: "unavailable",
}
TITLES: dict[str, str] = {
    "lease_lost": "Lease lost",
    "not_found": "Not found",
    "validation_error": "Invalid input",
    "conflict": "Conflict",
    "incomplete_body": "Incomplete body",
    "unauthorized": "Unauthorized",
    "forbidden": "Forbidden",
    "payload_too_large": "Payload too large",
    "unavailable": "Service unavailable",
    "method_not_allowed": "Method not allowed",
    "unsupported_media_type": "Unsupported media type",
    "internal_error": "Internal server error",
}


class Problem(BaseModel):
    """An error answer (RFC 9457) with leaseq's stable ``code``."""

    type: str
    title: str
    status: int
    detail: str | None = None
    code: str
    errors: list[dict[str, Any]] | None = Field(
        None, description="With validation_error: each fault's location (loc) and message (msg)."
    )


_PROBLEM_SCHEMA = Problem.model_json_schema()


class ProblemResponse(JSONResponse):
    media_type = MEDIA_TYPE


def problem(
    status: int,
    code: str,
    detail: str | None = None,
    *,
    headers: Mapping[str, str] | None = None,
    **extensions: Any,
) -> ProblemResponse:
    """A problem+json answer."""
    body: dict[str, Any] = {
        "type": f"urn:leaseq:problem:{code}",
        "title": TITLES.get(code, code.replace("_", " ").capitalize()),
        "status": status,
    }
    if detail is not None:
        body["detail"] = detail
    body["code"] = code
    body.update(extensions)
    return ProblemResponse(body, status_code=status, headers=dict(headers or {}))


def responses(*codes: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` for a route that may answer these problem codes."""
    answers: dict[int | str, dict[str, Any]] = {}
    for code in codes:
        status = STATUS_BY_CODE[code]
        described = answers.setdefault(
            status,
            {"content": {MEDIA_TYPE: {"schema": _PROBLEM_SCHEMA}}, "description": ""},
        )
        described["description"] = " or ".join(filter(None, [described["description"], code]))
    return answers


def unavailable(detail: str) -> ProblemResponse:
    """503 ``unavailable`` with Retry-After."""
    return problem(503, "unavailable", detail, headers={"Retry-After": str(RETRY_AFTER_S)})


def _errors(errors: Sequence[Any]) -> list[dict[str, Any]]:
    """Pydantic's errors without ``input`` and ``ctx`` (which may hold anything)."""
    return [
        {"loc": list(err.get("loc", ())), "msg": str(err.get("msg", "")), "type": err.get("type")}
        for err in errors
    ]


def _summary(errors: list[dict[str, Any]]) -> str:
    parts = []
    for err in errors[:5]:
        where = ".".join(str(part) for part in err["loc"])
        parts.append(f"{where}: {err['msg']}" if where else err["msg"])
    more = f" (and {len(errors) - 5} more)" if len(errors) > 5 else ""
    return "; ".join(parts) + more


async def _domain_error(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, LeaseqError)
    if exc.code == "unavailable":
        return unavailable(exc.detail)
    status = STATUS_BY_CODE.get(exc.code, 400)
    field = getattr(exc, "field", None)
    if field is not None:
        loc = field.replace("[", ".").replace("]", "").split(".")
        errors = [{"loc": loc, "msg": exc.detail.removeprefix(f"{field}: ")}]
        return problem(status, exc.code, exc.detail, errors=errors)
    return problem(status, exc.code, exc.detail)


async def _validation_error(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _errors(exc.errors())
    if any(err["type"] == "json_invalid" for err in errors):
        return problem(422, "validation_error", "the body is not valid JSON", errors=errors)
    content_type = request.headers.get("content-type", "")
    if errors and errors[0]["loc"] == ["body"] and content_type and "json" not in content_type:
        detail = "the body must be JSON, sent with Content-Type: application/json"
        return problem(422, "validation_error", detail, errors=errors)
    return problem(422, "validation_error", _summary(errors), errors=errors)


async def _http_error(request: Request, exc: Exception) -> ProblemResponse:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code == 400:  # FastAPI could not read the body (e.g. not UTF-8)
        return problem(422, "validation_error", "the body is not valid JSON", headers=headers)
    code = CODE_BY_STATUS.get(exc.status_code, "http_error")
    detail = exc.detail if isinstance(exc.detail, str) else None
    if exc.status_code == 404 and detail == "Not Found":
        detail = f"no route {request.url.path}"
    elif exc.status_code == 405:
        detail = f"{request.method} is not allowed on {request.url.path}"
    if exc.status_code == 503:
        headers.setdefault("Retry-After", str(RETRY_AFTER_S))
    return problem(exc.status_code, code, detail, headers=headers)


async def _internal_error(request: Request, exc: Exception) -> ProblemResponse:
    # The server logs the traceback (Starlette re-raises after this answer); the client sees none.
    log.error("unhandled %s on %s %s", type(exc).__name__, request.method, request.url.path)
    return problem(500, "internal_error")


def install(app: FastAPI) -> None:
    """Register the handlers that turn every error into problem+json."""
    app.add_exception_handler(LeaseqError, _domain_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)
