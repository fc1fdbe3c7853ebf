"""Backpressure over REST (docs/beyond.md#backpressure): 429 quota_exceeded with Retry-After,
nothing stored, refusals counted per session; the Python client's QuotaExceeded and its
wait for room."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from leaseq import AsyncClient, QuotaExceeded
from tests.support.in_process import BASE_URL, Serve, until
from tests.support.scrapes import samples, value

REFUSALS = "leaseq_push_refusals_total"


async def test_a_push_past_max_queued_is_429_with_retry_after(client: httpx.AsyncClient) -> None:
    before = value(samples((await client.get("/metrics")).text), REFUSALS, session="s")
    put = await client.put("/sessions/s/settings", json={"max_queued": 2})
    assert put.status_code == 200 and put.json()["max_queued"] == 2
    assert (await client.get("/sessions/s/settings")).json()["max_queued"] == 2
    first = await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
    assert first.status_code == 201
    refused = await client.post(
        "/sessions/s/leads",
        json={"leads": [{"payload": {}, "key": "a"}, {"payload": {}}]},
        headers={"Idempotency-Key": "once"},
    )
    assert refused.status_code == 429, refused.text
    assert refused.headers["content-type"].startswith("application/problem+json")
    assert refused.json()["code"] == "quota_exceeded"
    assert int(refused.headers["Retry-After"]) >= 1
    stats = (await client.get("/sessions/s/stats")).json()
    assert stats["queued"] == 1
    metrics = (await client.get("/metrics")).text
    assert value(samples(metrics), REFUSALS, session="s") == before + 1
    # Room frees (the lead is leased): the same request with the same key is a first try.
    await client.post("/lease", json={"session": "s", "owner": "w"})
    await client.put("/sessions/s/settings", json={"max_queued": 3})
    again = await client.post(
        "/sessions/s/leads",
        json={"leads": [{"payload": {}, "key": "a"}, {"payload": {}}]},
        headers={"Idempotency-Key": "once"},
    )
    assert again.status_code == 201 and again.json()["created"] == 2


async def test_refusals_are_counted_per_session(client: httpx.AsyncClient) -> None:
    """Each session's refusals are its own series: an operator sees which producer is held
    back, not only that one is."""
    before = samples((await client.get("/metrics")).text)
    one = {"leads": [{"payload": {}}]}
    for session, refusals in (("held", 3), ("once", 1), ("free", 0)):
        if session != "free":
            await client.put(f"/sessions/{session}/settings", json={"max_queued": 1})
        assert (await client.post(f"/sessions/{session}/leads", json=one)).status_code == 201
        for _ in range(refusals):
            refused = await client.post(f"/sessions/{session}/leads", json=one)
            assert refused.status_code == 429
    after = samples((await client.get("/metrics")).text)
    counted = {
        session: value(after, REFUSALS, session=session) - value(before, REFUSALS, session=session)
        for session in ("held", "once", "free")
    }
    assert counted == {"held": 3, "once": 1, "free": 0}


@pytest.mark.parametrize("bad", [0, -1, 1.5, "ten", 2**31])
async def test_a_bad_max_queued_changes_nothing(client: httpx.AsyncClient, bad: object) -> None:
    answer = await client.put("/sessions/s/settings", json={"max_queued": bad})
    assert answer.status_code == 422
    assert (await client.get("/sessions/s/settings")).json()["max_queued"] is None


async def test_the_service_default_binds_every_session(serve: Serve) -> None:
    async with serve(max_queued=1, quota_retry_after_s=7) as client:
        assert (
            await client.post("/sessions/a/leads", json={"leads": [{"payload": {}}]})
        ).is_success
        refused = await client.post("/sessions/a/leads", json={"leads": [{"payload": {}}]})
        assert refused.status_code == 429 and refused.headers["Retry-After"] == "7"
        await client.put("/sessions/b/settings", json={"max_queued": 3})
        many = await client.post("/sessions/b/leads", json={"leads": [{"payload": {}}] * 3})
        assert many.status_code == 201


async def test_the_client_raises_or_waits_for_room(serve: Serve) -> None:
    async with serve(quota_retry_after_s=1) as http:
        await http.put("/sessions/s/settings", json={"max_queued": 1})
        before = value(samples((await http.get("/metrics")).text), REFUSALS, session="s")
        app = http.app  # type: ignore[attr-defined]
        client = AsyncClient(BASE_URL, transport=httpx.ASGITransport(app=app))
        await client.push("s", [{"payload": {"n": 1}}])
        with pytest.raises(QuotaExceeded) as refused:
            await client.push("s", [{"payload": {"n": 2}}])
        assert refused.value.status == 429 and refused.value.retry_after_s == 1.0

        waiting = asyncio.create_task(
            client.push("s", [{"payload": {"n": 3}}], wait_for_room_s=600)
        )

        async def refused_twice() -> bool:
            text = (await http.get("/metrics")).text
            return value(samples(text), REFUSALS, session="s") >= before + 2

        await until(refused_twice, within_s=30)
        assert not waiting.done()
        [lease] = await client.lease("s", "w")  # room for one
        pushed = await waiting
        assert pushed.created == 1
        assert (await client.stats("s")).queued == 1
        await client.complete(lease.lead.id, lease.token)
