"""Every error answer is ``application/problem+json`` (RFC 9457); this module builds them all.

``install`` registers the one mapping from errors to answers: a domain error's
``code`` picks the status; FastAPI's validation errors (wrong types, malformed
JSON) become 422 ``validation_error``; Starlette's HTTP errors (unknown route,
wrong method) keep their status with a ``code``; anything else is a 500
without detail, so no traceback leaks. The middlewares (auth, body limit) use
``problem`` directly. A body carries ``type``, ``title``, ``status``,
``detail`` and ``code``, and ``errors`` (loc, msg, type) for validation.

The same module describes them to the OpenAPI document (``app.api.openapi``): the
one ``Problem`` schema, whose ``code`` is an enum of ``CODES``, the headers a
refusal carries, and the ``responses`` of an operation's refusals.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import JSONResponse

from leaseq.errors import LeaseqError

log = logging.getLogger("leaseq.api")

MEDIA_TYPE = "application/problem+json"
RETRY_AFTER_S = 1


@dataclass(frozen=True)
class Code:
    """One stable problem code: its HTTP status, title and meaning, and whether it is the code
    of a framework error (unknown route, wrong method, ...) answered with that status."""

    status: int
    title: str
    meaning: str
    for_status: bool = False


# Every code an answer may carry (docs/contract.md#error-codes), named once: the answers, the
# Problem schema's enum and the OpenAPI document's descriptions (app.api.openapi) read it.
CODES: dict[str, Code] = {
    "lease_lost": Code(
        409,
        "Lease lost",
        "the lease is not valid (expired, swept, re-leased, completed, cancelled or another "
        "token): stop working on the lead, do not retry",
    ),
    "not_found": Code(404, "Not found", "no such lead, schedule or token", for_status=True),
    "validation_error": Code(
        422,
        "Invalid input",
        "the input breaks a rule (`errors` name where); nothing changed",
        for_status=True,
    ),
    "conflict": Code(
        409, "Conflict", "the lead's status does not allow this; nothing changed", for_status=True
    ),
    "incomplete_body": Code(
        400, "Incomplete body", "the body ended before its Content-Length; nothing was done"
    ),
    "unauthorized": Code(
        401, "Unauthorized", "no valid bearer token (tokens are configured)", for_status=True
    ),
    "forbidden": Code(
        403,
        "Forbidden",
        "outside the token's role or sessions, a Host not served without tokens, or a "
        "browser's cross-site request; nothing changed",
        for_status=True,
    ),
    "payload_too_large": Code(
        413, "Payload too large", "the body is over LEASEQ_MAX_BODY_BYTES", for_status=True
    ),
    "unsupported_media_type": Code(
        415,
        "Unsupported media type",
        "a body that is not sent as application/json; nothing changed",
        for_status=True,
    ),
    "quota_exceeded": Code(
        429,
        "Quota exceeded",
        "the push would pass the session's max_queued; none of it was stored: retry after "
        "Retry-After",
    ),
    "unavailable": Code(
        503,
        "Service unavailable",
        "the database does not answer, or a bound of the process was reached; nothing was "
        "done: retry after Retry-After",
        for_status=True,
    ),
    "method_not_allowed": Code(
        405, "Method not allowed", "the path does not serve this method", for_status=True
    ),
    "internal_error": Code(
        500, "Internal server error", "a fault of the service (a bug), answered without detail"
    ),
}
# A framework error's code, by the status it was raised with.
CODE_BY_STATUS: dict[int, str] = {c.status: name for name, c in CODES.items() if c.for_status}


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
    """A problem+json answer; ``code`` is one of ``CODES``."""
    body: dict[str, Any] = {
        "type": f"urn:leaseq:problem:{code}",
        "title": CODES[code].title,
        "status": status,
    }
    if detail is not None:
        body["detail"] = detail
    body["code"] = code
    body.update(extensions)
    return ProblemResponse(body, status_code=status, headers=dict(headers or {}))


# -- the answers in the OpenAPI document ------------------------------------------------------

PROBLEM_REF = "#/components/schemas/Problem"


def problem_schema() -> dict[str, Any]:
    """``components/schemas/Problem``: the one schema of every error answer."""
    codes = "; ".join(f"`{name}` ({code.status}): {code.meaning}" for name, code in CODES.items())
    return {
        "type": "object",
        "description": "An error answer (RFC 9457, application/problem+json) with leaseq's "
        "stable `code`. Branch on `code`, never on `title` or `detail`.",
        "required": ["type", "title", "status", "code"],
        "properties": {
            "type": {"type": "string", "description": "`urn:leaseq:problem:` and the code."},
            "title": {"type": "string", "description": "The code's title, for people."},
            "status": {"type": "integer", "description": "The answer's HTTP status."},
            "detail": {"type": "string", "description": "What went wrong, for people."},
            "code": {"type": "string", "enum": list(CODES), "description": codes + "."},
            "errors": {
                "type": "array",
                "description": "With validation_error: each fault, where (`loc`) and what.",
                "items": {
                    "type": "object",
                    "required": ["loc", "msg"],
                    "properties": {
                        "loc": {
                            "type": "array",
                            "items": {"anyOf": [{"type": "string"}, {"type": "integer"}]},
                            "description": 'The path to the fault: ["body", "leads", 0, "key"].',
                        },
                        "msg": {"type": "string"},
                        "type": {"type": "string", "description": "The kind of fault."},
                    },
                },
            },
            "reason": {
                "type": "string",
                "enum": ["max_runtime"],
                "description": "With lease_lost, when known: its maximum runtime ended.",
            },
        },
    }


# The headers an error answer carries, by status (``components/headers``).
RETRY_AFTER = {
    "description": "Seconds to wait before sending the request again.",
    "required": True,
    "schema": {"type": "integer", "minimum": 0},
}
HEADERS: dict[str, dict[str, Any]] = {
    "Retry-After": RETRY_AFTER,
    "WWW-Authenticate": {
        "description": 'The challenge: `Bearer realm="leaseq"`, with `error="invalid_token"` '
        "when a token was sent.",
        "required": True,
        "schema": {"type": "string"},
    },
    "Allow": {
        "description": "The methods the path serves.",
        "required": True,
        "schema": {"type": "string"},
    },
}
HEADERS_BY_STATUS = {401: "WWW-Authenticate", 405: "Allow", 429: "Retry-After", 503: "Retry-After"}


def answers(
    refusals: Iterable[tuple[int, str, str]], into: dict[int | str, Any] | None = None
) -> dict[int | str, Any]:
    """OpenAPI ``responses`` (``into``, extended, or new) for these (status, code, meaning)
    refusals: each status once, its description naming each code, its body the one Problem
    schema, with its status's header."""
    found: dict[int | str, Any] = {} if into is None else into
    for status, code, meaning in refusals:
        described = found.setdefault(
            str(status),
            {"description": "", "content": {MEDIA_TYPE: {"schema": {"$ref": PROBLEM_REF}}}},
        )
        lines = list(filter(None, described["description"].split("\n")))
        line = f"`{code}`: {meaning}."
        described["description"] = "\n".join(lines if line in lines else [*lines, line])
        header = HEADERS_BY_STATUS.get(status)
        if header is not None:
            described["headers"] = {header: {"$ref": f"#/components/headers/{header}"}}
    return found


def responses(*codes: str) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` of the refusals of a route's own (lease_lost, not_found, ...), at
    their codes' statuses; what every route may answer is the document's (app.api.openapi)."""
    return answers((CODES[code].status, code, CODES[code].meaning) for code in codes)


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
    if exc.code == "quota_exceeded":
        wait = getattr(exc, "retry_after_s", None) or RETRY_AFTER_S
        return problem(429, exc.code, exc.detail, headers={"Retry-After": str(round(wait))})
    if exc.code not in CODES:  # a client-side class raised by the service: a fault
        return await _internal_error(request, exc)
    if exc.code == "unauthorized":  # a token that ended while its request ran
        challenge = 'Bearer realm="leaseq", error="invalid_token"'
        return problem(401, exc.code, exc.detail, headers={"WWW-Authenticate": challenge})
    status = CODES[exc.code].status
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
    code = CODE_BY_STATUS.get(exc.status_code)
    if code is None:  # a framework error leaseq has no code for: a fault, as any other
        return await _internal_error(request, exc)
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
