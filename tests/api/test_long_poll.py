"""Long-poll leasing: a waiting lease wakes on a push, ends empty at wait_s, holds no connection."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import psycopg
import pytest
import uvicorn
from fastapi import FastAPI

from app.api.app import create_app
from app.config import Settings
from tests.api import shapes
from tests.support.in_process import Serve, listening, runtime_of, until, waiters


async def push(client: httpx.AsyncClient, session: str, n: int = 1) -> None:
    leads = [{"payload": {"i": i}} for i in range(n)]
    response = await client.post(f"/sessions/{session}/leads", json={"leads": leads})
    assert response.status_code == 201


async def test_a_waiting_lease_returns_soon_after_a_push(serve: Serve) -> None:
    # The slow poll is off the table (60 s): only the NOTIFY can wake the waiter in time.
    async with serve(poll_interval_s=60) as client:
        await listening(client)
        waiting = asyncio.create_task(
            client.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 20})
        )
        await waiters(client, 1)
        # Another client of the same app, as another worker would be.
        transport = httpx.ASGITransport(app=client.app)  # type: ignore[attr-defined]
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as other:
            await push(other, "s")
        # Not woken, the wait would end empty at 20 s: a lease means the NOTIFY woke it.
        response = await asyncio.wait_for(waiting, timeout=60)
        [lease] = response.json()["leases"]
        shapes.lease(lease, owner="w1")


async def test_a_push_wakes_only_as_many_waiters_as_it_brings_leads(
    serve: Serve, monkeypatch: pytest.MonkeyPatch
) -> None:
    """100 waiters, one lead: one lease statement runs, not 100 (then 3 leads: 3 more)."""
    async with serve(poll_interval_s=60) as client:
        await listening(client)
        sessions = runtime_of(client).leasing.sessions
        statements = answered = 0
        real = sessions.lease

        async def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal statements, answered
            statements += 1
            try:
                return await real(*args, **kwargs)
            finally:
                answered += 1

        monkeypatch.setattr(sessions, "lease", counted)
        body = {"session": "s", "owner": "w", "wait_s": 6}
        waiting = [asyncio.create_task(client.post("/lease", json=body)) for _ in range(100)]
        await waiters(client, 100)
        # Each one's first try has answered (empty), not only started: a first try still
        # running when the lead commits takes it, and the waiter woken for it (none is asleep
        # yet: the oldest) leaves with it, so no 101st statement would ever run.
        await until(lambda: answered == 100)

        await push(client, "s")
        await until(lambda: statements >= 101)
        await asyncio.sleep(0.3)  # time for any other (wrongly) woken waiter to query
        assert statements == 101
        await push(client, "s", 3)
        await until(lambda: statements >= 104)
        await asyncio.sleep(0.3)
        assert statements == 104

        answers = await asyncio.gather(*waiting)
    leases = [lease for answer in answers for lease in answer.json()["leases"]]
    assert len(leases) == 4


async def test_a_push_to_another_session_does_not_wake_the_waiter(serve: Serve) -> None:
    async with serve(poll_interval_s=60) as client:
        await listening(client)
        waiting = asyncio.create_task(
            client.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 1})
        )
        await waiters(client, 1)
        await push(client, "elsewhere")
        response = await asyncio.wait_for(waiting, timeout=5)
        assert response.json() == {"leases": []}


async def test_without_work_a_waiting_lease_ends_empty_after_wait_s(
    client: httpx.AsyncClient,
) -> None:
    started = time.monotonic()
    response = await client.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 1})
    elapsed = time.monotonic() - started
    assert response.status_code == 200
    assert response.json() == {"leases": []}
    assert elapsed >= 0.9  # it did wait (how long past wait_s is the machine's, not ours)
    assert runtime_of(client).listener.waiters == 0


async def test_the_slow_poll_finds_work_without_a_notify(serve: Serve) -> None:
    """A lead that becomes available by its delay sends no NOTIFY; the slow poll finds it."""
    async with serve(poll_interval_s=0.2) as client:
        response = await client.post(
            "/sessions/s/leads", json={"leads": [{"payload": {}, "delay_s": 0.5}]}
        )
        assert response.status_code == 201
        # No NOTIFY comes: without the slow poll this wait would end empty.
        leased = await client.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 30})
        assert len(leased.json()["leases"]) == 1


async def test_waiters_still_wake_when_the_listener_cannot_connect(serve: Serve) -> None:
    async with serve(
        listen_database_url="postgresql://postgres@127.0.0.1:1/nowhere", poll_interval_s=0.2
    ) as client:
        waiting = asyncio.create_task(
            client.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 5})
        )
        await waiters(client, 1)
        assert not runtime_of(client).listener.connected
        await push(client, "s")
        response = await asyncio.wait_for(waiting, timeout=2)
        assert len(response.json()["leases"]) == 1


async def test_many_waiters_hold_no_pooled_connection(serve: Serve) -> None:
    async with serve(pool_size=5) as client:
        await listening(client)
        tasks = [
            asyncio.create_task(
                client.post("/lease", json={"session": "hot", "owner": f"w{i}", "wait_s": 10})
            )
            for i in range(200)
        ]
        await waiters(client, 200)
        # Once their first lease has answered, the waiters hold no connection at all.
        db = runtime_of(client).db
        await until(lambda: db.stats().checked_out == 0)

        # The pool (5 connections) is free for everyone else meanwhile (not a 503 after the
        # pool's timeout).
        stats = await client.get("/sessions/hot/stats")
        assert stats.status_code == 200
        assert runtime_of(client).listener.waiters == 200

        # 200 leads for 200 waiters: each lead handed out exactly once.
        await push(client, "hot", 200)
        responses = await asyncio.wait_for(asyncio.gather(*tasks), timeout=15)
        assert all(r.status_code == 200 for r in responses)
        ids = [lease["lead"]["id"] for r in responses for lease in r.json()["leases"]]
        assert len(ids) == 200 and len(set(ids)) == 200
        shapes.counts((await client.get("/sessions/hot/stats")).json(), leased=200)


async def test_waiters_beyond_the_bound_get_503(serve: Serve) -> None:
    async with serve(max_waiters=2) as client:
        body = {"session": "s", "owner": "w1", "wait_s": 2}
        held = [asyncio.create_task(client.post("/lease", json=body)) for _ in range(2)]
        await waiters(client, 2)
        refused = await client.post("/lease", json=body)
        shapes.problem(refused, 503, "unavailable")
        # A lease that does not wait needs no slot.
        immediate = await client.post("/lease", json=body | {"wait_s": 0})
        assert immediate.status_code == 200
        for task in held:
            task.cancel()
        await asyncio.gather(*held, return_exceptions=True)


async def test_shutdown_ends_waiting_leases_at_once(api_settings: Settings) -> None:
    app = create_app(api_settings)
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://leaseq.test") as client:
        async with app.router.lifespan_context(app):
            client.app = app  # type: ignore[attr-defined]
            waiting = asyncio.create_task(
                client.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 30})
            )
            await waiters(client, 1)
        # Ended by the shutdown, not by the end of its 30 s wait.
        response = await asyncio.wait_for(waiting, timeout=15)
        assert response.status_code == 200
        assert response.json() == {"leases": []}


@asynccontextmanager
async def uvicorn_serving(app: FastAPI) -> AsyncIterator[tuple[uvicorn.Server, str]]:
    """The app behind a real uvicorn in this process; yields the server and its URL."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, lifespan="on", log_level="warning", ws="none", http="h11")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        await until(lambda: server.started)
        yield server, "http://{}:{}".format(*sock.getsockname())
    finally:
        server.should_exit = True
        await serving
        sock.close()


async def test_a_client_that_hangs_up_while_waiting_takes_no_lead(api_settings: Settings) -> None:
    """A worker killed mid-poll must not leave a lead leased to nobody."""
    app = create_app(api_settings.model_copy(update={"poll_interval_s": 0.2}))
    async with uvicorn_serving(app) as (_, url):
        async with httpx.AsyncClient(base_url=url) as worker:
            poll = asyncio.create_task(
                worker.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 10})
            )
            await until(lambda: app.state.runtime.listener.waiters == 1)
            poll.cancel()  # the connection closes mid-request
            with contextlib.suppress(asyncio.CancelledError):
                await poll
        async with httpx.AsyncClient(base_url=url) as producer:
            await push(producer, "s")
            await until(lambda: app.state.runtime.listener.waiters == 0)
            stats = (await producer.get("/sessions/s/stats")).json()
            shapes.counts(stats, queued=1)


# How a worker asks, without waiting: a lease (of one session, or across sessions), and a
# completion whose ``next`` leases (alone, or for a batch).
UNWAITED: dict[str, Any] = {
    "lease": ("/lease", {"session": "s", "owner": "w1"}),
    "lease across sessions": ("/lease", {"sessions": ["s"], "owner": "w1"}),
    "complete with next": ("/complete", {"next": {"session": "s", "owner": "w1"}}),
    "complete a batch with next": ("/complete/batch", {"next": {"session": "s", "owner": "w1"}}),
}


@pytest.mark.parametrize("asked", list(UNWAITED))
async def test_a_client_gone_before_its_lease_is_answered_takes_no_lead(
    api_settings: Settings, database_url: str, asked: str
) -> None:
    """No lead is leased to nobody when the client hangs up while the lease's statement runs,
    waiting or not: its statement held back behind a lock on ``leads``, the client closes
    its connection, and the leads the statement then takes are given back at once."""
    path, body = UNWAITED[asked]
    app = create_app(api_settings)
    async with uvicorn_serving(app) as (server, url):
        async with httpx.AsyncClient(base_url=url) as producer:
            if path != "/lease":  # a lease to complete first
                await push(producer, "s")
                answer = await producer.post("/lease", json={"session": "s", "owner": "w1"})
                [held] = answer.json()["leases"]
                item = {"lead_id": held["lead"]["id"], "token": held["token"]}
                body = body | item if path == "/complete" else body | {"items": [item]}
            await push(producer, "s")
        with psycopg.connect(database_url) as lock:
            lock.execute("LOCK TABLE leads IN EXCLUSIVE MODE")
            async with httpx.AsyncClient(base_url=url) as worker:
                sent = asyncio.create_task(worker.post(path, json=body))

                def held_back() -> bool:
                    with psycopg.connect(database_url, autocommit=True) as look:
                        rows = look.execute(
                            "SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
                            " AND datname = current_database()"
                        ).fetchall()
                    return bool(rows)

                await until(held_back, within_s=30)
                sent.cancel()  # the connection closes before the answer
                with contextlib.suppress(asyncio.CancelledError):
                    await sent
            await until(lambda: not server.server_state.connections, within_s=30)
            lock.commit()  # the statement runs now, for a client that is gone

        def given_back() -> bool:
            with psycopg.connect(database_url, autocommit=True) as look:
                [[released, leased]] = look.execute(
                    "SELECT (SELECT count(*) FROM lead_events WHERE event = 'released'),"
                    " (SELECT count(*) FROM leads WHERE status = 'leased')"
                ).fetchall()
            return bool(released == 1 and leased == 0)

        await until(given_back, within_s=30)
        async with httpx.AsyncClient(base_url=url) as producer:
            stats = (await producer.get("/sessions/s/stats")).json()
    assert stats["leased"] == 0 and stats["queued"] == 1, stats


async def test_sigterm_ends_waiting_leases_before_the_server_drains(
    api_settings: Settings,
) -> None:
    """uvicorn waits for open requests before the lifespan shutdown; SIGTERM must not wait 20 s."""
    received: list[int] = []

    def test_handler(signum: int, frame: object) -> None:
        received.append(signum)  # uvicorn re-raises the signal once it has stopped

    before = signal.signal(signal.SIGTERM, test_handler)
    try:
        app = create_app(api_settings)
        async with uvicorn_serving(app) as (server, url), httpx.AsyncClient(base_url=url) as worker:
            poll = asyncio.create_task(
                worker.post("/lease", json={"session": "s", "owner": "w1", "wait_s": 20})
            )
            await until(lambda: app.state.runtime.listener.waiters == 1)
            os.kill(os.getpid(), signal.SIGTERM)  # uvicorn's handler, with ours in front
            response = await asyncio.wait_for(poll, timeout=2)
            assert response.json() == {"leases": []}
            await until(lambda: server.should_exit)
        assert signal.getsignal(signal.SIGTERM) is test_handler  # every handler restored
        assert received == [signal.SIGTERM]
    finally:
        signal.signal(signal.SIGTERM, before)
