"""Long polls on the cluster: the listener follows every node, where statements notify.

A release, a sweep or a completion runs on the worker node that holds its session's
shard, and so does its ``pg_notify``. With the slow poll off (60 s), only a
notification heard on that node can wake the waiter within its wait: the sessions
below lie on both workers, so each node's listener is proven.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.config import Settings
from tests.citus.cluster import Cluster, node_of
from tests.support.in_process import listening, runtime_of, serving, until, waiters

SESSIONS = [f"s{i}" for i in range(8)]


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


async def test_a_wait_for_an_outcome_ends_at_its_poll_on_a_cluster(citus_url: str) -> None:
    """No notification of an ended lead on a cluster (docs/scaling.md, "Long polls on a
    cluster"): the wait ends at its poll. The release that ends a watched lead on its last
    attempt runs before the queue knows it is sharded, so on every shard of both workers:
    it commits (two-phase), where a notification from a shard's trigger would have failed
    it."""
    sessions = one_session_per_node(citus_url)
    async with serving(settings_of(citus_url, poll_interval_s=0.2)) as client:
        listener = runtime_of(client).listener
        for session, end in zip(sessions, ("release", "complete"), strict=True):
            pushed = await client.post(
                f"/sessions/{session}/leads", json={"leads": [{"payload": {}, "max_attempts": 1}]}
            )
            [lead_id] = pushed.json()["ids"]
            [lease] = (await client.post("/lease", json={"session": session, "owner": "w"})).json()[
                "leases"
            ]
            waiting = asyncio.create_task(client.get(f"/leads/{lead_id}?wait_s=20"))
            await until(lambda: listener.outcome_waiters >= 1)
            ended = await client.post(f"/{end}", json={"lead_id": lead_id, "token": lease["token"]})
            assert ended.status_code == 200, ended.text
            answer = await asyncio.wait_for(waiting, timeout=15)
            assert answer.json()["status"] == ("failed" if end == "release" else "done")


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
