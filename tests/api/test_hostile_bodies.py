"""Every route that takes a body refuses every hostile body with its 4xx problem, and nothing
changes: the front door (app/api/front_door.py, app/api/body.py) before any route runs.

The routes come from the app's own OpenAPI document, so a new route is covered
as it is added. A real ``leaseq serve`` answers; the database is read before
and after each refusal (the leads and the ledger).
"""

from __future__ import annotations

import json
import socket
import time
import uuid
from typing import Any

import psycopg
import pytest

from app.api.app import create_app
from app.config import Settings
from app.store.pool import libpq_url
from leaseq.limits import MAX_BODY_DEPTH
from tests.support.serving import Service

pytestmark = pytest.mark.service

DEEP = "[" * 1000 + "]" * 1000
HOSTILE: dict[str, tuple[bytes, str]] = {
    "a name twice": (b'{"a": 1, "a": 2}', "'a'"),
    "a name twice, nested": (b'{"x": {"y": [{"c": 1, "c": 2}]}}', "body.x.y.0.c"),
    "1,000 levels deep": (f'{{"result": {DEEP}}}'.encode(), str(MAX_BODY_DEPTH)),
    "just over the depth": (b'{"a": ' + b"[" * MAX_BODY_DEPTH + b"]" * MAX_BODY_DEPTH + b"}", ""),
    "a huge number": (b'{"a": 1e400}', "finite"),
    "NaN": (b'{"a": NaN}', "finite"),
    "Infinity": (b'{"a": -Infinity}', "finite"),
    "an integer of 5,000 digits": (b'{"a": ' + b"9" * 5000 + b"}", ""),
    "a lone surrogate": (b'{"a": "\\ud800"}', "surrogate"),
    "a lone surrogate as a name": (b'{"\\udc00": 1}', "surrogate"),
    "not UTF-8": (b'{"a": "\xff"}', "not valid JSON"),
    "an unknown field": (b'{"no_such_field": 1}', "no_such_field"),
    "an array": (b"[]", ""),
    "a string": (b'"x"', ""),
    "null": (b"null", ""),
    "not JSON": (b'{"a": ', ""),
}


def body_routes() -> list[tuple[str, str]]:
    """(method, path) of every operation of the app that takes a request body."""
    document = create_app(Settings(database_url="postgresql://unused")).openapi()
    return [
        (method.upper(), path)
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if "requestBody" in operation
    ]


def state(db_url: str) -> list[Any]:
    """Every lead's changing columns, the ledger's length, the settings (a pause
    included), the schedules and the tokens."""
    with psycopg.connect(libpq_url(db_url), autocommit=True) as conn:
        leads = conn.execute(
            "SELECT id, status, owner, lease_token, attempts, payload, result, checkpoint "
            "FROM leads ORDER BY id"
        ).fetchall()
        events = conn.execute("SELECT count(*) FROM lead_events").fetchone()
        settings = conn.execute(
            "SELECT session, paused_until, weight, max_leased FROM session_settings"
            " ORDER BY session"
        ).fetchall()
        schedules = conn.execute("SELECT count(*) FROM schedules").fetchone()
        tokens = conn.execute("SELECT count(*) FROM api_tokens").fetchone()
    return [leads, events, settings, schedules, tokens]


@pytest.fixture(scope="module")
def held(service: Service) -> dict[str, Any]:
    """A session with a lead leased (its lease) and one queued."""
    session = f"hb-{uuid.uuid4().hex[:8]}"
    with service.client() as client:
        pushed = client.post(
            f"/sessions/{session}/leads", json={"leads": [{"payload": {"n": 1}}] * 2}
        )
        assert pushed.status_code == 201, pushed.text
        leased = client.post("/lease", json={"session": session, "owner": "w", "ttl_s": 600})
        lease: dict[str, Any] = leased.json()["leases"][0]
    return {"session": session, "lease": lease}


@pytest.mark.parametrize("route", body_routes(), ids=" ".join)
def test_every_hostile_body_is_refused_and_changes_nothing(
    route: tuple[str, str], service: Service, db_url: str, held: dict[str, Any]
) -> None:
    method, template = route
    lead_id = held["lease"]["lead"]["id"]
    path = template.format(session=held["session"], lead_id=lead_id, name="hostile")
    before = state(db_url)
    with service.client() as client:
        for name, (raw, said) in HOSTILE.items():
            answer = client.request(
                method, path, content=raw, headers={"content-type": "application/json"}
            )
            assert answer.status_code == 422, (name, answer.text)
            problem = answer.json()
            assert answer.headers["content-type"] == "application/problem+json"
            assert problem["code"] == "validation_error", name
            assert said in problem["detail"], (name, problem["detail"])
    assert state(db_url) == before


def test_a_completion_with_two_statuses_fails_nothing(
    service: Service, db_url: str, held: dict[str, Any]
) -> None:
    lease = held["lease"]
    before = state(db_url)
    item = f'"lead_id": {lease["lead"]["id"]}, "token": "{lease["token"]}"'
    bodies = {
        "/complete": f'{{{item}, "status": "done", "status": "failed"}}',
        "/complete/batch": f'{{"items": [{{{item}, "result": {{"a": 1, "a": 2}}}}]}}',
        "/renew": f'{{{item}, "checkpoint": {{"at": 1, "at": 2}}}}',
        "/lease": f'{{"session": "{held["session"]}", "session": "other", "owner": "w"}}',
    }
    with service.client() as client:
        for path, text in bodies.items():
            answer = client.post(path, content=text, headers={"content-type": "application/json"})
            assert answer.status_code == 422, (path, answer.text)
            assert answer.json()["errors"][0]["type"] == "json_duplicate_member"
        deep = f'{{{item}, "result": {DEEP}}}'
        answer = client.post(
            "/complete", content=deep, headers={"content-type": "application/json"}
        )
        assert answer.status_code == 422, answer.text
    assert state(db_url) == before


def _cut_short(service: Service, path: str, body: bytes, *, close: bool) -> bytes:
    """Send a head promising more than ``body``, then hang up (half or whole); what came back."""
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{service.port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body) + 50}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", service.port), timeout=5) as sock:
        sock.sendall(head + body)
        if close:
            return b""
        sock.shutdown(socket.SHUT_WR)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
        return answer


@pytest.mark.parametrize("close", [False, True], ids=["half-closed", "closed"])
def test_a_body_cut_short_is_not_carried_out(
    close: bool, service: Service, db_url: str, held: dict[str, Any]
) -> None:
    lease = held["lease"]
    before = state(db_url)
    lease_body = json.dumps({"session": held["session"], "owner": "gone", "ttl_s": 600})
    done = json.dumps({"lead_id": lease["lead"]["id"], "token": lease["token"]})
    for path, body in (("/lease", lease_body), ("/complete", done)):
        answer = _cut_short(service, path, body.encode(), close=close)
        assert b" 200 " not in answer.split(b"\r\n", 1)[0], answer
    # Nothing to wait for: give the service a moment to have run what it would have run.
    deadline = time.monotonic() + 0.5
    while time.monotonic() < deadline:
        assert state(db_url) == before
        time.sleep(0.05)
    with service.client() as client:  # the service is well, and the lead still held
        assert client.get(f"/leads/{lease['lead']['id']}").json()["status"] == "leased"
