"""Long polls on the cluster: the listener follows every node, where statements notify.

A release, a sweep or a completion runs on the worker node that holds its session's
shard, and so does its ``pg_notify``. With the slow poll off (60 s), only a
notification heard on that node can wake the waiter within its wait: the sessions
below lie on both workers, so each node's listener is proven.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.config import Settings
from app.store.statements import ENDED_CHANNEL
from tests.citus.cluster import Cluster, node_of
from tests.support.in_process import listening, runtime_of, serving, until, waiters

SESSIONS = [f"s{i}" for i in range(8)]
Task = asyncio.Task[httpx.Response]


def settings_of(database_url: str, poll_interval_s: float = 60) -> Settings:
    """The API's settings on ``database_url``; by default no slow poll within a test (60 s):
    only a NOTIFY wakes a waiter."""
    return Settings(
        database_url=database_url,
        api_tokens="",
        allowed_hosts="leaseq.test",
        pool_size=10,
        statement_timeout_ms=30_000,
        sweep_interval_s=3600,
        poll_interval_s=poll_interval_s,
    )


@pytest.fixture
async def client(citus_url: str) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(settings_of(citus_url)) as served:
        await listening(served)
        yield served


def one_session_per_node(citus_url: str) -> list[str]:
    by_node: dict[int, str] = {}
    for session, port in node_of(citus_url, SESSIONS).items():
        by_node.setdefault(port, session)
    assert len(by_node) == 2, "the sessions should lie on both worker nodes"
    return list(by_node.values())


def ports_followed(client: httpx.AsyncClient) -> list[int]:
    """The ports of the other nodes the app's listener follows."""
    return [int(name.rpartition(":")[2]) for name in runtime_of(client).listener.nodes]


async def leased(client: httpx.AsyncClient, session: str) -> tuple[int, str]:
    """A lead pushed to ``session`` and leased: its id and token."""
    pushed = await client.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}]})
    assert pushed.status_code == 201
    answer = await client.post("/lease", json={"session": session, "owner": "w1"})
    [lease] = answer.json()["leases"]
    return lease["lead"]["id"], lease["token"]


async def released_to_a_waiter(client: httpx.AsyncClient, session: str) -> tuple[int, str]:
    """A lead of ``session`` leased, then released while another lease of the session waits
    (the slow poll off): the waiter's lease of it, its id and token."""
    lead_id, token = await leased(client, session)
    waiting = asyncio.create_task(
        client.post("/lease", json={"session": session, "owner": "w2", "wait_s": 20})
    )
    await waiters(client, 1)
    released = await client.post("/release", json={"lead_id": lead_id, "token": token})
    assert released.status_code == 200, released.text
    [again] = (await asyncio.wait_for(waiting, timeout=15)).json()["leases"]
    assert again["lead"]["id"] == lead_id and again["owner"] == "w2"
    return lead_id, again["token"]


async def test_the_listener_follows_each_worker_node(
    client: httpx.AsyncClient, citus_cluster: Cluster
) -> None:
    assert runtime_of(client).listener.everywhere
    assert ports_followed(client) == sorted(node.port for node in citus_cluster.workers)


async def test_a_release_on_a_worker_node_wakes_the_waiting_lease(
    client: httpx.AsyncClient, citus_url: str
) -> None:
    for session in one_session_per_node(citus_url):
        await released_to_a_waiter(client, session)


def watches(citus_url: str) -> int:
    """The rows of ``lead_waits`` (a reference table): the waits written."""
    with psycopg.connect(citus_url, autocommit=True) as conn:
        [(found,)] = conn.execute("SELECT count(*) FROM lead_waits").fetchall()
    return int(found)


async def watched(client: httpx.AsyncClient, citus_url: str, lead_ids: list[int]) -> list[Task]:
    """A wait for the outcome of each lead (20 s), once each wait's watch is written."""
    before = watches(citus_url)
    waits = [asyncio.create_task(client.get(f"/leads/{i}?wait_s=20")) for i in lead_ids]
    await until(lambda: watches(citus_url) >= before + len(lead_ids), within_s=10)
    return waits


async def ended(waits: list[Task]) -> list[dict[str, Any]]:
    """The leads the waits answered: well within their 20 s, so a NOTIFY woke them."""
    answers = await asyncio.wait_for(asyncio.gather(*waits), timeout=10)
    return [answer.json() for answer in answers]


async def pushed(client: httpx.AsyncClient, session: str, n: int = 1, **lead: Any) -> list[int]:
    answer = await client.post(
        f"/sessions/{session}/leads", json={"leads": [{"payload": {}, **lead}] * n}
    )
    assert answer.status_code == 201, answer.text
    return list(answer.json()["ids"])


async def lease(client: httpx.AsyncClient, session: str, **body: Any) -> dict[str, Any]:
    answer = await client.post("/lease", json={"session": session, "owner": "w", **body})
    [leased] = answer.json()["leases"]
    return dict(leased)


async def test_each_way_a_lead_ends_wakes_its_waiter_on_each_node(
    client: httpx.AsyncClient, citus_url: str
) -> None:
    """With the slow poll off, a wait for an outcome ends at the NOTIFY that the statement
    ending its lead sends on the lead's node (docs/scaling.md, "Outcome waits on a
    cluster"): a completion, a completion with ``next``, a release on the last attempt, a
    cancel (a statement on every shard) and a sweep on the last attempt."""
    queue = runtime_of(client).queue
    assert queue.sharded and queue.notify_ended  # read from the catalog at connect
    for session in one_session_per_node(citus_url):
        first, second, third, fourth, fifth = await pushed(client, session, 5, max_attempts=1)
        leases = [await lease(client, session) for _ in range(3)]
        assert [one["lead"]["id"] for one in leases] == [first, second, third]
        waits = await watched(client, citus_url, [first, second, third, fourth])
        done = await client.post(
            "/complete", json={"lead_id": first, "token": leases[0]["token"], "result": {}}
        )
        assert done.status_code == 200, done.text
        chained = await client.post(
            "/complete",
            json={
                "lead_id": second,
                "token": leases[1]["token"],
                "next": {"session": session, "owner": "w"},
            },
        )
        assert chained.status_code == 200, chained.text
        [next_lease] = chained.json()["leases"]
        assert next_lease["lead"]["id"] == fourth
        released = await client.post(
            "/release", json={"lead_id": third, "token": leases[2]["token"]}
        )
        assert released.status_code == 200, released.text
        cancelled = await client.post(f"/leads/{fourth}/cancel")
        assert cancelled.status_code == 200, cancelled.text
        answers = await ended(waits)
        assert [a["status"] for a in answers] == ["done", "done", "failed", "failed"]
        assert answers[3]["error"] == "cancelled"
        [swept] = await watched(client, citus_url, [fifth])
        short = await client.post("/lease", json={"session": session, "owner": "w", "ttl_s": 1})
        assert short.json()["leases"][0]["lead"]["id"] == fifth
        result = await queue.sweep_all(now=datetime.now(UTC) + timedelta(minutes=5))
        assert result.failed == 1
        [expired] = await ended([swept])
        assert expired["status"] == "failed"


async def test_a_batch_across_nodes_ends_watched_leads_and_wakes_their_waiters(
    client: httpx.AsyncClient, citus_url: str
) -> None:
    """One batch of completions with leases on both workers is one statement across nodes,
    committed with two-phase commit: its NOTIFY is sent by the door, so it commits (a NOTIFY
    on a prepared node would fail it) and wakes both waiters."""
    sessions = one_session_per_node(citus_url)
    leases = []
    for session in sessions:
        await pushed(client, session)
        leases.append(await lease(client, session))
    waits = await watched(client, citus_url, [one["lead"]["id"] for one in leases])
    batch = await client.post(
        "/complete/batch",
        json={"items": [{"lead_id": one["lead"]["id"], "token": one["token"]} for one in leases]},
    )
    assert batch.status_code == 200, batch.text
    assert [a["status"] for a in await ended(waits)] == ["done", "done"]


async def test_a_completion_notifies_only_when_someone_waits_on_a_cluster(
    client: httpx.AsyncClient, citus_url: str, citus_cluster: Cluster
) -> None:
    """No NOTIFY of ended leads from the node of a session while no one waits; with a wait,
    one per statement, naming the watched lead."""
    database = make_url(citus_url).database
    assert database is not None
    ports = node_of(citus_url, SESSIONS)
    for session in one_session_per_node(citus_url):
        [node] = [node for node in citus_cluster.workers if node.port == ports[session]]
        with psycopg.connect(node.url(database), autocommit=True) as listen:
            listen.execute(f"LISTEN {ENDED_CHANNEL}")
            unwatched, watched_id = await pushed(client, session, 2)
            alone = await lease(client, session)
            done = {"lead_id": unwatched, "token": alone["token"]}
            assert (await client.post("/complete", json=done)).status_code == 200
            assert list(listen.notifies(timeout=0.3)) == []
            waiting = await watched(client, citus_url, [watched_id])
            seen = await lease(client, session)
            done = {"lead_id": watched_id, "token": seen["token"]}
            assert (await client.post("/complete", json=done)).status_code == 200
            await ended(waiting)
            [notice] = list(listen.notifies(timeout=0.5))
            assert notice.payload == str(watched_id)


async def test_a_worker_node_is_a_door_too(citus_url: str, citus_cluster: Cluster) -> None:
    """An API process given a worker node's URL (Citus syncs its metadata to every node)
    serves every session, and LISTENs on the coordinator and the other worker."""
    database = make_url(citus_url).database
    assert database is not None
    door = citus_cluster.workers[0]
    async with serving(settings_of(door.url(database))) as client:
        await listening(client)
        others = sorted(node.port for node in citus_cluster.nodes if node is not door)
        assert ports_followed(client) == others
        sessions = one_session_per_node(citus_url)
        for session in sessions:
            lead_id, token = await released_to_a_waiter(client, session)
            done = await client.post("/complete", json={"lead_id": lead_id, "token": token})
            assert done.status_code == 200, done.text
            assert (await client.get(f"/leads/{lead_id}")).json()["status"] == "done"
        stats = (await client.get("/stats")).json()
        assert {s: stats["sessions"][s]["done"] for s in sessions} == dict.fromkeys(sessions, 1)
