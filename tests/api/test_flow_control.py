"""Flow control over REST (docs/contract.md#flow-control): pause and resume, a throttled
release, concurrency keys and the maximum runtime, and hostile input for each new field."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from tests.api import shapes
from tests.support.in_process import Serve

FLOW_SETTINGS = {
    "max_leased_per_key": None,
    "max_runtime_s": None,
    "max_queued": None,
    "paused_until": None,
}


async def push(client: httpx.AsyncClient, session: str, *leads: dict[str, Any]) -> list[int]:
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": list(leads)})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


async def lease(client: httpx.AsyncClient, **body: Any) -> list[dict[str, Any]]:
    answer = await client.post("/lease", json={"owner": "w", **body})
    assert answer.status_code == 200, answer.text
    leases: list[dict[str, Any]] = answer.json()["leases"]
    for got in leases:
        shapes.lease(got)
    return leases


async def test_pause_and_resume_through_two_api_processes(
    client: httpx.AsyncClient, serve: Serve
) -> None:
    await push(client, "s", *[{"payload": {}}] * 3)
    async with serve() as other:
        [held] = await lease(other, session="s")
        paused = await client.post("/sessions/s/pause")  # no body: until resumed
        assert paused.status_code == 200, paused.text
        body = paused.json()
        assert shapes.timestamp(body["paused_until"]).year == 9999
        assert await lease(other, session="s", max=3) == []
        assert await lease(client, session="s", max=3) == []
        assert await lease(other, max=3) == []  # across sessions: skipped
        stats = (await other.get("/sessions/s/stats")).json()
        assert stats["paused_until"] == body["paused_until"]
        assert (await other.get("/stats")).json()["sessions"]["s"]["paused_until"] is not None
        renewed = await other.post(
            "/renew", json={"lead_id": held["lead"]["id"], "token": held["token"]}
        )
        assert renewed.status_code == 200  # held leases go on
        resumed = await other.post("/sessions/s/resume")
        assert resumed.status_code == 200 and resumed.json()["paused_until"] is None
        assert len(await lease(client, session="s", max=3)) == 2


async def test_a_pause_for_a_time_and_a_put_of_settings_leaves_it(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "s", {"payload": {}})
    paused = await client.post("/sessions/s/pause", json={"for_s": 600})
    assert paused.status_code == 200
    until = paused.json()["paused_until"]
    put = await client.put("/sessions/s/settings", json={"weight": 2})
    assert put.status_code == 200 and put.json()["paused_until"] == until
    got = (await client.get("/sessions/s/settings")).json()
    assert got == {"weight": 2.0, "max_leased": None, "rate_per_s": None, "burst": None} | {
        **FLOW_SETTINGS,
        "paused_until": until,
    }
    assert await lease(client, session="s") == []


async def test_a_throttled_release_over_rest(client: httpx.AsyncClient) -> None:
    [lead_id] = await push(client, "s", {"payload": {}, "max_attempts": 1})
    [held] = await lease(client, session="s")
    answer = await client.post(
        "/release", json={"lead_id": lead_id, "token": held["token"], "throttle_s": 30}
    )
    assert answer.status_code == 200, answer.text
    shapes.lead(answer.json()["lead"], status="queued", attempts=1)
    stats = (await client.get("/sessions/s/stats")).json()
    assert stats["paused_until"] is not None and stats["queued"] == 1
    assert await lease(client, session="s") == []
    await client.post("/sessions/s/resume")
    [again] = await lease(client, session="s")
    assert again["attempt"] == 2  # the fencing number grows; the throttled lease used no attempt
    lost = await client.post(
        "/release", json={"lead_id": lead_id, "token": held["token"], "throttle_s": 30}
    )
    shapes.problem(lost, 409, "lease_lost")


async def test_a_lead_given_back_unstarted_spends_no_attempt(client: httpx.AsyncClient) -> None:
    """A prefetched lead a stopping worker never started goes back queued even on its last
    attempt, and nothing pauses; a plain release of the same then fails it, as before."""
    [lead_id] = await push(client, "s", {"payload": {}, "max_attempts": 1})
    [held] = await lease(client, session="s")
    body = {"lead_id": lead_id, "token": held["token"], "unstarted": True}
    answer = await client.post("/release", json=body)
    assert answer.status_code == 200, answer.text
    shapes.lead(answer.json()["lead"], status="queued", attempts=1)
    assert (await client.get("/sessions/s/stats")).json()["paused_until"] is None
    [again] = await lease(client, session="s")
    assert again["attempt"] == 2  # the fencing number grows; the unstarted lease used none
    plain = {"lead_id": lead_id, "token": again["token"]}
    answer = await client.post("/release", json=plain)
    shapes.lead(answer.json()["lead"], status="failed", attempts=2)
    refused = await client.post("/release", json={**body, "unstarted": "yes"})
    shapes.problem(refused, 422, "validation_error")


async def test_keys_and_runtimes_round_trip_and_a_renewal_past_the_runtime_says_why(
    client: httpx.AsyncClient,
) -> None:
    put = await client.put("/sessions/s/settings", json={"max_leased_per_key": 1})
    assert put.status_code == 200 and put.json()["max_leased_per_key"] == 1
    await push(
        client,
        "s",
        {"payload": {}, "concurrency_key": "a", "max_runtime_s": 1},
        {"payload": {}, "concurrency_key": "a"},
        {"payload": {}, "concurrency_key": "b"},
    )
    leases = await lease(client, session="s", max=3, ttl_s=30)
    assert sorted(x["lead"]["concurrency_key"] for x in leases) == ["a", "b"]
    short = next(x for x in leases if x["lead"]["max_runtime_s"] == 1)
    assert short["ttl_s"] <= 1  # granted only up to the end of its runtime
    refused = None
    for _ in range(300):  # the runtime ends within a second of the database clock
        answer = await client.post(
            "/renew", json={"lead_id": short["lead"]["id"], "token": short["token"], "ttl_s": 30}
        )
        if answer.status_code == 409:
            refused = answer
            break
        assert answer.json()["ttl_s"] <= 1
        await asyncio.sleep(0.01)
    assert refused is not None
    body = shapes.problem(refused, 409, "lease_lost")
    assert body["reason"] == "max_runtime"


BAD_BODIES: list[tuple[str, str, dict[str, Any]]] = [
    ("POST", "/sessions/s/pause", {"for_s": 0}),
    ("POST", "/sessions/s/pause", {"for_s": -5}),
    ("POST", "/sessions/s/pause", {"for_s": "10"}),
    ("POST", "/sessions/s/pause", {"for_s": 1e12}),
    ("POST", "/sessions/s/pause", {"until": 5}),
    ("POST", "/sessions/bad name/pause", {}),
    ("PUT", "/sessions/s/settings", {"max_leased_per_key": 0}),
    ("PUT", "/sessions/s/settings", {"max_leased_per_key": 2**31}),
    ("PUT", "/sessions/s/settings", {"max_leased_per_key": "2"}),
    ("PUT", "/sessions/s/settings", {"max_runtime_s": 0}),
    ("PUT", "/sessions/s/settings", {"max_runtime_s": 86401}),
    ("PUT", "/sessions/s/settings", {"max_runtime_s": 1.5}),
    ("PUT", "/sessions/s/settings", {"paused_until": "2030-01-01T00:00:00Z"}),
    (
        "POST",
        "/sessions/s/leads",
        {"leads": [{"payload": {}}, {"payload": {}, "concurrency_key": ""}]},
    ),
    ("POST", "/sessions/s/leads", {"leads": [{"payload": {}, "concurrency_key": "k" * 129}]}),
    ("POST", "/sessions/s/leads", {"leads": [{"payload": {}, "concurrency_key": 5}]}),
    ("POST", "/sessions/s/leads", {"leads": [{"payload": {}, "concurrency_key": "a\u0000"}]}),
    ("POST", "/sessions/s/leads", {"leads": [{"payload": {}, "max_runtime_s": 0}]}),
    ("POST", "/sessions/s/leads", {"leads": [{"payload": {}, "max_runtime_s": 86401}]}),
    ("POST", "/sessions/s/leads", {"leads": [{"payload": {}, "max_runtime_s": True}]}),
]


@pytest.mark.parametrize(("method", "path", "body"), BAD_BODIES)
async def test_hostile_flow_control_input_is_422_and_changes_nothing(
    client: httpx.AsyncClient, method: str, path: str, body: dict[str, Any]
) -> None:
    answer = await client.request(method, path, json=body)
    shapes.problem(answer, 422, "validation_error")
    assert (await client.get("/sessions/s/settings")).json()["paused_until"] is None
    assert (await client.get("/sessions/s/stats")).json()["queued"] == 0
    assert (await client.get("/stats")).json()["sessions"] == {}


@pytest.mark.parametrize("throttle_s", [b"0", b"0.5", b"3601", b'"60"', b"true", b"[1]", b"NaN"])
async def test_a_hostile_throttle_is_422_and_releases_nothing(
    client: httpx.AsyncClient, throttle_s: bytes
) -> None:
    [lead_id] = await push(client, "s", {"payload": {}})
    [held] = await lease(client, session="s")
    body = b'{"lead_id": %d, "token": "%s", "throttle_s": %s}' % (
        lead_id,
        held["token"].encode(),
        throttle_s,
    )
    answer = await client.post(
        "/release", content=body, headers={"content-type": "application/json"}
    )
    shapes.problem(answer, 422, "validation_error")
    assert (await client.get(f"/leads/{lead_id}")).json()["status"] == "leased"
    assert (await client.get("/sessions/s/settings")).json()["paused_until"] is None


CROSS_SITE = ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"})


async def test_a_cross_site_browser_can_neither_pause_nor_resume(client: httpx.AsyncClient) -> None:
    for headers in CROSS_SITE:
        shapes.problem(await client.post("/sessions/s/pause", headers=headers), 403, "forbidden")
    assert (await client.get("/sessions/s/settings")).json()["paused_until"] is None
    await client.post("/sessions/s/pause")
    for headers in CROSS_SITE:
        shapes.problem(await client.post("/sessions/s/resume", headers=headers), 403, "forbidden")
    assert (await client.get("/sessions/s/settings")).json()["paused_until"] is not None
