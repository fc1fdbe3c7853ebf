"""Trace context over REST (docs/contract.md#trace-context): a lead's own traceparent or the
push's header, stored on the lead and carried by every lead object through its life."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import httpx
import pytest

from tests.api import shapes
from tests.support.in_process import runtime_of

MINE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HEADER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
OTHER = "00-11111111111111111111111111111111-2222222222222222-00"


async def push(
    client: httpx.AsyncClient, *leads: dict[str, Any], headers: dict[str, str] | None = None
) -> httpx.Response:
    return await client.post("/sessions/s/leads", json={"leads": list(leads)}, headers=headers)


async def lead_of(client: httpx.AsyncClient, lead_id: int) -> dict[str, Any]:
    answer = await client.get(f"/leads/{lead_id}")
    assert answer.status_code == 200, answer.text
    return shapes.lead(answer.json())


async def lease(client: httpx.AsyncClient, **body: Any) -> dict[str, Any]:
    answer = await client.post("/lease", json={"owner": "w", "session": "s", **body})
    assert answer.status_code == 200, answer.text
    [held] = answer.json()["leases"]
    return shapes.lease(held)


async def test_it_survives_push_lease_release_re_lease_and_sweep(
    client: httpx.AsyncClient,
) -> None:
    pushed = await push(client, {"payload": {}, "traceparent": MINE}, {"payload": {}})
    assert pushed.status_code == 201, pushed.text
    traced, plain = pushed.json()["ids"]
    assert (await lead_of(client, traced))["traceparent"] == MINE
    assert (await lead_of(client, plain))["traceparent"] is None
    held = await lease(client)
    assert held["lead"]["id"] == traced and held["lead"]["traceparent"] == MINE
    released = await client.post("/release", json={"lead_id": traced, "token": held["token"]})
    assert released.status_code == 200 and released.json()["lead"]["traceparent"] == MINE
    again = await lease(client, ttl_s=1)
    assert again["lead"]["id"] == traced and again["lead"]["traceparent"] == MINE
    queue = runtime_of(client).queue
    await queue.sweep("s", now=await queue.db_now() + timedelta(seconds=5))
    swept = await lead_of(client, traced)
    assert swept["status"] == "queued" and swept["traceparent"] == MINE
    plain_held = await lease(client)  # the swept lead waits out its backoff
    assert plain_held["lead"]["id"] == plain and plain_held["lead"]["traceparent"] is None
    done = await client.post("/complete", json={"lead_id": plain, "token": plain_held["token"]})
    assert done.status_code == 200 and done.json()["lead"]["traceparent"] is None


async def test_the_header_applies_to_every_lead_and_a_lead_s_own_wins(
    client: httpx.AsyncClient,
) -> None:
    pushed = await push(
        client,
        {"payload": {"i": 0}},
        {"payload": {"i": 1}, "traceparent": MINE},
        {"payload": {"i": 2}},
        headers={"traceparent": HEADER},
    )
    assert pushed.status_code == 201, pushed.text
    got = [(await lead_of(client, i))["traceparent"] for i in pushed.json()["ids"]]
    assert got == [HEADER, MINE, HEADER]


@pytest.mark.parametrize(
    "bad",
    [
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # version ff
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",  # trace id all zeros
        "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",  # parent id all zeros
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",  # uppercase
        "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",  # 31 digits of trace id
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",  # one digit of flags
        "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",  # no flags
        "0-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",  # one digit of version
        "00_4bf92f3577b34da6a3ce929d0e0e4736_00f067aa0ba902b7_01",
        "",
        12,
    ],
)
async def test_a_malformed_traceparent_of_a_lead_is_refused_and_nothing_is_pushed(
    client: httpx.AsyncClient, bad: Any
) -> None:
    answer = await push(client, {"payload": {}}, {"payload": {}, "traceparent": bad})
    problem = shapes.problem(answer, 422, "validation_error")
    # Named where it is: by the schema (body.leads.1.…) or by the queue's check (leads[1].…).
    assert re.search(r"leads(\.1|\[1\])\.traceparent", problem["detail"]), problem
    stats = (await client.get("/sessions/s/stats")).json()
    assert stats["queued"] == 0


@pytest.mark.parametrize(
    "bad",
    [
        "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
        "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
        "garbage",
        "",
    ],
)
async def test_a_malformed_header_is_ignored(client: httpx.AsyncClient, bad: str) -> None:
    pushed = await push(client, {"payload": {}}, headers={"traceparent": bad})
    assert pushed.status_code == 201, pushed.text
    [lead_id] = pushed.json()["ids"]
    assert (await lead_of(client, lead_id))["traceparent"] is None


async def test_an_idempotent_retry_in_another_span_is_the_same_push(
    client: httpx.AsyncClient,
) -> None:
    body = ({"payload": {"i": 0}}, {"payload": {"i": 1}, "traceparent": MINE})
    first = await push(client, *body, headers={"Idempotency-Key": "k1", "traceparent": HEADER})
    assert first.status_code == 201, first.text
    retry = await push(client, *body, headers={"Idempotency-Key": "k1", "traceparent": OTHER})
    assert retry.status_code == 201, retry.text
    assert retry.json() == first.json()
    bare = await push(client, *body, headers={"Idempotency-Key": "k1"})
    assert bare.status_code == 201 and bare.json() == first.json()
    got = [(await lead_of(client, i))["traceparent"] for i in first.json()["ids"]]
    assert got == [HEADER, MINE]  # the first request's values
    assert (await client.get("/sessions/s/stats")).json()["queued"] == 2
    # The body is the request: another lead's own traceparent is another request.
    other = await push(
        client,
        body[0],
        {"payload": {"i": 1}, "traceparent": OTHER},
        headers={"Idempotency-Key": "k1"},
    )
    assert other.status_code == 422, other.text
