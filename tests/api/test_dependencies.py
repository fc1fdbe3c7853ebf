"""Dependencies over REST (docs/contract.md#dependencies): ``after`` by id and by key, the
lead object's ``after``, the stats' ``blocked``, the lead page's dependents, and refusals
that push nothing of the call."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api import shapes


async def push(client: httpx.AsyncClient, session: str, *leads: dict[str, Any]) -> httpx.Response:
    return await client.post(f"/sessions/{session}/leads", json={"leads": list(leads)})


async def test_after_by_key_and_id_blocks_until_done_and_stats_count_blocked(
    client: httpx.AsyncClient,
) -> None:
    first = await push(client, "s", {"payload": {}, "key": "a"})
    [a] = first.json()["ids"]
    answer = await push(
        client,
        "s",
        {"payload": {}, "key": "b", "after": [a]},
        {"payload": {}, "after": [{"key": "a"}, {"key": "b"}]},
    )
    assert answer.status_code == 201, answer.text
    b, c = answer.json()["ids"]
    lead_c = shapes.lead((await client.get(f"/leads/{c}")).json())
    assert lead_c["after"] == [a, b] and lead_c["status"] == "queued"
    assert shapes.lead((await client.get(f"/leads/{a}")).json())["after"] == []
    stats = shapes.counts((await client.get("/sessions/s/stats")).json(), queued=3, blocked=2)
    assert stats["pending"] == 3
    every = (await client.get("/stats")).json()
    assert every["sessions"]["s"]["blocked"] == 2 and every["total"]["blocked"] == 2
    page = (await client.get(f"/leads/{a}/events")).json()
    assert page["dependents"] == [b, c]
    leased = await client.post("/lease", json={"session": "s", "owner": "w", "max": 10})
    [held] = leased.json()["leases"]
    assert held["lead"]["id"] == a
    done = await client.post("/complete", json={"lead_id": a, "token": held["token"]})
    assert done.status_code == 200
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=2, done=1, blocked=1)
    leased = await client.post("/lease", json={"session": "s", "owner": "w", "max": 10})
    assert [each["lead"]["id"] for each in leased.json()["leases"]] == [b]


@pytest.mark.parametrize(
    "after",
    [
        [{"key": "later"}],  # a cycle could only be named through a later lead
        [{"key": "unknown"}],
        [{"key": "self"}],
        [999_999],
        [{"key": ""}],
        [{"id": 1}],
        [0],
        [1] * 101,
    ],
)
async def test_a_bad_after_answers_422_and_pushes_nothing(
    client: httpx.AsyncClient, after: list[Any]
) -> None:
    await push(client, "s", {"payload": {}})  # lead 1
    answer = await push(
        client,
        "s",
        {"payload": {}, "key": "earlier"},
        {"payload": {}, "key": "self", "after": after},
        {"payload": {}, "key": "later"},
    )
    problem = shapes.problem(answer, 422, "validation_error")
    assert "after" in problem["detail"], problem
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=1)


async def test_a_cycle_of_keys_in_one_call_answers_422(client: httpx.AsyncClient) -> None:
    answer = await push(
        client,
        "s",
        {"payload": {}, "key": "x", "after": [{"key": "y"}]},
        {"payload": {}, "key": "y", "after": [{"key": "x"}]},
    )
    shapes.problem(answer, 422, "validation_error")
    shapes.counts((await client.get("/sessions/s/stats")).json())


async def test_another_session_s_lead_answers_422(client: httpx.AsyncClient) -> None:
    [theirs] = (await push(client, "other", {"payload": {}})).json()["ids"]
    answer = await push(client, "s", {"payload": {}}, {"payload": {}, "after": [theirs]})
    problem = shapes.problem(answer, 422, "validation_error")
    assert "leads[1].after[0]" in problem["detail"]
    shapes.counts((await client.get("/sessions/s/stats")).json())


async def test_a_push_with_after_and_an_idempotency_key_happens_once(
    client: httpx.AsyncClient,
) -> None:
    body = {"leads": [{"payload": {}, "key": "a"}, {"payload": {}, "after": [{"key": "a"}]}]}
    once = {"Idempotency-Key": "deps-1"}
    first = await client.post("/sessions/s/leads", json=body, headers=once)
    again = await client.post("/sessions/s/leads", json=body, headers=once)
    assert first.status_code == again.status_code == 201, again.text
    assert first.json() == again.json()
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=2, blocked=1)


async def test_a_failure_down_a_diamond_is_in_each_lead_s_events_and_the_report_once(
    client: httpx.AsyncClient,
) -> None:
    answer = await push(
        client,
        "s",
        {"payload": {}, "key": "top", "max_attempts": 1},
        {"payload": {}, "key": "left", "after": [{"key": "top"}]},
        {"payload": {}, "key": "right", "after": [{"key": "top"}]},
        {"payload": {}, "key": "bottom", "after": [{"key": "left"}, {"key": "right"}]},
    )
    top, left, right, bottom = answer.json()["ids"]
    leased = await client.post("/lease", json={"session": "s", "owner": "w"})
    [held] = leased.json()["leases"]
    failed = {"lead_id": top, "token": held["token"], "status": "failed", "error": "boom"}
    assert (await client.post("/complete", json=failed)).status_code == 200
    for lead_id in (left, right, bottom):
        page = (await client.get(f"/leads/{lead_id}/events")).json()
        assert [event["event"] for event in page["events"]] == ["pushed", "failed"]
        assert page["events"][-1]["status"] == "failed"
        assert page["events"][-1]["at"] == page["lead"]["updated_at"]
    top_page = (await client.get(f"/leads/{top}/events")).json()
    assert [event["event"] for event in top_page["events"]] == ["pushed", "leased", "completed"]
    found = (await client.get("/sessions/s/report")).json()
    assert (found["failed"], found["completions"], found["wasted_attempts"]) == (3, 1, 0)
