"""The service around the routes: readiness, boot recovery, the sweeper, database outages."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.api.app import create_app
from app.config import Settings
from app.service import maintenance
from app.store.pool import libpq_url
from tests.api import shapes
from tests.support.in_process import Serve, listening, serving, until, waiters
from tests.support.proxy import Proxy, proxied


async def push_and_lease(client: httpx.AsyncClient, session: str = "s") -> int:
    pushed = await client.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}]})
    assert pushed.status_code == 201
    leased = await client.post("/lease", json={"session": session, "owner": "w1"})
    lead_id: int = leased.json()["leases"][0]["lead"]["id"]
    return lead_id


async def expire_leases(database_url: str) -> None:
    """Move every lease's expiry into the past (a worker that died long ago)."""
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True
    ) as conn:
        await conn.execute(
            "UPDATE leads SET lease_expires_at = now() - interval '1 minute' "
            "WHERE status = 'leased'"
        )


def test_create_app_needs_a_database_url() -> None:
    with pytest.raises(ValueError, match="LEASEQ_DATABASE_URL"):
        create_app(Settings(database_url=None))


async def test_readyz_is_503_on_an_unmigrated_database(empty_database_url: str) -> None:
    settings = Settings(database_url=empty_database_url, api_tokens="")
    async with serving(settings) as client:
        body = shapes.problem(await client.get("/readyz"), 503, "unavailable")
        assert "schema" in body["detail"]
        assert (await client.get("/healthz")).status_code == 200


async def test_boot_recovery_requeues_leases_that_expired_while_down(
    client: httpx.AsyncClient, serve: Serve, database_url: str
) -> None:
    lead_id = await push_and_lease(client)
    await expire_leases(database_url)
    async with serve() as restarted:
        # Recovered before the first request is served.
        lead = (await restarted.get(f"/leads/{lead_id}")).json()
        assert (lead["status"], lead["attempts"]) == ("queued", 1)


async def test_the_background_sweeper_requeues_expired_leases(
    serve: Serve, database_url: str
) -> None:
    async with serve(sweep_interval_s=0.1) as client:
        lead_id = await push_and_lease(client)
        await expire_leases(database_url)

        async def requeued() -> bool:
            return (await client.get(f"/leads/{lead_id}")).json()["status"] == "queued"

        await until(requeued, within_s=3)


async def test_an_unreachable_database_answers_503_quickly() -> None:
    settings = Settings(
        database_url="postgresql://postgres@127.0.0.1:1/nowhere",
        api_tokens="",
        allowed_hosts="leaseq.test",
        connect_timeout_s=1,
        pool_timeout_s=1,
    )
    async with serving(settings) as client:
        for method, path, body in [
            ("GET", "/stats", None),
            ("POST", "/sessions/s/leads", {"leads": [{"payload": {}}]}),
            ("POST", "/lease", {"session": "s", "owner": "w1", "wait_s": 1}),
            ("GET", "/sessions/s/report", None),
        ]:
            started = time.monotonic()
            response = await client.request(method, path, json=body)
            assert time.monotonic() - started < 2.5
            shapes.problem(response, 503, "unavailable")
        shapes.problem(await client.get("/readyz"), 503, "unavailable")
        assert (await client.get("/healthz")).status_code == 200


@pytest.fixture
async def behind_proxy(database_url: str) -> AsyncIterator[tuple[Proxy, str]]:
    """A TCP proxy in front of the test's database, and the URL through it."""
    async with proxied(database_url) as found:
        yield found


async def test_an_outage_gives_503_and_the_service_recovers_by_itself(
    serve: Serve, behind_proxy: tuple[Proxy, str]
) -> None:
    proxy, through_proxy = behind_proxy
    async with serve(database_url=through_proxy, connect_timeout_s=1, pool_timeout_s=1) as client:
        await listening(client)
        await push_and_lease(client)

        await proxy.stop()  # pooled connections die, new ones are refused
        for _ in range(3):
            started = time.monotonic()
            shapes.problem(await client.get("/stats"), 503, "unavailable")
            assert time.monotonic() - started < 2.5
        shapes.problem(await client.get("/readyz"), 503, "unavailable")

        await proxy.start()

        async def ready() -> bool:
            return (await client.get("/readyz")).status_code == 200

        await until(ready)
        assert (await client.get("/stats")).status_code == 200
        await listening(client)  # the listener reconnected by itself
        waiting = asyncio.create_task(
            client.post("/lease", json={"session": "back", "owner": "w1", "wait_s": 20})
        )
        await waiters(client, 1)
        await push_and_lease(client, "other")
        pushed = await client.post("/sessions/back/leads", json={"leads": [{"payload": {}}]})
        assert pushed.status_code == 201
        response = await asyncio.wait_for(waiting, timeout=2)
        assert len(response.json()["leases"]) == 1


MAX_POOL = 20  # more connections than any pool of these tests holds


async def test_connections_killed_by_the_server_never_give_500(
    client: httpx.AsyncClient, database_url: str
) -> None:
    await push_and_lease(client)
    name = make_url(database_url).database
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True
    ) as admin:
        await admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = %s AND pid <> pg_backend_pid()",
            [name],
        )
    # Each idle connection the server killed answers one request 503 as the pool finds it
    # dead and replaces it; a request on a fresh connection answers 200. Never a 500.
    statuses: list[int] = []
    while not statuses or (statuses[-1] != 200 and len(statuses) <= MAX_POOL):
        statuses.append((await client.get("/sessions/s/stats")).status_code)
    assert set(statuses) <= {200, 503}
    assert statuses[-1] == 200


async def test_readyz_reaches_the_database_at_most_once_a_second(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:

    checks = 0
    real = maintenance.schema_revision

    async def counted(db: Any) -> Any:
        nonlocal checks
        checks += 1
        return await real(db)

    monkeypatch.setattr(maintenance, "schema_revision", counted)
    started = time.monotonic()
    answers = await asyncio.gather(*(client.get("/readyz") for _ in range(200)))
    answers += [await client.get("/readyz") for _ in range(50)]
    took = time.monotonic() - started
    assert all(answer.status_code == 200 for answer in answers)
    assert 1 <= checks <= 2 + int(took)
