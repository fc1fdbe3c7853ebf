"""Every class of bad input gets its 4xx problem+json with its code (docs/contract.md#error-codes),
and changes nothing."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api import shapes
from tests.support.in_process import Serve

LEASE = {"session": "s", "owner": "w1"}
ITEM = {"lead_id": 1, "token": "t"}
PUSH = "/sessions/s/leads"
SETTINGS = "/sessions/s/settings"
ONE = {"payload": {}}
GARBAGE = "a leased lead with a garbage token"  # stands for that body; filled in per test
V = (422, "validation_error")
U = (415, "unsupported_media_type")
JSON = {"content-type": "application/json"}


def nested(depth: int) -> dict[str, Any]:
    """An object nesting ``depth`` levels of objects and arrays (itself the first)."""
    value: Any = 1
    for level in range(depth - 1):
        value = [value] if level % 2 else {"a": value}
    return {"a": value}


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
    # leases across sessions
    "lease both session and sessions": ("POST", "/lease", LEASE | {"sessions": ["s"]}, V),
    "lease both keys, one null": ("POST", "/lease", LEASE | {"sessions": None}, V),
    "lease sessions empty": ("POST", "/lease", {"sessions": [], "owner": "w"}, V),
    "lease sessions not a list": ("POST", "/lease", {"sessions": "s", "owner": "w"}, V),
    "lease sessions with a bad name": (
        "POST",
        "/lease",
        {"sessions": ["s", "a b"], "owner": "w"},
        V,
    ),
    "lease sessions over 1000": (
        "POST",
        "/lease",
        {"sessions": [f"s{i}" for i in range(1001)], "owner": "w"},
        V,
    ),
    "lease any session without an owner": ("POST", "/lease", {"max": 1}, V),
    # session settings
    "settings weight 0": ("PUT", SETTINGS, {"weight": 0}, V),
    "settings weight negative": ("PUT", SETTINGS, {"weight": -1}, V),
    "settings weight a string": ("PUT", SETTINGS, {"weight": "3"}, V),
    "settings weight huge": ("PUT", SETTINGS, {"weight": 1e7}, V),
    "settings weight NaN": ("PUT", SETTINGS, b'{"weight": NaN}', V),
    "settings max_leased negative": ("PUT", SETTINGS, {"max_leased": -1}, V),
    "settings max_leased a fraction": ("PUT", SETTINGS, {"max_leased": 1.5}, V),
    "settings max_leased past int32": ("PUT", SETTINGS, {"max_leased": 2**31}, V),
    "settings rate 0": ("PUT", SETTINGS, {"rate_per_s": 0}, V),
    "settings rate a string": ("PUT", SETTINGS, {"rate_per_s": "5/s"}, V),
    "settings burst 0": ("PUT", SETTINGS, {"rate_per_s": 1, "burst": 0}, V),
    "settings burst without a rate": ("PUT", SETTINGS, {"burst": 5}, V),
    "settings unknown field": ("PUT", SETTINGS, {"weight": 2, "cap": 3}, V),
    "settings not an object": ("PUT", SETTINGS, [1], V),
    "settings of a bad session": ("PUT", "/sessions/a b/settings", {"weight": 2}, V),
    "settings read of a bad session": ("GET", "/sessions/-a/settings", None, V),
    "settings as text": ("PUT", SETTINGS, ("text/plain", b'{"weight": 2}'), U),
    # checkpoints: the payload's limits
    "checkpoint nested 65 deep": ("POST", "/renew", ITEM | {"checkpoint": nested(65)}, V),
    "checkpoint with NUL": ("POST", "/renew", ITEM | {"checkpoint": {"a": "\x00"}}, V),
    "checkpoint over the payload limit": (
        "POST",
        "/renew",
        ITEM | {"checkpoint": {"a": "x" * 300_000}},
        V,
    ),
    "lone surrogate in a batch checkpoint": (
        "POST",
        "/renew/batch",
        {"items": [ITEM, ITEM | {"lead_id": 2, "checkpoint": ["\ud800"]}]},
        V,
    ),
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
    # what jsonb or the answer could not hold: refused before anything is written
    "payload nested 300 deep": ("POST", PUSH, {"leads": [{"payload": nested(300)}]}, V),
    "payload nested 65 deep": ("POST", PUSH, {"leads": [{"payload": nested(65)}]}, V),
    "lone surrogate in a payload": ("POST", PUSH, {"leads": [{"payload": {"a": "\ud800"}}]}, V),
    "lone surrogate in a key": ("POST", PUSH, {"leads": [{"payload": {"\udc00": 1}}]}, V),
    "lone surrogate in a dedupe key": ("POST", PUSH, {"leads": [ONE | {"key": "\ud800"}]}, V),
    "lone surrogate in an owner": ("POST", "/lease", {"session": "s", "owner": "\ud800"}, V),
    "result nested 300 deep": ("POST", "/complete", ITEM | {"result": nested(300)}, V),
    "lone surrogate in a result": ("POST", "/complete", ITEM | {"result": ["\udfff"]}, V),
    "NUL in a result": ("POST", "/complete", ITEM | {"result": {"a": "\x00"}}, V),
    "lone surrogate in an error": ("POST", "/complete", ITEM | {"error": "\ud800"}, V),
    "lone surrogate in a batch result": (
        "POST",
        "/complete/batch",
        {"items": [ITEM | {"result": "\ud800"}]},
        V,
    ),
    "lone surrogate in a release error": ("POST", "/release", ITEM | {"error": "\ud800"}, V),
    # not JSON at all
    "a text/plain body": ("POST", "/lease", ("text/plain", b'{"session": "s"}'), U),
    "a form body": ("POST", PUSH, ("application/x-www-form-urlencoded", b"leads=1"), U),
    "a body without a content type": ("POST", "/complete", (None, b'{"lead_id": 1}'), U),
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
    if isinstance(body, tuple):  # (content type or None, raw bytes)
        content_type, raw = body
        headers = {} if content_type is None else {"content-type": content_type}
        return await client.request(method, path, content=raw, headers=headers)
    if isinstance(body, bytes):
        headers = {"content-type": "application/json"}
        return await client.request(method, path, content=body, headers=headers)
    if body is None:
        return await client.request(method, path)
    # Escaped as ASCII, so a lone surrogate travels as the JSON text \ud800 does.
    raw = json.dumps(body).encode()
    return await client.request(method, path, content=raw, headers=JSON)


async def test_bad_input_is_refused_and_changes_nothing(
    seeded: tuple[httpx.AsyncClient, int], subtests: pytest.Subtests
) -> None:
    client, leased_id = seeded
    garbage = {"lead_id": leased_id, "token": "garbage-" + "x" * 30}
    settings = {"weight": 2.0, "max_leased": 5, "rate_per_s": 100.0, "burst": 10}
    assert (await client.put(SETTINGS, json=settings)).status_code == 200
    before = await state(client)
    for name, (method, path, body, (status, code)) in BAD_INPUT.items():
        with subtests.test(name):
            response = await send(client, method, path, garbage if body == GARBAGE else body)

            problem = shapes.problem(response, status, code)
            assert problem.get("detail"), problem
            if status == 405:
                assert "allow" in response.headers
            assert await state(client) == before
            lead = (await client.get(f"/leads/{leased_id}")).json()
            assert (lead["status"], lead["attempts"], lead["checkpoint"]) == ("leased", 1, None)


async def state(client: httpx.AsyncClient) -> dict[str, Any]:
    """What bad input must not change: the counts of every session (not the ages, which grow
    by themselves) and the settings of session s."""
    stats = (await client.get("/stats")).json()
    counts = {
        name: {k: v for k, v in c.items() if k != shapes.AGE}
        for name, c in [*stats["sessions"].items(), ("total", stats["total"])]
    }
    return {"counts": counts, "settings": (await client.get(SETTINGS)).json()}


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
        "/sessions/s/leads",
        content=b'{"leads": [{"payload": {}}]}',
        headers={"content-type": "text/plain"},
    )
    problem = shapes.problem(response, 415, "unsupported_media_type")
    assert "application/json" in problem["detail"]
    assert (await client.get("/sessions/s/stats")).json()["queued"] == 0
    with_charset = {"content-type": "Application/JSON; charset=utf-8"}
    pushed = await client.post(
        "/sessions/s/leads", content=b'{"leads": [{"payload": {}}]}', headers=with_charset
    )
    assert pushed.status_code == 201


async def test_bodiless_cancel_and_retry_need_no_content_type(client: httpx.AsyncClient) -> None:
    [lead_id] = (await client.post("/sessions/s/leads", json={"leads": [ONE]})).json()["ids"]
    cancelled = await client.post(f"/leads/{lead_id}/cancel")
    assert cancelled.status_code == 200 and cancelled.json()["status"] == "failed"
    retried = await client.post(f"/leads/{lead_id}/retry")
    assert retried.status_code == 200 and retried.json()["status"] == "queued"


# -- oversized bodies ----------------------------------------------------------------


def big_push(size: int) -> bytes:
    filler = "x" * size
    return b'{"leads": [{"payload": {"f": "' + filler.encode() + b'"}}]}'


async def test_an_oversized_body_is_refused_by_its_length(seeded: tuple[Any, int]) -> None:
    client, _ = seeded
    before = await state(client)
    response = await client.post(
        "/sessions/s/leads",
        content=big_push(1024 * 1024),
        headers={"content-type": "application/json"},
    )
    shapes.problem(response, 413, "payload_too_large")
    assert await state(client) == before


async def test_an_oversized_streamed_body_is_refused_as_it_arrives(
    seeded: tuple[Any, int],
) -> None:
    client, _ = seeded
    before = await state(client)
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
    assert await state(client) == before


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
    from tests.support.in_process import runtime_of

    async def broken() -> None:
        raise RuntimeError("secret internals")

    monkeypatch.setattr(runtime_of(client).queue, "stats_all", broken)
    response = await client.get("/stats")
    body = shapes.problem(response, 500, "internal_error")
    assert "detail" not in body
    assert "secret" not in response.text and "Traceback" not in response.text
