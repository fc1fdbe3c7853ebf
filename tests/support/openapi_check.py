"""Every answer checked against the OpenAPI document that the service serves.

``Conformance(document).check(response)`` finds the operation of the request
(its method and path among the document's paths), then asserts that the answer's
status is one that operation describes, that its media type is one described for
that status, that its JSON body is valid by the schema described (jsonschema, the
document's own ``$ref``s resolved in place; an object with no field the schema does not
name), that each header the description
requires is there, and that a header a client acts on (``Retry-After``,
``WWW-Authenticate``, ``Allow``) is never sent where the description does not
name it. A problem's ``status`` must be the answer's.

A method the path does not serve, or a path the document does not have, gets a
refusal as some operation of the path (of any path) describes it: 405 or 404, or the
refusal of a door passed before the route is found; a path with a trailing slash may be
redirected (307) to the path without it. FastAPI's own pages
(``/docs``, ``/openapi.json`` ...) are not in the document and are not checked.

tests/api/conftest.py hooks it into every in-process client of the API suite.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import httpx
from jsonschema import Draft202012Validator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from app.api.access import FRAMEWORK_PATHS

DOCUMENT_URI = "urn:leaseq:openapi"
# Headers a client acts on: sent only where the document says so.
ACTED_ON = ("retry-after", "www-authenticate", "allow")
JSON_MEDIA = ("application/json", "application/problem+json")


def _pointer(*parts: str) -> str:
    return "#/" + "/".join(part.replace("~", "~0").replace("/", "~1") for part in parts)


class Conformance:
    """The answers a document allows, checked one response at a time."""

    def __init__(self, document: dict[str, Any]) -> None:
        self.document = document
        self.registry: Registry[Any] = Registry().with_resource(
            DOCUMENT_URI,
            Resource.from_contents(_closed(document), default_specification=DRAFT202012),
        )
        # Paths without parameters first, as the router prefers an exact route.
        ordered = sorted(document["paths"], key=lambda path: "{" in path)
        self.paths = [(path, _template(path)) for path in ordered]
        self.validators: dict[str, Draft202012Validator] = {}

    def check(self, response: httpx.Response) -> None:
        """Assert that ``response`` (read already) is one the document allows."""
        request = response.request
        method = request.method.lower()
        method = "get" if method == "head" else method
        path = request.url.path
        if path in FRAMEWORK_PATHS or path.startswith("/docs/"):
            return
        where = f"{request.method} {path} answered {response.status_code}"
        if response.status_code == 307 and path.endswith("/"):
            # The router's redirect of a trailing slash to the path the document has.
            location = httpx.URL(response.headers["location"]).path
            assert location == path.rstrip("/"), f"{where}: to {location}"
            assert any(pattern.fullmatch(location) for _, pattern in self.paths), where
            return
        matching = [p for p, pattern in self.paths if pattern.fullmatch(path)]
        served = [p for p in matching if method in self.document["paths"][p]]
        if served:
            described = self._described(served[0], method, response.status_code, where)
        else:  # a method the path does not serve, or no such path: as any operation refuses
            others = matching or [p for p, _ in self.paths]
            found = (
                self._described(p, m, response.status_code, None)
                for p in others
                for m in self.document["paths"][p]
            )
            described = next((d for d in found if d is not None), None)
            assert described is not None and response.status_code >= 400, (
                f"{where}: a refusal no operation of the path describes"
            )
        self._check_answer(response, described, where)

    def _described(
        self, path: str, method: str, status: int, where: str | None
    ) -> tuple[str, dict[str, Any]] | None:
        """The pointer to the operation's description of ``status``, and it; None (or, with
        ``where``, an assertion) when the operation describes no such status."""
        answers = self.document["paths"][path][method]["responses"]
        key = str(status) if str(status) in answers else "default"
        if key not in answers:
            assert where is None, f"{where}: not a status of {method.upper()} {path}"
            return None
        return _pointer("paths", path, method, "responses", key), answers[key]

    def _check_answer(
        self, response: httpx.Response, described: tuple[str, dict[str, Any]], where: str
    ) -> None:
        media = response.headers.get("content-type", "").partition(";")[0].strip()
        pointer, answer = described
        content = answer.get("content", {})
        schema_pointer: str | None = None
        if not content:
            assert not response.content, f"{where}: a body where none is described"
        else:
            assert media in content, f"{where}: {media!r} is not one of {sorted(content)}"
            if "schema" in content[media]:
                schema_pointer = pointer + "/content/" + media.replace("/", "~1") + "/schema"
        if schema_pointer is not None and media in JSON_MEDIA and response.content:
            body = json.loads(response.content)
            errors = sorted(
                self._validator(schema_pointer).iter_errors(body), key=lambda e: e.json_path
            )
            assert not errors, f"{where}: the body is not as described: " + "; ".join(
                f"{e.json_path}: {e.message}" for e in errors[:5]
            )
            if media == "application/problem+json":
                assert body["status"] == response.status_code, f"{where}: {body}"
        headers = {name.lower(): spec for name, spec in answer.get("headers", {}).items()}
        for name, spec in headers.items():
            spec = self._resolved(spec)
            if spec.get("required"):
                assert name in response.headers, f"{where}: no {name} header"
        for name in ACTED_ON:
            if name in response.headers:
                assert name in headers, f"{where}: sends {name}, which is not described"

    def _validator(self, pointer: str) -> Draft202012Validator:
        """The validator of the schema at ``pointer`` in the document (made once)."""
        made = self.validators.get(pointer)
        if made is None:
            made = self.validators[pointer] = Draft202012Validator(
                {"$ref": DOCUMENT_URI + pointer}, registry=self.registry
            )
        return made

    def _resolved(self, spec: dict[str, Any]) -> dict[str, Any]:
        ref = spec.get("$ref")
        if ref is None:
            return spec
        found: dict[str, Any] = self.registry.resolver(DOCUMENT_URI).lookup(ref).contents
        return found


def _closed(document: dict[str, Any]) -> dict[str, Any]:
    """The document with each answer's object closed to fields it does not name: the
    document leaves them open (a client should let a new field pass), but the service must
    send none that the document does not describe. A problem may carry extension members
    (RFC 9457)."""
    closed = copy.deepcopy(document)
    for name, schema in closed["components"]["schemas"].items():
        if "properties" in schema and "additionalProperties" not in schema and name != "Problem":
            schema["additionalProperties"] = False
    return closed


def _template(path: str) -> re.Pattern[str]:
    """A path of the document as a pattern of request paths (a parameter: one segment)."""
    parts = re.split(r"(\{[^}]+\})", path)
    return re.compile(
        "".join("[^/]+" if part.startswith("{") else re.escape(part) for part in parts)
    )


_SEEN: dict[str, Conformance] = {}


def conformance(document: dict[str, Any]) -> Conformance:
    """The checker of ``document``, made once per distinct document (each app serves its own,
    and they are all alike)."""
    text = json.dumps(document, sort_keys=True)
    found = _SEEN.get(text)
    if found is None:
        found = _SEEN[text] = Conformance(document)
    return found
