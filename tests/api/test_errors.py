"""Every class of bad input gets its 4xx problem+json with SPEC's code, and changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api import shapes
from tests.api.conftest import Serve

LEASE = {"session": "s", "owner": "w1"}
ITEM = {"lead_id": 1, "token": "t"}
PUSH = "/sessions/s/leads"
ONE = {"payload": {}}
GARBAGE = "a leased lead with a garbage token"  # stands for that body; filled in per test
V = (422, "validation_error")

# name: (method, path, JSON body / raw bytes / None, (status, code))
BAD_INPUT: dict[str, tuple[str, str, Any, tuple[int, str]]] = {
    # malformed JSON and wrong content
    "malformed json": ("POST", "/lease", b'{"session": "s", ', V),
    "json with a trailing comma": ("POST", "/lease", b'{"session": "s",}', V),
    "not utf-8": ("POST", "/lease", b'{"session": "\xff\xfe"}', V),
    "empty body": ("POST", "/lease", b"", V),
    "a list body": ("POST", "/lease", [LEASE], V),
    "NaN": ("POST", "/lease", b'{"session": "s", "owner": "w", "ttl_s": NaN}', V),
    "unknown field": ("POST", "/lease", LEASE | {"tll_s": 5}, V),
    # wrong types
    "max as a string": ("POST", "/lease", LEASE | {"max": "2"}, V),
    "max as a float": ("POST", "/lease", LEASE | {"max": 1.5}, V),
    "max as a bool": ("POST", "/lease", LEASE | {"max": True}, V),
    "owner as a number": ("POST", "/lease", {"session": "s", "owner": 7}, V),
    "owner missing": ("POST", "/lease", {"session": "s"}, V),
    "lead_id as a string": ("POST", "/renew", {"lead_id": "1", "token": "t"}, V),
    "token null": ("POST", "/complete", {"lead_id": 1, "token": None}, V),
    "priority as a string": ("POST", PUSH, {"leads": [ONE | {"priority": "high"}]}, V),
    "items not a list": ("POST", "/renew/batch", {"items": ITEM}, V),
    # out-of-range numbers
    "max 0": ("POST", "/lease", LEASE | {"max": 0}, V),
    "max 101": ("POST", "/lease", LEASE | {"max": 101}, V),
    "ttl_s 0": ("POST", "/lease", LEASE | {"ttl_s": 0}, V),
    "ttl_s 3601": ("POST", "/lease", LEASE | {"ttl_s": 3601}, V),
    "wait_s 31": ("POST", "/lease", LEASE | {"wait_s": 31}, V),
    "wait_s negative": ("POST", "/lease", LEASE | {"wait_s": -1}, V),
    "renew ttl_s huge": ("POST", "/renew", ITEM | {"ttl_s": 1e9}, V),
    "lead_id 0": ("POST", "/renew", ITEM | {"lead_id": 0}, V),
    "lead_id past bigint": ("POST", "/renew", ITEM | {"lead_id": 2**63}, V),
    "release delay negative": ("POST", "/release", ITEM | {"delay_s": -1}, V),
    "priority past int32": ("POST", PUSH, {"leads": [ONE | {"priority": 2**31}]}, V),
    "max_attempts 0": ("POST", PUSH, {"leads": [ONE | {"max_attempts": 0}]}, V),
    "depth negative": ("POST", PUSH, {"leads": [ONE | {"depth": -1}]}, V),
    "lead id path 0": ("GET", "/leads/0", None, V),
    "lead id path not a number": ("GET", "/leads/abc", None, V),
    "cancel lead id path not a number": ("POST", "/leads/x/cancel", None, V),
    # bad session names
    "session with a space": ("POST", "/sessions/a b/leads", {"leads": [ONE]}, V),
    "session starting with a dash": ("GET", "/sessions/-a/stats", None, V),
    "session of 129 characters": ("GET", f"/sessions/{'s' * 129}/report", None, V),
    "lease session with a slash": ("POST", "/lease", {"session": "a/b", "owner": "w"}, V),
    "sweep session empty": ("POST", "/sweep", {"session": ""}, V),
    "sweep neither session nor all": ("POST", "/sweep", {}, V),
    "sweep both session and all": ("POST", "/sweep", {"session": "s", "all": True}, V),
    "sweep all false": ("POST", "/sweep", {"all": False}, V),
    # unknown status
    "unknown status": ("POST", "/complete", ITEM | {"status": "finished"}, V),
    "status queued": ("POST", "/complete", ITEM | {"status": "queued"}, V),
    "unknown status in a batch": (
        "POST",
        "/complete/batch",
        {"items": [ITEM | {"status": "DONE"}]},
        V,
    ),
    # non-object payload
    "payload a list": ("POST", PUSH, {"leads": [{"payload": [1, 2]}]}, V),
    "payload a string": ("POST", PUSH, {"leads": [{"payload": "x"}]}, V),
    "payload missing": ("POST", PUSH, {"leads": [{"priority": 1}]}, V),
    "payload with NUL": ("POST", PUSH, {"leads": [{"payload": {"a": "\x00"}}]}, V),
    "owner with NUL": ("POST", "/lease", {"session": "s", "owner": "w\x00"}, V),
    # batch sizes
    "too many leads": ("POST", PUSH, {"leads": [ONE] * 1001}, V),
    "no leads": ("POST", PUSH, {"leads": []}, V),
    "too many renew items": ("POST", "/renew/batch", {"items": [ITEM] * 101}, V),
    "no complete items": ("POST", "/complete/batch", {"items": []}, V),
    # unknown things
    "unknown lead": ("GET", "/leads/424242", None, (404, "not_found")),
    "cancel an unknown lead": ("POST", "/leads/424242/cancel", None, (404, "not_found")),
    "retry an unknown lead": ("POST", "/leads/424242/retry", None, (404, "not_found")),
    "unknown route": ("GET", "/nothing/here", None, (404, "not_found")),
    "wrong method": ("GET", "/lease", None, (405, "method_not_allowed")),
    "wrong method on a lead": ("DELETE", "/leads/1", None, (405, "method_not_allowed")),
    # garbage tokens
    "renew with a garbage token": ("POST", "/renew", GARBAGE, (409, "lease_lost")),
    "complete with a garbage token": ("POST", "/complete", GARBAGE, (409, "lease_lost")),
    "release with a garbage token": ("POST", "/release", GARBAGE, (409, "lease_lost")),
    "renew an unknown lead": ("POST", "/renew", ITEM | {"lead_id": 424242}, (409, "lease_lost")),
}


@pytest.fixture
async def seeded(client: httpx.AsyncClient) -> AsyncIterator[tuple[httpx.AsyncClient, int]]:
    """A session with one leased and one queued lead."""
    pushed = await client.post(
        "/sessions/s/leads", json={"leads": [{"payload": {"n": 1}}, {"payload": {"n": 2}}]}
    )
    lease = await client.post("/lease", json={"session": "s", "owner": "w1"})
    yield client, lease.json()["leases"][0]["lead"]["id"]
    assert pushed.status_code == 201


async def send(client: httpx.AsyncClient, method: str, path: str, body: Any) -> httpx.Response:
    if isinstance(body, bytes):
        headers = {"content-type": "application/json"}
        return await client.request(method, path, content=body, headers=headers)
    if body is None:
        return await client.request(method, path)
    return await client.request(method, path, json=body)


async def test_bad_input_is_refused_and_changes_nothing(
    seeded: tuple[httpx.AsyncClient, int], subtests: pytest.Subtests
) -> None:
    client, leased_id = seeded
    garbage = {"lead_id": leased_id, "token": "garbage-" + "x" * 30}
    before = (await client.get("/stats")).json()
    for name, (method, path, body, (status, code)) in BAD_INPUT.items():
        with subtests.test(name):
            response = await send(client, method, path, garbage if body == GARBAGE else body)

            problem = shapes.problem(response, status, code)
            assert problem.get("detail"), problem
            if status == 405:
                assert "allow" in response.headers
            assert (await client.get("/stats")).json() == before
            lead = (await client.get(f"/leads/{leased_id}")).json()
            assert (lead["status"], lead["attempts"]) == ("leased", 1)


async def test_validation_problems_name_the_field(client: httpx.AsyncClient) -> None:
    response = await client.post("/lease", json=LEASE | {"max": 500})
    body = shapes.problem(response, 422, "validation_error")
    assert "max" in body["detail"]
    assert body["errors"][0]["loc"] == ["body", "max"]

    nul = await client.post("/sessions/s/leads", json={"leads": [{"payload": {"a": "\x00"}}]})
    body = shapes.problem(nul, 422, "validation_error")
    assert "leads[0].payload" in body["detail"]


async def test_a_body_without_a_json_content_type_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/lease", content=b'{"session": "s", "owner": "w"}', headers={"content-type": "text/plain"}
    )
    shapes.problem(response, 422, "validation_error")


# -- oversized bodies ----------------------------------------------------------------


def big_push(size: int) -> bytes:
    filler = "x" * size
    return b'{"leads": [{"payload": {"f": "' + filler.encode() + b'"}}]}'


async def test_an_oversized_body_is_refused_by_its_length(seeded: tuple[Any, int]) -> None:
    client, _ = seeded
    before = (await client.get("/stats")).json()
    response = await client.post(
        "/sessions/s/leads",
        content=big_push(1024 * 1024),
        headers={"content-type": "application/json"},
    )
    shapes.problem(response, 413, "payload_too_large")
    assert (await client.get("/stats")).json() == before


async def test_an_oversized_streamed_body_is_refused_as_it_arrives(
    seeded: tuple[Any, int],
) -> None:
    client, _ = seeded
    before = (await client.get("/stats")).json()
    sent = 0

    async def chunks() -> AsyncIterator[bytes]:
        nonlocal sent
        body = big_push(3 * 1024 * 1024)
        for start in range(0, len(body), 64 * 1024):
            sent += 1
            yield body[start : start + 64 * 1024]

    response = await client.post(
        "/sessions/s/leads", content=chunks(), headers={"content-type": "application/json"}
    )
    shapes.problem(response, 413, "payload_too_large")
    assert (await client.get("/stats")).json() == before


async def test_the_body_limit_follows_the_setting(serve: Serve) -> None:
    async with serve(max_body_bytes=2048) as client:
        small = await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
        assert small.status_code == 201
        response = await client.post(
            "/sessions/s/leads",
            content=big_push(4096),
            headers={"content-type": "application/json"},
        )
        shapes.problem(response, 413, "payload_too_large")


async def test_a_body_just_under_the_limit_is_read(serve: Serve) -> None:
    async with serve(max_body_bytes=4096) as client:
        body = big_push(4000)
        assert len(body) <= 4096
        response = await client.post(
            "/sessions/s/leads", content=body, headers={"content-type": "application/json"}
        )
        assert response.status_code == 201, response.text


# -- server errors ---------------------------------------------------------------------


async def test_an_unexpected_error_is_a_500_problem_without_detail(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.api.conftest import runtime_of

    async def broken() -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(runtime_of(client).queue, "stats_all", broken)
    response = await client.get("/stats")
    body = shapes.problem(response, 500, "internal_error")
    assert "detail" not in body
    assert "secret" not in response.text and "Traceback" not in response.text
