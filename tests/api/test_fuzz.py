"""Property-based fuzzing of every endpoint from /openapi.json (schemathesis).

A real ``leaseq serve`` process on a database of its own answers generated
requests, valid and invalid. Every answer must conform to the schema (status,
content type, body), no answer may be a 5xx, and every error must be a
problem+json with a ``code``. Runs are derandomized and small, so CI is stable
and quick.

Two adjustments, not exclusions: ``wait_s`` of ``POST /lease`` is capped at
0.2 s, since a long poll on an empty session would only spend the time budget
waiting (long polls are tested in test_long_poll); and a payload or result
holding the NUL character, which JSON Schema cannot rule out but PostgreSQL's
jsonb cannot store, must get 422 ``validation_error`` rather than be accepted.
A body over the size limit gets 413, which is a refusal like 422. A valid
``Idempotency-Key`` the generator drew is made unique: it draws few distinct
keys, and the same key with another body is refused by design (422,
tests/test_idempotency.py).
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis import GenerationMode
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from app.api.app import create_app
from app.config import Settings
from leaseq.client import IDEMPOTENCY_HEADER
from leaseq.limits import IDEMPOTENCY_KEY_PATTERN
from tests.conftest import _admin, with_database
from tests.serving import Service, Services

pytestmark = [pytest.mark.service, pytest.mark.slow]

MAX_EXAMPLES = 25
MAX_BODY_BYTES: int = Settings.model_fields["max_body_bytes"].default
MAX_WAIT_S = 0.2


@pytest.fixture(scope="module")
def fuzz_service(
    server_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    name = f"leaseq_fuzz_{uuid.uuid4().hex[:12]}"
    with _admin(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template_db}"')
    services = Services(Path(tmp_path_factory.mktemp("fuzz")))
    try:
        yield services.start(
            "--sweep-interval", "3600", database_url=with_database(server_url, name)
        )
    finally:
        services.close()
        with _admin(server_url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _openapi() -> dict[str, Any]:
    """The served document, built in-process: the app makes no connection until it starts."""
    app = create_app(Settings(database_url="postgresql://unused@127.0.0.1/unused"))
    return app.openapi()


OPENAPI = _openapi()
SCHEMA = schemathesis.openapi.from_dict(OPENAPI)
OPERATIONS = {op.label: op for op in (result.ok() for result in SCHEMA.get_all_operations())}
# Negative cases need something to break: operations with parameters or a body.
CASES = [(label, GenerationMode.POSITIVE) for label in sorted(OPERATIONS)] + [
    (label, GenerationMode.NEGATIVE)
    for label, op in sorted(OPERATIONS.items())
    if op.definition.raw.get("parameters") or op.definition.raw.get("requestBody")
]


def _holds_nul(body: Any) -> bool:
    try:
        return "\\u0000" in json.dumps(body)
    except (TypeError, ValueError):
        return False


def _capped(case: Any) -> None:
    body = case.body
    if case.path == "/lease" and isinstance(body, dict):
        wait = body.get("wait_s")
        if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > MAX_WAIT_S:
            body["wait_s"] = MAX_WAIT_S
    key = (case.headers or {}).get(IDEMPOTENCY_HEADER)
    if isinstance(key, str) and re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key):
        case.headers[IDEMPOTENCY_HEADER] = f"{key[:200]}-{uuid.uuid4()}"


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{lb} {m.value}" for lb, m in CASES])
def test_every_endpoint(fuzz_service: Service, label: str, mode: GenerationMode) -> None:
    operation = OPERATIONS[label]

    @given(case=operation.as_strategy(generation_mode=mode))
    @settings(
        max_examples=MAX_EXAMPLES,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    def check(case: Any) -> None:
        _capped(case)
        response = case.call(base_url=fuzz_service.url, timeout=15)
        if _holds_nul(case.body):
            assert response.status_code == 422, (response.status_code, response.text)
            case.validate_response(response, excluded_checks=[positive_data_acceptance])
        elif response.status_code == 413:  # a refusal too, one schemathesis does not count
            assert len(json.dumps(case.body, default=repr)) > MAX_BODY_BYTES / 2, response.text
            case.validate_response(response, excluded_checks=[negative_data_rejection])
        else:
            case.validate_response(response)
        assert response.status_code < 500, (response.status_code, response.text)
        if response.status_code >= 400:
            [content_type] = response.headers["content-type"]
            assert content_type.startswith("application/problem+json"), content_type
            problem = response.json()
            assert isinstance(problem.get("code"), str) and problem["code"], problem
            assert problem["status"] == response.status_code, problem

    check()
