"""Complete and lease in one request: ``next`` on /complete and /complete/batch
(docs/contract.md#complete-and-lease)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from tests.api import shapes
from tests.api.test_routes import lease_one, push
from tests.support.in_process import runtime_of, waiters

NEXT = {"session": "s", "owner": "w2"}


def completion(lease: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {"lead_id": lease["lead"]["id"], "token": lease["token"], **extra}


async def ledger(client: httpx.AsyncClient, lead_id: int) -> list[str]:
    rows = await runtime_of(client).db.rows(
        "SELECT event FROM lead_events WHERE lead_id = %(id)s ORDER BY id", {"id": lead_id}
    )
    return [row["event"] for row in rows]


async def test_complete_with_next_finishes_then_leases_in_one_request(
    client: httpx.AsyncClient,
) -> None:
    first, second = await push(client, "s", {"payload": {"n": 1}, "priority": 1}, {"payload": {}})
    lease = await lease_one(client, "s")
    assert lease["lead"]["id"] == first

    answer = await client.post("/complete", json=completion(lease, next=NEXT | {"ttl_s": 30}))
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"lead", "leases"}
    shapes.lead(body["lead"], status="done", owner="w1")
    [taken] = body["leases"]
    shapes.lease(taken)
    assert taken["lead"]["id"] == second and taken["owner"] == "w2" and taken["ttl_s"] == 30
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1, leased=1)
    assert await ledger(client, first) == ["pushed", "leased", "completed"]
    assert await ledger(client, second) == ["pushed", "leased"]

    # Nothing left: the completion still succeeds, and its leases are an empty list.
    last = await client.post("/complete", json=completion(taken, next=NEXT))
    assert last.status_code == 200 and last.json()["leases"] == []
    shapes.lead(last.json()["lead"], status="done", owner="w2")


async def test_a_refused_completion_leases_nothing(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}}, {"payload": {}})
    lease = await lease_one(client, "s")
    stale = completion(lease, token="stale", next=NEXT)
    shapes.problem(await client.post("/complete", json=stale), 409, "lease_lost")
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=1, leased=1)


async def test_a_bad_next_changes_nothing(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s")
    for bad in (
        {"session": "no spaces", "owner": "w2"},
        {"session": "s", "owner": ""},
        {"session": "s", "owner": "w2", "max": 0},
        {"session": "s", "sessions": ["s"], "owner": "w2"},
        {"session": "s", "owner": "w2", "unknown": 1},
        {"session": "s", "owner": "w2", "key": "k"},  # a key is the Idempotency-Key header
    ):
        refused = await client.post("/complete", json=completion(lease, next=bad))
        shapes.problem(refused, 422, "validation_error")
        batch = {"items": [completion(lease)], "next": bad}
        shapes.problem(await client.post("/complete/batch", json=batch), 422, "validation_error")
    # A batch item takes no next of its own.
    nested = {"items": [completion(lease, next=NEXT)]}
    shapes.problem(await client.post("/complete/batch", json=nested), 422, "validation_error")
    shapes.counts((await client.get("/sessions/s/stats")).json(), leased=1)


async def test_a_retry_with_its_key_gets_the_same_lead_and_the_same_leases(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "s", *({"payload": {"n": n}} for n in range(4)))
    lease = await lease_one(client, "s")
    key = {"Idempotency-Key": "7a1f4c3e-0c8e-4a4f-9f55-1d2a3b4c5d6e"}
    body = completion(lease, next=NEXT | {"max": 2})

    first = await client.post("/complete", json=body, headers=key)
    again = await client.post("/complete", json=body, headers=key)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and len(first.json()["leases"]) == 2
    # Without the key a retry completes idempotently but leases anew.
    fresh = await client.post("/complete", json=body)
    assert fresh.json()["lead"] == first.json()["lead"]
    assert {lease["lead"]["id"] for lease in fresh.json()["leases"]}.isdisjoint(
        lease["lead"]["id"] for lease in first.json()["leases"]
    )
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1, leased=3)


async def test_a_key_sent_before_with_another_next_refuses_the_completion_too(
    client: httpx.AsyncClient,
) -> None:
    """The same key with another request answers 422 and changes nothing: the completion it
    came with is not made either, so the worker still holds its lead."""
    await push(client, "s", *({"payload": {"n": n}} for n in range(4)))
    a = await lease_one(client, "s")
    b = await lease_one(client, "s")
    key = {"Idempotency-Key": "c0ffee00-0000-4000-8000-000000000001"}
    first = await client.post("/complete", json=completion(a, next=NEXT), headers=key)
    assert first.status_code == 200 and len(first.json()["leases"]) == 1

    for other in (NEXT | {"max": 2}, NEXT | {"owner": "w3"}):
        refused = await client.post("/complete", json=completion(b, next=other), headers=key)
        shapes.problem(refused, 422, "validation_error")
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1, leased=2, queued=1)
    assert await ledger(client, b["lead"]["id"]) == ["pushed", "leased"]
    # Nor by a batch's.
    batch = {"items": [completion(b)], "next": NEXT | {"max": 3}}
    refused = await client.post("/complete/batch", json=batch, headers=key)
    shapes.problem(refused, 422, "validation_error")
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1, leased=2, queued=1)
    assert await ledger(client, b["lead"]["id"]) == ["pushed", "leased"]
    # The holder's own lease stands: a new key completes it and leases.
    fresh = {"Idempotency-Key": "c0ffee00-0000-4000-8000-000000000002"}
    done = await client.post("/complete", json=completion(b, next=NEXT), headers=fresh)
    assert done.status_code == 200 and len(done.json()["leases"]) == 1
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=2, leased=2)


async def test_a_keyed_completion_with_next_into_another_session(
    client: httpx.AsyncClient,
) -> None:
    """A completion of a lead of one session whose next leases another: the lead is done in
    its session, the lease taken in the other, and a retry with the key gets both again."""
    [first] = await push(client, "s", {"payload": {}})
    elsewhere = await push(client, "t", {"payload": {"n": 1}, "priority": 1}, {"payload": {}})
    lease = await lease_one(client, "s")
    key = {"Idempotency-Key": "c0ffee00-0000-4000-8000-000000000003"}
    body = completion(lease, next={"session": "t", "owner": "w2"})

    answer = await client.post("/complete", json=body, headers=key)
    assert answer.status_code == 200, answer.text
    shapes.lead(answer.json()["lead"], status="done", owner="w1")
    [taken] = answer.json()["leases"]
    assert taken["lead"]["id"] == elsewhere[0] and taken["lead"]["session"] == "t"
    again = await client.post("/complete", json=body, headers=key)
    assert again.status_code == 200 and again.json() == answer.json()
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1)
    shapes.counts((await client.get("/sessions/t/stats")).json(), leased=1, queued=1)
    assert await ledger(client, first) == ["pushed", "leased", "completed"]
    assert await ledger(client, elsewhere[0]) == ["pushed", "leased"]

    # A stale token there leases nothing in the other session either.
    stale = completion(lease, token="stale", next={"session": "t", "owner": "w2"})
    shapes.problem(await client.post("/complete", json=stale), 409, "lease_lost")
    shapes.counts((await client.get("/sessions/t/stats")).json(), leased=1, queued=1)


async def test_complete_batch_with_next_answers_items_then_leases(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "s", *({"payload": {"n": n}} for n in range(5)))
    a = await lease_one(client, "s")
    b = await lease_one(client, "s")
    response = await client.post(
        "/complete/batch",
        json={
            "items": [completion(a), completion(b, token="stale")],
            "next": NEXT | {"max": 10},
        },
    )
    assert response.status_code == 200, response.text
    body = response.json()
    assert body["results"] == [
        {"lead_id": a["lead"]["id"], "ok": True},
        {"lead_id": b["lead"]["id"], "ok": False, "code": "lease_lost"},
    ]
    assert len(body["leases"]) == 3
    for taken in body["leases"]:
        shapes.lease(taken)  # every column of each lead, nulls too
        assert taken["lead"]["key"] is None and taken["owner"] == "w2"
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1, leased=4)

    plain = await client.post("/complete/batch", json={"items": [completion(b)]})
    assert plain.json() == {"results": [{"lead_id": b["lead"]["id"], "ok": True}]}


async def test_next_across_sessions_and_with_a_wait(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s")
    across = {"sessions": ["a", "b"], "owner": "w2", "wait_s": 30}

    async def later() -> None:
        await waiters(client, 1)  # the completion is waiting for work in a or b
        await push(client, "b", {"payload": {"late": True}})

    pushing = asyncio.create_task(later())
    answer = await client.post("/complete", json=completion(lease, next=across))
    await pushing
    assert answer.status_code == 200, answer.text
    [taken] = answer.json()["leases"]
    assert taken["lead"]["session"] == "b" and taken["lead"]["payload"] == {"late": True}


async def test_openapi_describes_next_and_its_leases(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    schemas = spec["components"]["schemas"]
    assert schemas["CompleteIn"]["properties"]["next"]["anyOf"][0] == {
        "$ref": "#/components/schemas/LeaseIn"
    }
    assert "next" not in schemas["CompleteItemIn"]["properties"]
    for answer in ("CompleteOut", "CompleteBatchOut"):
        leases = schemas[answer]["properties"]["leases"]
        assert leases["type"] == "array" and "leases" not in schemas[answer]["required"]
    params = spec["paths"]["/complete"]["post"]["parameters"]
    assert [p["name"] for p in params] == ["Idempotency-Key"]
