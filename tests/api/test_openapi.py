"""/openapi.json is a document generators trust (docs/any-language.md#the-openapi-document).

Its shape is checked here without any tool: the operation ids, the one Problem
schema, the refusals every operation describes, the bearer scheme, plain parameters.
Then the tools a user would run on it: Redocly's recommended rules find nothing, and
openapi-typescript's default output compiles a small worker under ``tsc --strict``,
which drains a session of a real ``leaseq serve``. That every answer the API suite
receives is one the document describes is tests/api/conftest.py's hook
(``tests.support.openapi_check``), checked itself at the end of this module.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api import auth
from app.api.app import create_app
from app.api.problems import CODES, MEDIA_TYPE
from app.config import Settings
from leaseq import errors
from tests.support import npm_tools, openapi_check
from tests.support.serving import ROOT, Services

DOCUMENT = create_app(Settings(database_url="postgresql://unused")).openapi()
PROBLEM = {"$ref": "#/components/schemas/Problem"}
WORKER = ROOT / "tests" / "support" / "fixtures" / "openapi_worker.ts"
TOOL_TIMEOUT_S = 300

# The operation ids clients are generated with: a change here breaks every generated client.
OPERATION_IDS = {
    ("POST", "/sessions/{session}/leads"): "push",
    ("GET", "/sessions/{session}/pushes/{key}"): "getPush",
    ("POST", "/lease"): "lease",
    ("POST", "/renew"): "renew",
    ("POST", "/renew/batch"): "renewBatch",
    ("POST", "/complete"): "complete",
    ("POST", "/complete/batch"): "completeBatch",
    ("POST", "/release"): "release",
    ("POST", "/sweep"): "sweep",
    ("GET", "/sessions/{session}/stats"): "getSessionStats",
    ("GET", "/stats"): "getStats",
    ("GET", "/sessions/{session}/scaling"): "getScaling",
    ("GET", "/scaling"): "getScalingAll",
    ("GET", "/sessions/{session}/report"): "getReport",
    ("GET", "/sessions/{session}/settings"): "getSettings",
    ("PUT", "/sessions/{session}/settings"): "putSettings",
    ("POST", "/sessions/{session}/pause"): "pause",
    ("POST", "/sessions/{session}/resume"): "resume",
    ("POST", "/sessions/{session}/retry-failed"): "retryFailed",
    ("GET", "/sessions/{session}/leads"): "listLeads",
    ("POST", "/sessions/{session}/leads/retry"): "retryLeads",
    ("POST", "/sessions/{session}/leads/cancel"): "cancelLeads",
    ("GET", "/sessions/{session}/throughput"): "getThroughput",
    ("GET", "/leads/{lead_id}"): "getLead",
    ("POST", "/leads/{lead_id}/cancel"): "cancelLead",
    ("POST", "/leads/{lead_id}/retry"): "retryLead",
    ("GET", "/leads/{lead_id}/events"): "getLeadEvents",
    ("PUT", "/schedules/{name}"): "putSchedule",
    ("GET", "/schedules"): "listSchedules",
    ("GET", "/schedules/{name}"): "getSchedule",
    ("DELETE", "/schedules/{name}"): "deleteSchedule",
    ("POST", "/tokens"): "createToken",
    ("GET", "/tokens"): "listTokens",
    ("DELETE", "/tokens/{name}"): "revokeToken",
    ("GET", "/tokens/self"): "getOwnToken",
    ("GET", "/metrics"): "getMetrics",
    ("GET", "/dashboard"): "getDashboard",
    ("GET", "/dashboard/data"): "getDashboardData",
    ("GET", "/healthz"): "getHealth",
    ("GET", "/readyz"): "getReadiness",
}


def operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method.upper(), path, operation)
        for path, methods in DOCUMENT["paths"].items()
        for method, operation in methods.items()
    ]


def test_the_document_is_the_same_whatever_the_settings() -> None:
    """What lets the suite check every answer against one document built once."""
    for settings in (
        {"api_tokens": "ops:s3cret"},
        {"allowed_hosts": "leaseq.test", "ledger": False, "pool_size": 3},
        {"max_body_bytes": 4096, "statement_timeout_ms": 30_000},
    ):
        other = create_app(Settings(database_url="postgresql://unused", **settings)).openapi()
        assert other == DOCUMENT, settings


def test_operation_ids_read_as_verbs_and_stay_as_clients_know_them() -> None:
    found = {(method, path): op["operationId"] for method, path, op in operations()}
    assert found == OPERATION_IDS


def test_one_problem_schema_whose_code_is_each_code_the_service_answers_with() -> None:
    problem = DOCUMENT["components"]["schemas"]["Problem"]
    assert problem["properties"]["code"]["enum"] == list(CODES)
    assert {"lease_lost", "quota_exceeded", "unavailable"} <= set(CODES)
    assert set(errors.BY_CODE) <= set(CODES)  # each code the client has a class for
    assert problem["required"] == ["type", "title", "status", "code"]
    # Every problem answer of every operation is that one schema, never a copy of it.
    for method, path, op in operations():
        for status, answer in op["responses"].items():
            if int(status) >= 400:
                assert answer["content"] == {MEDIA_TYPE: {"schema": PROBLEM}}, (method, path)
    assert "HTTPValidationError" not in DOCUMENT["components"]["schemas"]


def test_every_operation_describes_the_refusals_of_the_doors_it_is_behind() -> None:
    headers = {"401": "WWW-Authenticate", "405": "Allow", "503": "Retry-After"}
    for method, path, op in operations():
        answers = op["responses"]
        assert {"405", "408", "413", "431", "500", "503"} <= set(answers), (method, path)
        assert ("401" in answers) == (path not in auth.OPEN_PATHS), (method, path)
        assert ("415" in answers) == (method in ("POST", "PUT")), (method, path)
        has_inputs = bool(op.get("parameters")) or "requestBody" in op
        assert ("422" in answers) == has_inputs, (method, path)
        for status, header in headers.items():
            if status in answers:
                assert answers[status]["headers"] == {
                    header: {"$ref": f"#/components/headers/{header}"}
                }, (method, path, status)
    assert DOCUMENT["components"]["headers"]["Retry-After"]["required"] is True
    push = DOCUMENT["paths"]["/sessions/{session}/leads"]["post"]["responses"]
    assert "`quota_exceeded`" in push["429"]["description"]
    assert "Retry-After" in push["429"]["headers"]
    renew = DOCUMENT["paths"]["/renew"]["post"]["responses"]
    assert renew["409"]["description"].startswith("`lease_lost`")


def test_a_bearer_scheme_on_every_operation_but_the_open_ones() -> None:
    scheme = DOCUMENT["components"]["securitySchemes"]["bearerAuth"]
    assert (scheme["type"], scheme["scheme"]) == ("http", "bearer")
    for _, path, op in operations():
        wanted = [] if path in {"/healthz", "/readyz", "/dashboard"} else [{"bearerAuth": []}]
        assert op["security"] == wanted, path


def test_parameters_are_plain_values_and_request_defaults_keep_fields_optional() -> None:
    headers = {}
    for _, _, op in operations():
        for parameter in op.get("parameters", []):
            assert "null" not in json.dumps(parameter["schema"]), parameter
            if parameter["in"] == "header":
                headers[parameter["name"]] = parameter["schema"]["type"]
    assert headers == {"Idempotency-Key": "string", "traceparent": "string"}
    schemas = DOCUMENT["components"]["schemas"]
    for name in ("LeaseIn", "CompleteIn", "NewLeadIn", "RenewIn", "SettingsIn", "SweepIn"):
        fields = schemas[name]["properties"]
        assert not [f for f, field in fields.items() if "default" in field], name
    assert "max" not in schemas["LeaseIn"]["required"]
    assert "Default: 1." in schemas["LeaseIn"]["properties"]["max"]["description"]
    assert "default" not in schemas["CompleteOut"]["properties"]["leases"]


# -- the tools a user runs on it -------------------------------------------------------------


@pytest.fixture
def document_file(tmp_path: Path) -> Path:
    path = tmp_path / "openapi.json"
    path.write_text(json.dumps(DOCUMENT))
    return path


def run(*argv: str | Path, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A tool's run, which must succeed; no telemetry leaves the machine."""
    env = {**os.environ, "REDOCLY_TELEMETRY": "off", "REDOCLY_SUPPRESS_UPDATE_NOTICE": "true"}
    done = subprocess.run(
        [str(arg) for arg in argv],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=TOOL_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


@pytest.mark.tools
def test_redocly_recommended_rules_find_nothing(document_file: Path) -> None:
    redocly = npm_tools.tool("redocly")
    linted = run(
        redocly,
        "lint",
        document_file,
        "--extends=recommended",
        "--format=json",
        cwd=document_file.parent,
    )
    found = json.loads(linted.stdout)
    assert found["totals"] == {"errors": 0, "warnings": 0, "ignored": 0}, found["problems"]


@pytest.mark.tools
def test_a_worker_on_openapi_typescripts_default_output_compiles_strict_and_drains_a_session(
    document_file: Path, services: Services, database_url: str
) -> None:
    generate = npm_tools.tool("openapi-typescript")
    tsc = npm_tools.tool("tsc")
    folder = document_file.parent
    run(generate, document_file, "--output", folder / "leaseq.ts", cwd=folder)  # defaults
    (folder / WORKER.name).write_text(WORKER.read_text())
    types = npm_tools.types_folder()
    run(
        tsc,
        "--strict",
        "--target",
        "es2022",
        "--module",
        "commonjs",
        "--lib",
        "es2022",
        "--typeRoots",
        types,
        "--types",
        "node",
        "--outDir",
        folder / "out",
        WORKER.name,
        cwd=folder,
    )
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    leads = [{"payload": {"n": n}} for n in range(20)]
    with service.client() as http:
        assert http.post("/sessions/ts/leads", json={"leads": leads}).status_code == 201
        node = npm_tools.need(npm_tools.NODE)
        worker = folder / "out" / WORKER.with_suffix(".js").name
        run(node, worker, service.url, "ts", cwd=folder)
        assert http.get("/sessions/ts/stats").json()["done"] == 20
        report = http.get("/sessions/ts/report").json()
        assert (report["completions"], report["double_completions"]) == (20, 0)


# -- the check every answer of the suite passes ----------------------------------------------


def answer(method: str, path: str, status: int, body: Any, **headers: str) -> httpx.Response:
    media = "application/problem+json" if status >= 400 else "application/json"
    return httpx.Response(
        status,
        json=body,
        headers={"content-type": media, **headers},
        request=httpx.Request(method, f"http://leaseq.test{path}"),
    )


def problem(status: int, code: str) -> dict[str, Any]:
    return {"type": f"urn:leaseq:problem:{code}", "title": "t", "status": status, "code": code}


def test_the_check_refuses_what_the_document_does_not_describe() -> None:
    check = openapi_check.conformance(DOCUMENT).check
    check(answer("POST", "/renew", 409, problem(409, "lease_lost")))
    renewed = {"expires_at": "2030-01-01T00:00:00Z", "ttl_s": 30.0, "fence": "1.1.1.0.x"}
    check(answer("POST", "/renew", 200, renewed))
    refused = [
        answer("POST", "/renew", 404, problem(404, "not_found")),  # a status not described
        answer("POST", "/renew", 409, problem(409, "no_such_code")),  # a code not in the enum
        answer("POST", "/renew", 409, problem(422, "lease_lost")),  # a status not its own
        answer("POST", "/renew", 200, {"expires_at": "x"}),  # ttl_s missing
        answer("POST", "/renew", 503, problem(503, "unavailable")),  # Retry-After missing
        answer("POST", "/renew", 409, problem(409, "lease_lost"), **{"retry-after": "1"}),
        answer("GET", "/no/such/path", 200, {}),
    ]
    for response in refused:
        with pytest.raises(AssertionError):
            check(response)


async def test_the_suites_clients_check_every_answer(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen: list[str] = []
    checked = openapi_check.Conformance._check_answer

    def noting(self: Any, response: httpx.Response, *args: Any) -> None:
        seen.append(f"{response.request.method} {response.request.url.path}")
        checked(self, response, *args)

    monkeypatch.setattr(openapi_check.Conformance, "_check_answer", noting)
    await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
    await client.post("/lease", json={"session": "s", "owner": "w", "max": 0})
    assert seen == ["POST /sessions/s/leads", "POST /lease"]
