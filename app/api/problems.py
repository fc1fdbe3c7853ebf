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
from dataclasses import dataclass
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


@dataclass(frozen=True)
class Code:
    """One stable problem code: its HTTP status and title, and whether it is the code of a
    framework error (unknown route, wrong method, ...) answered with that status."""

    status: int
    title: str
    for_status: bool = False


# Every code an answer may carry (docs/contract.md#error-codes), named once.
CODES: dict[str, Code] = {
    "lease_lost": Code(409, "Lease lost"),
    "not_found": Code(404, "Not found", for_status=True),
    "validation_error": Code(422, "Invalid input", for_status=True),
    "conflict": Code(409, "Conflict", for_status=True),
    "incomplete_body": Code(400, "Incomplete body"),
    "unauthorized": Code(401, "Unauthorized", for_status=True),
    "forbidden": Code(403, "Forbidden", for_status=True),
    "payload_too_large": Code(413, "Payload too large", for_status=True),
    "unsupported_media_type": Code(415, "Unsupported media type", for_status=True),
    "unavailable": Code(503, "Service unavailable", for_status=True),
    "method_not_allowed": Code(405, "Method not allowed", for_status=True),
    "internal_error": Code(500, "Internal server error"),
}
# A framework error's code, by the status it was raised with.
CODE_BY_STATUS: dict[int, str] = {c.status: name for name, c in CODES.items() if c.for_status}


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
    reason: str | None = Field(
        None, description='With lease_lost, when known: "max_runtime" (its maximum runtime ended).'
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
        "title": CODES[code].title if code in CODES else code.replace("_", " ").capitalize(),
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
        status = CODES[code].status
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
    status = CODES[exc.code].status if exc.code in CODES else 400
    field = getattr(exc, "field", None)
    if field is not None:
        loc = field.replace("[", ".").replace("]", "").split(".")
        errors = [{"loc": loc, "msg": exc.detail.removeprefix(f"{field}: ")}]
        return problem(status, exc.code, exc.detail, errors=errors)
    reason = getattr(exc, "reason", None)
    if reason is not None:
        return problem(status, exc.code, exc.detail, reason=reason)
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
