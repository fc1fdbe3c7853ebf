"""The OpenAPI document (``GET /openapi.json``): what FastAPI builds from the routes, made into a
contract that generators of clients in any language can trust (docs/openapi.md).

FastAPI describes each route's parameters, body and answer from its signature.
``install`` adds, once, what the signatures do not say:

- **Operation ids** that read as verbs: each route's function name in camelCase
  (``renew_batch`` → ``renewBatch``), so the route table is their one home and a
  generated client's methods are ``push``, ``lease``, ``renew``, ``getLead``...
- **The bearer scheme** on every route but those ``app.api.auth`` leaves open. The
  document is the same whether the service has tokens or not: a service without
  tokens serves loopback and ignores the header (docs/security.md).
- **Every refusal a route can answer**, described on its operation: those it
  declares itself (``app.api.problems.responses``: 404, 409, 429) and those of the
  doors every request passes (``DOORS``: auth or the Host check, the body limit,
  JSON bodies only, the front door, the connection bounds of
  ``app.api.http_connections``), each status once, each a reference to the one
  ``Problem`` schema, with its header (``WWW-Authenticate``, ``Allow``,
  ``Retry-After``).
- **Plain inputs**: a parameter is absent or a string, never ``null``; a field of a
  request body that has a default is optional, the default said in its description
  (openapi-typescript reads a stated default as "always present", true of an
  answer, not of a request); a field an answer leaves out is not required.
- ``servers``, ``license``, and the links between operations (``app.api.links``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI
from fastapi.routing import APIRoute

from app import config
from app.api import access, auth, hosts, links, middleware, problems

SECURITY_SCHEME = "bearerAuth"
BEARER = {
    "type": "http",
    "scheme": "bearer",
    "description": "One of LEASEQ_API_TOKENS (full access), or a scoped token (`leaseq tokens "
    "create`). Wanted when the service has tokens; one without them serves loopback and "
    "the hosts of LEASEQ_ALLOWED_HOSTS, and ignores it.",
}
SERVERS = [{"url": "/", "description": "The service that serves this document."}]
LICENSE = {"name": "MIT", "identifier": "MIT"}
# FastAPI's own validation error schemas: leaseq answers validation errors as problems.
FASTAPI_VALIDATION = ("HTTPValidationError", "ValidationError")
REF = "#/components/schemas/"


def operation_id(route: APIRoute) -> str:
    """A route's operation id: its function's name in camelCase."""
    first, *rest = route.name.split("_")
    return first + "".join(word.capitalize() for word in rest)


@dataclass(frozen=True)
class Door:
    """A refusal that a route's requests may get before (or besides) the route itself."""

    status: int
    code: str
    meaning: str
    applies: Callable[[APIRoute, str, dict[str, Any]], bool]


def _always(route: APIRoute, method: str, operation: dict[str, Any]) -> bool:
    return True


def _has_inputs(route: APIRoute, method: str, operation: dict[str, Any]) -> bool:
    return bool(operation.get("parameters")) or "requestBody" in operation


_HEAD_KIB = config.MAX_HEAD_BYTES // 1024

# What every door a request passes may answer, and on which routes (docs/contract.md#error-codes).
DOORS = (
    Door(
        400,
        "incomplete_body",
        problems.CODES["incomplete_body"].meaning,
        lambda route, method, operation: route.body_field is not None,
    ),
    Door(
        401,
        "unauthorized",
        problems.CODES["unauthorized"].meaning,
        lambda route, method, operation: route.path_format not in auth.OPEN_PATHS,
    ),
    Door(
        403,
        "forbidden",
        problems.CODES["forbidden"].meaning,
        lambda route, method, operation: route.path_format not in hosts.OPEN_PATHS,
    ),
    Door(405, "method_not_allowed", problems.CODES["method_not_allowed"].meaning, _always),
    Door(
        408,
        "unavailable",
        "the request head or body did not arrive within LEASEQ_HEAD_TIMEOUT_S or "
        "LEASEQ_BODY_TIMEOUT_S; nothing was done, the connection is closed: send it again",
        _always,
    ),
    Door(413, "payload_too_large", problems.CODES["payload_too_large"].meaning, _always),
    Door(
        415,
        "unsupported_media_type",
        problems.CODES["unsupported_media_type"].meaning,
        lambda route, method, operation: method.encode() in middleware.BODY_METHODS,
    ),
    Door(422, "validation_error", problems.CODES["validation_error"].meaning, _has_inputs),
    Door(
        431,
        "payload_too_large",
        f"the request head (request line and headers) is over {_HEAD_KIB} KiB",
        _always,
    ),
    Door(500, "internal_error", problems.CODES["internal_error"].meaning, _always),
    Door(503, "unavailable", problems.CODES["unavailable"].meaning, _always),
)


def install(app: FastAPI) -> None:
    """Serve ``document(app)`` as the app's OpenAPI document (built once, on first ask)."""
    built = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = document(app, built())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def document(app: FastAPI, built: dict[str, Any]) -> dict[str, Any]:
    """FastAPI's document of ``app`` (``built``), completed as the module's docstring says."""
    built["info"]["license"] = LICENSE
    built["servers"] = SERVERS
    components = built.setdefault("components", {})
    components["securitySchemes"] = {SECURITY_SCHEME: BEARER}
    components["headers"] = problems.HEADERS
    schemas = components.setdefault("schemas", {})
    schemas["Problem"] = problems.problem_schema()
    for route, method, operation in _operations(app, built):
        open_path = route.path_format in auth.OPEN_PATHS
        operation["security"] = [] if open_path else [{SECURITY_SCHEME: []}]
        refusals = [
            (door.status, door.code, door.meaning)
            for door in DOORS
            if door.applies(route, method, operation)
        ]
        answers = operation["responses"]
        if set(_refs(answers.get("422", {}))) & set(FASTAPI_VALIDATION):
            del answers["422"]  # FastAPI's own: leaseq answers validation errors as problems
        problems.answers(refusals, into=answers)
        operation["responses"] = dict(sorted(answers.items()))
        for parameter in operation.get("parameters", []):
            parameter["schema"] = _not_null(parameter["schema"])
    for name in FASTAPI_VALIDATION:
        schemas.pop(name, None)
    for name in _reachable(built, "requestBody"):
        _defaults_described(schemas[name])
    for name in _reachable(built, "responses"):
        _defaults_dropped(schemas[name])
    _without_null_bodies(built)
    return links.add_links(built)


def _operations(app: FastAPI, built: dict[str, Any]) -> Iterator[tuple[APIRoute, str, Any]]:
    """Each route of the document, with each of its methods and that method's operation."""
    for route in access.every_route(app.routes):
        if isinstance(route, APIRoute) and route.include_in_schema:
            for method in sorted(route.methods or ()):
                yield route, method, built["paths"][route.path_format][method.lower()]


def _not_null(schema: dict[str, Any]) -> dict[str, Any]:
    """A parameter's schema without its ``null``: a parameter is sent, or left out."""
    kept = [s for s in schema.get("anyOf", []) if s != {"type": "null"}]
    if len(kept) != 1 or len(kept) == len(schema["anyOf"]):
        return schema
    plain = {key: value for key, value in schema.items() if key not in ("anyOf", "default")}
    only: dict[str, Any] = kept[0]
    return plain | only


def _refs(value: Any) -> Iterator[str]:
    """The names of the component schemas ``value`` refers to, directly."""
    if isinstance(value, dict):
        ref = value.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF):
            yield ref.removeprefix(REF)
        for item in value.values():
            yield from _refs(item)
    elif isinstance(value, list):
        for item in value:
            yield from _refs(item)


def _reachable(built: dict[str, Any], part: str) -> set[str]:
    """The component schemas the operations' ``part`` (``requestBody`` or ``responses``) use,
    through any number of references."""
    schemas = built["components"]["schemas"]
    found: set[str] = set()
    todo = [
        name
        for operations in built["paths"].values()
        for operation in operations.values()
        for name in _refs(operation.get(part, {}))
    ]
    while todo:
        name = todo.pop()
        if name not in found:
            found.add(name)
            todo.extend(_refs(schemas[name]))
    return found


def _defaults_described(schema: dict[str, Any]) -> None:
    """A request schema's defaults said in words: the field stays optional to a generator."""
    for field in schema.get("properties", {}).values():
        if "default" in field:
            default = json.dumps(field.pop("default"))
            said = field.get("description", "").rstrip()
            field["description"] = f"{said} Default: {default}.".lstrip()


def _defaults_dropped(schema: dict[str, Any]) -> None:
    """An answer's field with a default is one the answer may leave out: not required, and
    stated without the default a generator would read as "always there"."""
    required = set(schema.get("required", []))
    for name, field in schema.get("properties", {}).items():
        if name not in required:
            field.pop("default", None)


def _without_null_bodies(built: dict[str, Any]) -> None:
    """An optional body FastAPI states as ``anyOf: [model, null]`` stated as the model: the
    request may leave the body out, but a body of JSON null is refused (app.api.body)."""
    for operations in built["paths"].values():
        for operation in operations.values():
            content = operation.get("requestBody", {}).get("content", {})
            for media in content.values():
                media["schema"] = _not_null(media.get("schema", {}))
