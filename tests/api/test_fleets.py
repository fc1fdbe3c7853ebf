"""Fleets over REST (docs/contract.md#fleets): leases across sessions, settings, checkpoints,
the scaling signal."""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from typing import Any

import httpx
import psycopg
import pytest

from app.store.pool import libpq_url
from tests.api import shapes
from tests.support import CONNECTION_LOST, UNSERVABLE, unservable
from tests.support.in_process import listening, until, waiters
from tests.support.scrapes import samples, value
from tests.support.serving import Service

SETTINGS = {
    "weight": 1.0,
    "max_leased": None,
    "rate_per_s": None,
    "burst": None,
    "max_leased_per_key": None,
    "max_runtime_s": None,
    "max_queued": None,
    "paused_until": None,
}


async def push(client: httpx.AsyncClient, session: str, n: int) -> list[int]:
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}] * n})
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


async def test_a_lease_across_sessions_shares_them_out_by_weight(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "heavy", 300)
    await push(client, "light", 300)
    await push(client, "other", 300)
    put = await client.put("/sessions/heavy/settings", json={"weight": 3})
    assert put.status_code == 200 and put.json() == SETTINGS | {"weight": 3.0}
    got: Counter[str] = Counter()
    for _ in range(80):
        for leased in await lease(client, sessions=["heavy", "light"]):
            got[leased["lead"]["session"]] += 1
    assert abs(got["heavy"] - 60) <= 1 and abs(got["light"] - 20) <= 1, got
    # Neither session nor sessions: any session, "other" too.
    anywhere: Counter[str] = Counter()
    for _ in range(50):
        for leased in await lease(client):
            anywhere[leased["lead"]["session"]] += 1
    assert set(anywhere) == {"heavy", "light", "other"}
    assert anywhere["other"] >= 20, anywhere  # it was furthest behind: it catches up


async def test_settings_round_trip_and_bad_settings_change_nothing(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.get("/sessions/t/settings")).json() == SETTINGS
    sent = {"weight": 2.5, "max_leased": 7, "rate_per_s": 3.5, "burst": 9}
    full = SETTINGS | sent
    assert (await client.put("/sessions/t/settings", json=sent)).json() == full
    assert (await client.get("/sessions/t/settings")).json() == full
    for bad in (
        {"weight": 0},
        {"max_leased": -1},
        {"rate_per_s": -2},
        {"burst": 3},
        {"max_leased": "7"},
        {"weight": 1, "tokens": 5},
    ):
        refused = await client.put("/sessions/t/settings", json=bad)
        shapes.problem(refused, 422, "validation_error")
        assert (await client.get("/sessions/t/settings")).json() == full
    partial = await client.put("/sessions/t/settings", json={"max_leased": 3})
    assert partial.json() == SETTINGS | {"max_leased": 3}  # PUT: the rest back to defaults


async def test_a_capped_session_leases_up_to_its_cap(client: httpx.AsyncClient) -> None:
    await push(client, "c", 10)
    await client.put("/sessions/c/settings", json={"max_leased": 2})
    assert len(await lease(client, session="c", max=10)) == 2
    assert await lease(client, session="c", max=10) == []
    assert await lease(client, sessions=["c"], max=10) == []  # skipped, not waited on
    shapes.counts((await client.get("/sessions/c/stats")).json(), queued=8, leased=2)


async def test_a_checkpoint_goes_to_the_next_holder(client: httpx.AsyncClient) -> None:
    [lead_id] = await push(client, "cp", 1)
    [first] = await lease(client, session="cp", ttl_s=1)
    assert first["lead"]["checkpoint"] is None
    renewed = await client.post(
        "/renew/batch",
        json={
            "items": [
                {
                    "lead_id": lead_id,
                    "token": first["token"],
                    "ttl_s": 1,
                    "checkpoint": {"step": 3, "of": 5},
                }
            ]
        },
    )
    assert renewed.json()["results"][0]["ok"] is True
    shapes.lead((await client.get(f"/leads/{lead_id}")).json(), checkpoint={"step": 3, "of": 5})
    await asyncio.sleep(1.1)  # the lease runs out on the database clock
    assert (await client.post("/sweep", json={"session": "cp"})).json()["requeued"] == 1
    [second] = await lease(client, session="cp")
    assert second["attempt"] == 2 and second["lead"]["checkpoint"] == {"step": 3, "of": 5}
    answer = await client.post(
        "/renew", json={"lead_id": lead_id, "token": second["token"], "checkpoint": [4]}
    )
    assert answer.status_code == 200
    released = await client.post("/release", json={"lead_id": lead_id, "token": second["token"]})
    assert released.json()["lead"]["checkpoint"] == [4]


async def test_a_bad_checkpoint_renews_nothing(client: httpx.AsyncClient) -> None:
    [a, b] = await push(client, "bad", 2)
    one, two = await lease(client, session="bad", max=2, ttl_s=60)
    items = [
        {"lead_id": one["lead"]["id"], "token": one["token"], "checkpoint": {"fine": 1}},
        {"lead_id": two["lead"]["id"], "token": two["token"], "checkpoint": {"nul": "\x00"}},
    ]
    refused = await client.post("/renew/batch", json={"items": items})
    problem = shapes.problem(refused, 422, "validation_error")
    assert "items[1].checkpoint" in problem["detail"]
    for leased in (one, two):
        lead = (await client.get(f"/leads/{leased['lead']['id']}")).json()
        assert lead["checkpoint"] is None
        assert lead["lease_expires_at"] == leased["expires_at"]
    assert {a, b} == {one["lead"]["id"], two["lead"]["id"]}


async def test_a_long_poll_across_sessions_wakes_on_work_in_any_of_them(
    client: httpx.AsyncClient,
) -> None:
    await listening(client)
    for body, session in (({"sessions": ["n1", "n2"]}, "n2"), ({}, "elsewhere")):
        waiting = asyncio.ensure_future(
            client.post("/lease", json={"owner": "w", "wait_s": 10, **body})
        )
        await waiters(client, 1)
        started = time.monotonic()
        [pushed] = await push(client, session, 1)
        [leased] = (await waiting).json()["leases"]
        assert time.monotonic() - started < 3  # woken by the NOTIFY, not the end of the wait
        assert leased["lead"]["id"] == pushed


async def test_work_in_a_session_not_named_wakes_no_one(client: httpx.AsyncClient) -> None:
    await listening(client)
    waiting = asyncio.ensure_future(
        client.post("/lease", json={"sessions": ["mine"], "owner": "w", "wait_s": 1})
    )
    await waiters(client, 1)
    await push(client, "theirs", 1)
    assert (await waiting).json()["leases"] == []
    shapes.counts((await client.get("/sessions/theirs/stats")).json(), queued=1)


async def test_the_scaling_signal_moves(client: httpx.AsyncClient) -> None:
    def age() -> float:
        key = ("leaseq_oldest_available_age_seconds", (("session", "scale"),))
        assert key in found, sorted(name for name, _ in found)
        return value(found, key[0], session="scale")

    await push(client, "scale", 2)
    found = samples((await client.get("/metrics")).text)
    first = age()
    stats = (await client.get("/sessions/scale/stats")).json()
    shapes.counts(stats, queued=2)
    assert stats["oldest_available_age_s"] >= 0
    await asyncio.sleep(1.1)
    found = samples((await client.get("/metrics")).text)
    assert age() >= first + 1  # the same lead, a second older
    every = (await client.get("/stats")).json()
    assert every["sessions"]["scale"]["oldest_available_age_s"] >= 1
    assert every["total"]["oldest_available_age_s"] >= 1
    await lease(client, session="scale", max=2)  # taken: nothing waits any more
    found = samples((await client.get("/metrics")).text)
    assert age() == 0
    assert (await client.get("/sessions/scale/stats")).json()["oldest_available_age_s"] is None


def run_sql(database_url: str, statement: str) -> None:
    """SQL straight to the database, bypassing the API (as an older version or a hand).

    On a Citus cluster a trigger on a distributed table is refused unless allowed (and then
    runs on every shard); on one PostgreSQL the setting is a placeholder that changes nothing.
    """
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute("SET citus.enable_unsafe_triggers = on")
        # One command at a time: Citus sends each DDL command on to its workers alone.
        for command in re.split(r"(?<=\$\$);\s*\n", statement):
            conn.execute(command.encode())


async def test_bad_settings_beyond_the_ranges_are_refused(client: httpx.AsyncClient) -> None:
    sent = {"weight": 2.0, "max_leased": 7, "rate_per_s": 3.5, "burst": 9}
    full = SETTINGS | sent
    assert (await client.put("/sessions/r/settings", json=sent)).status_code == 200
    for bad in (
        {"weight": 1e-7},
        {"weight": 1e7},
        {"rate_per_s": 5e-324},
        {"rate_per_s": 1e-7},
        {"rate_per_s": 2e6},
        {"rate_per_s": 1, "burst": 1_000_001},
    ):
        refused = await client.put("/sessions/r/settings", json=bad)
        shapes.problem(refused, 422, "validation_error")
        assert (await client.get("/sessions/r/settings")).json() == full
    edges = {"weight": 1e-6, "max_leased": 0, "rate_per_s": 1e-6, "burst": 1_000_000}
    assert (await client.put("/sessions/r/settings", json=edges)).json() == SETTINGS | edges


@pytest.mark.parametrize("how", sorted(UNSERVABLE))
async def test_a_lease_across_sessions_skips_a_session_it_cannot_serve(
    client: httpx.AsyncClient, database_url: str, how: str
) -> None:
    """A session whose lease statement fails on its own rows (made so in SQL) costs the
    others nothing: every lease across sessions answers 200, from the others."""
    await push(client, "broken", 5)
    await push(client, "fine", 30)
    await client.put("/sessions/broken/settings", json={"rate_per_s": 100, "burst": 100})
    run_sql(database_url, unservable(how, "broken"))
    got: Counter[str] = Counter()
    for body in ({"sessions": ["broken", "fine"]}, {}):
        for _ in range(10):
            for leased in await lease(client, **body):
                got[leased["lead"]["session"]] += 1
    assert got == {"fine": 20}
    assert (await client.get("/sessions/broken/stats")).json()["queued"] == 5


async def test_an_outage_in_one_sessions_lease_answers_503(
    client: httpx.AsyncClient, database_url: str
) -> None:
    await push(client, "dying", 2)
    run_sql(database_url, CONNECTION_LOST.format(session="dying"))
    for body in ({"sessions": ["dying"]}, {"session": "dying"}):
        answer = await client.post("/lease", json={"owner": "w", **body})
        shapes.problem(answer, 503, "unavailable")


async def test_a_served_lease_across_sessions_skips_and_logs_a_session_it_cannot_serve(
    service: Service, db_url: str
) -> None:
    """The same through a real ``leaseq serve``: leases from the other sessions, never a
    500, and the service's log names the session skipped and its error."""
    async with httpx.AsyncClient(base_url=service.url, timeout=15) as served:
        await push(served, "served-broken", 5)
        await push(served, "served-fine", 20)
        put = await served.put("/sessions/served-broken/settings", json={"rate_per_s": 50})
        assert put.status_code == 200, put.text
        run_sql(db_url, unservable("settings", "served-broken"))
        got: Counter[str] = Counter()
        for _ in range(10):
            for leased in await lease(served, sessions=["served-broken", "served-fine"]):
                got[leased["lead"]["session"]] += 1
        assert got == {"served-fine": 10}
    await until(lambda: "served-broken" in service.log())
    lines = [line for line in service.log().splitlines() if "served-broken" in line]
    assert lines and all("skipped" in x and "NumericValueOutOfRange" in x for x in lines), lines
