"""Property-based fuzzing of every endpoint from /openapi.json (schemathesis).

A real ``leaseq serve`` process on a database of its own, with an API token as
the document's bearer scheme says, answers generated requests, valid and invalid;
schemathesis's checks of auth send some without the token or with a wrong one, which
must answer 401. Every answer must conform to the schema (status,
content type, body), no answer may be a 5xx, and every error must be a
problem+json with a ``code``. Runs are derandomized and small, so CI is stable
and quick. A stateful run follows the document's links (``app.api.links``) from a
push to the lease, renew, complete and release of real leads.

Two adjustments, not exclusions: ``wait_s`` of ``POST /lease`` (and of the
``next`` of a completion) is capped at 0.2 s, since a long poll on an empty
session would only spend the time budget waiting (long polls are tested in
test_long_poll); and a payload or result
holding the NUL character, which JSON Schema cannot rule out but PostgreSQL's
jsonb cannot store, must get 422 ``validation_error`` rather than be accepted.
A body over the size limit gets 413, which is a refusal like 422. A schedule's cron
expression or time zone, which the document can only call a string, may be refused 422
(``_semantic_refusal``), as may a list's cursor the service never made, a lead's
traceparent of the document's pattern (version ff, ids of zeros) and an ``after`` naming
leads the session does not have; the ``wait_s`` of ``GET /leads/{lead_id}`` is capped as a
lease's. A valid
``Idempotency-Key`` the generator drew is made unique: it draws few distinct
keys, and the same key with another body is refused by design (422,
tests/integration/test_idempotency.py); so is a valid token name, since a live token's name
is refused by design too.

Sessions cannot hurt each other: before the endpoints are fuzzed, generated settings
(``PUT /sessions/{session}/settings``, valid and not) and settings rows written
straight into the same database (as an older version or a hand could: denormals, NaN,
infinities) each get work, and leases across sessions (named, and any session) follow
each one; every such lease answers 200. The endpoints' fuzzing then meets those rows too.
"""

from __future__ import annotations

import json
import re
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.stateful import initialize, run_state_machine_as_test
from schemathesis import GenerationMode
from schemathesis.config import SchemathesisConfig
from schemathesis.generation.stateful.state_machine import StepInput
from schemathesis.specs.openapi.checks import negative_data_rejection, positive_data_acceptance

from app.api.app import create_app
from app.api.links import LINKS
from app.config import Settings
from app.store.pool import libpq_url
from leaseq._wire import IDEMPOTENCY_HEADER
from leaseq.limits import IDEMPOTENCY_KEY_PATTERN, SESSION_PATTERN, TOKEN_NAME_PATTERN
from tests.conftest import _admin, with_database
from tests.integration.test_settings_ranges import RAW
from tests.support.databases import copy_database, drop_database
from tests.support.serving import Service, Services

pytestmark = [pytest.mark.service, pytest.mark.slow]

MAX_EXAMPLES = 25
STATEFUL_EXAMPLES = 40
# Without the explain phase: it traces every line of data generation (sys.settrace on
# Python < 3.12), which made one generated body take minutes on a loaded machine.
PHASES = [phase for phase in Phase if phase is not Phase.explain]
# Each generated run: small and derandomized, so CI is stable and quick.
EXAMPLES = settings(
    phases=PHASES,
    max_examples=MAX_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)
MAX_BODY_BYTES: int = Settings.model_fields["max_body_bytes"].default
MAX_WAIT_S = 0.2


@pytest.fixture(scope="module")
def fuzz_database(server_url: str, template_db: str) -> Iterator[str]:
    """The URL of a migrated database of this module's own."""
    name = f"leaseq_fuzz_{uuid.uuid4().hex[:12]}"
    with _admin(server_url) as conn:
        copy_database(conn, name, template_db)
    try:
        yield with_database(server_url, name)
    finally:
        with _admin(server_url) as conn:
            drop_database(conn, name)


@pytest.fixture(scope="module")
def fuzz_service(fuzz_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    services = Services(Path(tmp_path_factory.mktemp("fuzz")))
    try:
        yield services.start(
            "--sweep-interval", "3600", "--token", TOKEN, database_url=fuzz_database
        )
    finally:
        services.close()


def _openapi() -> dict[str, Any]:
    """The served document, built in-process: the app makes no connection until it starts."""
    app = create_app(Settings(database_url="postgresql://unused@127.0.0.1/unused"))
    return app.openapi()


OPENAPI = _openapi()
# The service has a token, as the document's bearer scheme says: every generated request
# sends it, and the checks of auth send requests without it, or with a wrong one (401).
TOKEN = "fuzz-token"
BEARER = {"Authorization": f"Bearer {TOKEN}"}
AUTH = {"auth": {"openapi": {"bearerAuth": {"bearer": TOKEN}}}}
SCHEMA = schemathesis.openapi.from_dict(OPENAPI, config=SchemathesisConfig.from_dict(AUTH))
OPERATIONS = {op.label: op for op in (result.ok() for result in SCHEMA.get_all_operations())}
# The stateful runs follow the document's own links only (no links inferred from names).
NO_INFERENCE = {"phases": {"stateful": {"inference": {"algorithms": []}}}}
# ... over the operations of a lead's life, the links' ends: operations of their own (tokens,
# schedules) are fuzzed above and would only thin out the steps that follow a lead.
LIFE = {path for path, _, _ in LINKS} | {
    target for links in LINKS.values() for target, _, _ in links.values()
}
LINKED = schemathesis.openapi.from_dict(
    {**OPENAPI, "paths": {path: ops for path, ops in OPENAPI["paths"].items() if path in LIFE}},
    config=SchemathesisConfig.from_dict({**NO_INFERENCE, **AUTH}),
)
# Negative cases need something to break: operations with parameters or a body.
CASES = [(label, GenerationMode.POSITIVE) for label in sorted(OPERATIONS)] + [
    (label, GenerationMode.NEGATIVE)
    for label, op in sorted(OPERATIONS.items())
    if op.definition.raw.get("parameters") or op.definition.raw.get("requestBody")
]


def _semantic_refusal(case: Any, response: Any) -> bool:
    """A schedule's cron expression or time zone refused (422): the document can only
    say "a string" of them, so a generated one is valid to the schema and still no cron
    expression or IANA zone. So is a lead's traceparent of the document's pattern whose
    version is ff or whose ids are all zeros (docs/contract.md#trace-context), and a list's
    cursor that this service never made (the document can only say "a string" of it)."""
    if response.status_code != 422:
        return False
    errors = response.json().get("errors", [])
    if case.path == "/sessions/{session}/leads" and case.method.upper() == "GET":
        return bool(errors) and all(e["loc"] == ["cursor"] for e in errors)
    if case.path == "/sessions/{session}/leads":
        return bool(errors) and all(
            (len(e["loc"]) == 3 and e["loc"][::2] == ["leads", "traceparent"])
            or (len(e["loc"]) == 4 and e["loc"][::2] == ["leads", "after"])
            for e in errors
        )
    if case.path != "/schedules/{name}":
        return False
    return {tuple(e["loc"])[:1] for e in errors} <= {
        ("cron",),
        ("timezone",),
    }


def _holds_nul(body: Any) -> bool:
    try:
        return "\\u0000" in json.dumps(body)
    except (TypeError, ValueError):
        return False


def _capped(case: Any) -> None:
    body = case.body
    if case.path == "/lease":
        _cap_wait(body)
    elif case.path in ("/complete", "/complete/batch") and isinstance(body, dict):
        _cap_wait(body.get("next"))  # the body of /lease, waiting as long
    elif case.path == "/leads/{lead_id}" and isinstance(case.query, dict):
        _cap_wait(case.query)  # waiting for an outcome: as long as a lease may wait
    name = body.get("name") if case.path == "/tokens" and isinstance(body, dict) else None
    if isinstance(name, str) and re.fullmatch(TOKEN_NAME_PATTERN, name):
        body["name"] = f"{name[:100]}-{uuid.uuid4().hex[:12]}"  # a live one's name is refused
    key = (case.headers or {}).get(IDEMPOTENCY_HEADER)
    if isinstance(key, str) and re.fullmatch(IDEMPOTENCY_KEY_PATTERN, key):
        case.headers[IDEMPOTENCY_HEADER] = f"{key[:200]}-{uuid.uuid4()}"


def _cap_wait(lease: Any) -> None:
    """A lease body's ``wait_s`` down to MAX_WAIT_S."""
    if not isinstance(lease, dict):
        return
    wait = lease.get("wait_s")
    if isinstance(wait, int | float) and not isinstance(wait, bool) and wait > MAX_WAIT_S:
        lease["wait_s"] = MAX_WAIT_S


SETTINGS_PUT = OPERATIONS["PUT /sessions/{session}/settings"]
STEADY = "fuzz-steady"  # a session without limits, with work all along


def _leases_across_sessions(http: httpx.Client, session: str | None, got: Counter[str]) -> None:
    """Work in ``session`` (a valid name), then leases across it and another, and across
    any session: each answers 200, whatever that session's settings hold; ``got`` counts
    the sessions leased from."""
    named = [STEADY]
    if session is not None and re.fullmatch(SESSION_PATTERN, session):
        pushed = http.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}]})
        assert pushed.status_code == 201, pushed.text
        named.append(session)
    pushed = http.post(f"/sessions/{STEADY}/leads", json={"leads": [{"payload": {}}] * 2})
    assert pushed.status_code == 201, pushed.text
    for body in ({"sessions": named}, {}):
        answer = http.post("/lease", json={"owner": "fuzz", **body})
        assert answer.status_code == 200, (body, answer.status_code, answer.text)
        got.update(lease["lead"]["session"] for lease in answer.json()["leases"])


@pytest.mark.parametrize("mode", list(GenerationMode), ids=lambda mode: mode.value)
def test_settings_of_its_own_then_leases_across_sessions(
    fuzz_service: Service, mode: GenerationMode
) -> None:
    """Generated settings, stored or refused (each answer checked as every endpoint's),
    then leases across sessions in the same database as every other request."""
    got: Counter[str] = Counter()

    @given(case=SETTINGS_PUT.as_strategy(generation_mode=mode))
    @EXAMPLES
    def check(case: Any) -> None:
        _answers_well(case, case.call(base_url=fuzz_service.url, timeout=15))
        with httpx.Client(base_url=fuzz_service.url, headers=BEARER, timeout=15) as http:
            _leases_across_sessions(http, (case.path_parameters or {}).get("session"), got)

    check()
    assert got[STEADY] and set(got) - {STEADY}, got  # the generated sessions were leased too


def test_settings_rows_written_in_sql_then_leases_across_sessions(
    fuzz_service: Service, fuzz_database: str
) -> None:
    """Settings rows beyond the API's ranges, written straight into the database (as by an
    older version or a hand), then leases across sessions: never a 5xx."""
    got: Counter[str] = Counter()

    @given(raw=RAW)
    @EXAMPLES
    def check(raw: dict[str, Any]) -> None:
        session = f"fuzz-raw-{uuid.uuid4().hex[:12]}"
        with psycopg.connect(libpq_url(fuzz_database), autocommit=True) as conn:
            conn.execute(
                "INSERT INTO session_settings"
                " (session, weight, max_leased, rate_per_s, burst, tokens, refilled_at)"
                " VALUES (%(session)s, %(weight)s, %(max_leased)s, %(rate_per_s)s, %(burst)s,"
                " %(tokens)s, %(refilled_at)s::timestamptz)",
                {**raw, "session": session},
            )
        with httpx.Client(base_url=fuzz_service.url, headers=BEARER, timeout=15) as http:
            _leases_across_sessions(http, session, got)
            for path in (f"/sessions/{session}/settings", "/stats", "/dashboard/data"):
                answer = http.get(path)
                assert answer.status_code == 200, (path, answer.text)

    check()
    assert any(name.startswith("fuzz-raw-") for name in got), got  # the rows were leased too


@pytest.mark.parametrize(("label", "mode"), CASES, ids=[f"{lb} {m.value}" for lb, m in CASES])
def test_every_endpoint(fuzz_service: Service, label: str, mode: GenerationMode) -> None:
    operation = OPERATIONS[label]

    @given(case=operation.as_strategy(generation_mode=mode))
    @EXAMPLES
    def check(case: Any) -> None:
        _capped(case)
        _answers_well(case, case.call(base_url=fuzz_service.url, timeout=15))

    check()


def _answers_well(case: Any, response: Any) -> None:
    """The answer conforms to the document, is never a 5xx, and an error is a problem."""
    if response.status_code == 413:  # the size is checked before the body is parsed
        assert len(json.dumps(case.body, default=repr)) > MAX_BODY_BYTES / 2, response.text
        case.validate_response(
            response, excluded_checks=[negative_data_rejection, positive_data_acceptance]
        )
    elif _semantic_refusal(case, response):
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
    elif _holds_nul(case.body):
        # 401: a negative case sent without the token is refused before its body is read.
        assert response.status_code in (401, 422), (response.status_code, response.text)
        case.validate_response(response, excluded_checks=[positive_data_acceptance])
    else:
        case.validate_response(response)
    assert response.status_code < 500, (response.status_code, response.text)
    if response.status_code >= 400:
        [content_type] = response.headers["content-type"]
        assert content_type.startswith("application/problem+json"), content_type
        problem = response.json()
        assert isinstance(problem.get("code"), str) and problem["code"], problem
        assert problem["status"] == response.status_code, problem


def test_lead_lives_that_follow_the_links(fuzz_service: Service, fuzz_database: str) -> None:
    """Stateful runs: schemathesis follows the document's links (push → lease → renew →
    complete, release, retry …) with the real ids and tokens of earlier answers. Each answer
    passes the checks above, and after each run the ledger shows every lead completed at most
    once and no two leases of a lead overlapping.

    Each run starts from empty tables (ids from 1 again): a run replayed by hypothesis then
    meets the state it met the first time, as its generation requires.
    """
    called: Counter[str] = Counter()
    machine = LINKED.as_state_machine()
    push = LINKED["/sessions/{session}/leads"]["POST"]

    class Workflow(machine):  # type: ignore[misc,valid-type]
        def setup(self) -> None:
            with psycopg.connect(libpq_url(fuzz_database), autocommit=True) as conn:
                conn.execute(
                    "TRUNCATE leads, lead_events, idempotency_keys, session_settings"
                    " RESTART IDENTITY"
                )

        @initialize(target=machine.bundles["POST /sessions/{session}/leads -> 201"])
        def push_leads(self) -> Any:
            """Every run starts with leads to lease: the links take it from there."""
            leads = [{"payload": {"n": n}, "max_attempts": 2} for n in range(3)]
            case = push.Case(
                path_parameters={"session": "linked"},
                headers=dict(BEARER),
                body={"leads": leads},
                media_type="application/json",
            )
            start = StepInput.initial(case)
            self.recorder.record_case(case=case)  # as the machine's own rules record theirs
            self.control.record_step(start, self.recorder)
            return self.step(start)

        def before_call(self, case: Any) -> None:
            _capped(case)

        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"base_url": fuzz_service.url, "timeout": 15}

        def validate_response(self, response: Any, case: Any, **kwargs: Any) -> None:
            called[f"{case.method} {case.path} {response.status_code}"] += 1
            _answers_well(case, response)

        def teardown(self) -> None:
            with httpx.Client(base_url=fuzz_service.url, headers=BEARER, timeout=15) as http:
                for name in http.get("/stats").json()["sessions"]:
                    audit = http.get(f"/sessions/{name}/report").json()
                    assert audit["double_completions"] == 0, (name, audit)
                    assert audit["overlapping_leases"] == 0, (name, audit)
            super().teardown()

    run_state_machine_as_test(
        Workflow,
        settings=settings(
            max_examples=STATEFUL_EXAMPLES,
            phases=PHASES,
            stateful_step_count=12,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )
    # The links were followed to the end of a lead's life, not only generated at random.
    assert called["POST /lease 200"] and called["POST /renew 200"], called
    assert called["POST /complete 200"] and called["POST /release 200"], called
