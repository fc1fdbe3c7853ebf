"""A worker node of the cluster stops while work runs: the sessions whose shards it holds
answer Unavailable (503 over HTTP) at once, never another error and never a hang; the
sessions of the other node keep leasing; once the node is back every lead ends once, by
one lease. With the ledger on and off: on, each statement's ledger rows are written on its
lead's shard by the row trigger of revision 0016, so a lease reaches no other node
(docs/scaling.md, "The ledger on a cluster"), and the ledger shows each completion once."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.domain.report import report
from app.domain.schedules import Schedules, tick_key
from app.domain.timeline import timeline
from app.store.pool import Database
from leaseq import push_in
from leaseq.errors import LeaseLost, NotFound, Unavailable
from leaseq.model import NewLead
from tests.citus.cluster import Cluster, node_of
from tests.support import leasing_of
from tests.support.in_process import listening, serving

SESSIONS = 8
PER_SESSION = 25
WORKERS = 6
TTL_S = 5.0  # outlasts the outage; a lease it orphaned (its answer lost) comes back after
DEADLINE_S = 90.0


@pytest.mark.slow
@pytest.mark.parametrize("ledger", [False, True])
async def test_a_stopped_worker_node_costs_only_its_sessions(
    db: Database, database_url: str, citus_cluster: Cluster, ledger: bool
) -> None:
    queue = Queue(db, ledger=ledger)
    sessions = [f"s{n}" for n in range(SESSIONS)]
    nodes = node_of(database_url, sessions)
    stopped = citus_cluster.workers[0]
    down = {session for session, port in nodes.items() if port == stopped.port}
    assert down and len(down) < SESSIONS  # sessions on both nodes
    for session in sessions:
        await queue.push(session, [NewLead(payload={"n": n}) for n in range(PER_SESSION)])

    outage = asyncio.Event()
    quarter_done = asyncio.Event()
    answers: Counter[tuple[str, str]] = Counter()  # (session, "ok" | "unavailable")
    completed: Counter[str] = Counter()
    done_by: defaultdict[int, set[str]] = defaultdict(set)  # each lead's completed leases
    leasing = leasing_of(queue)

    async def settle(session: str, lead_id: int, token: str) -> bool:
        """Complete a lease; False when its node is down (the worker sends it again later,
        as an SDK does, and meanwhile works for the other sessions)."""
        try:
            await queue.complete(lead_id, token)
        except Unavailable:
            answers[session, "unavailable"] += 1
            return False
        except LeaseLost:  # it expired while its node was down: swept, leased again
            return True
        if token not in done_by[lead_id]:  # not the same completion answered again
            done_by[lead_id].add(token)
            completed[session] += 1
        if sum(completed.values()) >= SESSIONS * PER_SESSION // 4:
            quarter_done.set()
        return True

    async def work(i: int) -> None:
        mine = sessions[i % SESSIONS :] + sessions[: i % SESSIONS]
        pending: list[tuple[str, int, str]] = []
        deadline = time.monotonic() + DEADLINE_S
        while sum(completed.values()) < SESSIONS * PER_SESSION:
            assert time.monotonic() < deadline, (completed, answers)
            pending = [one for one in pending if not await settle(*one)]
            took = 0
            for session in mine:
                try:
                    leases = await leasing.lease_next(session, f"w{i}", max=2, ttl_s=TTL_S)
                except Unavailable:
                    answers[session, "unavailable"] += 1
                    continue
                answers[session, "ok"] += 1
                for lease in leases:
                    if not await settle(session, lease.lead.id, lease.token):
                        pending.append((session, lease.lead.id, lease.token))
                took += len(leases)
            if not took:
                with contextlib.suppress(Unavailable):
                    await queue.sweep_all()  # leases the outage orphaned
                await asyncio.sleep(0.05)

    async def outage_of_one_node() -> None:
        await quarter_done.wait()
        await asyncio.to_thread(citus_cluster.stop_node, stopped)
        outage.set()
        before = {session: completed[session] for session in sessions}
        try:
            await asyncio.sleep(1.5)  # the outage: the other node's sessions go on meanwhile
            up = [session for session in sessions if session not in down]
            # The other node's sessions kept going while this one was down.
            assert sum(completed[s] for s in up) > sum(before[s] for s in up), (
                completed,
                answers,
                down,
            )
        finally:
            await asyncio.to_thread(citus_cluster.start_node, stopped)

    ran = await asyncio.gather(
        outage_of_one_node(), *(work(i) for i in range(WORKERS)), return_exceptions=True
    )
    if stopped.process is None or stopped.process.poll() is not None:
        citus_cluster.start_node(stopped)  # for the tests after, whatever failed here
    for failure in ran:
        if isinstance(failure, BaseException):
            raise failure

    assert outage.is_set()
    assert {session for session, kind in answers if kind == "unavailable"} <= down
    assert any(answers[session, "unavailable"] for session in down)
    assert len(done_by) == SESSIONS * PER_SESSION
    assert all(len(tokens) == 1 for tokens in done_by.values())  # each lead done by one lease
    for session in sessions:
        assert (await queue.stats(session)).done == PER_SESSION
        if ledger:  # written on each lead's shard, through the outage
            found = await report(queue, session)
            assert (found.completed, found.double_completions) == (PER_SESSION, 0), session


@pytest.mark.slow
def test_a_push_in_the_producers_transaction_needs_only_its_sessions_node(
    database_url: str, citus_cluster: Cluster
) -> None:
    """``leaseq_push`` is one insert routed to its session's shard (revision 0017), its
    ledger row written there: with the other worker node stopped it commits, and a push to
    the stopped node's session fails alone."""
    nodes = node_of(database_url, [f"s{n}" for n in range(SESSIONS)])
    stopped = citus_cluster.workers[0]
    up = next(session for session, port in nodes.items() if port != stopped.port)
    down = next(session for session, port in nodes.items() if port == stopped.port)
    citus_cluster.stop_node(stopped)
    try:
        with psycopg.connect(database_url) as conn:
            lead_id = push_in(conn, up, {"n": 1})
            conn.commit()
            with pytest.raises(psycopg.OperationalError):
                push_in(conn, down, {"n": 2})
            conn.rollback()
    finally:
        citus_cluster.start_node(stopped)
    with psycopg.connect(database_url) as conn:
        found = conn.execute("SELECT id, session FROM leads").fetchall()
        ledger = conn.execute("SELECT lead_id, event FROM lead_events").fetchall()
    assert found == [(lead_id, up)]
    assert ledger == [(lead_id, "pushed")]


@pytest.mark.slow
async def test_a_stopped_worker_node_holds_up_only_its_sessions_schedules(
    db: Database, database_url: str, citus_cluster: Cluster
) -> None:
    """A tick's lead is pushed to its session's shard before the tick is moved on in the
    reference table ``schedules``, which needs every node: with a worker stopped, the other
    node's schedule still pushes each tick once (found by its key at each look after), the
    stopped node's schedule waits, and once the node is back both move on."""
    nodes = node_of(database_url, [f"s{n}" for n in range(SESSIONS)])
    stopped = citus_cluster.workers[0]
    up = next(session for session, port in nodes.items() if port != stopped.port)
    down = next(session for session, port in nodes.items() if port == stopped.port)
    schedules = Schedules(db)
    start = datetime(2030, 1, 1, tzinfo=UTC)
    for session in (up, down):
        await schedules.put(session, session, "*/5 * * * *", "UTC", {"payload": {}}, now=start)

    at = {minute: start + timedelta(minutes=minute, seconds=1) for minute in (5, 10)}
    citus_cluster.stop_node(stopped)
    try:
        assert await schedules.tick(now=at[5]) == []  # pushed, not moved on: no node for that
        assert await schedules.tick(now=at[5]) == []
        assert await schedules.tick(now=at[10]) == []
    finally:
        citus_cluster.start_node(stopped)
    with psycopg.connect(database_url) as conn:
        pushed = conn.execute("SELECT session, key FROM leads ORDER BY id").fetchall()
    ticks = [start + timedelta(minutes=minute) for minute in (5, 10)]
    assert pushed == [(up, tick_key(up, tick)) for tick in ticks]
    moved = await schedules.tick(now=at[10])
    assert sorted((t.name, t.tick) for t in moved) == [
        (name, start + timedelta(minutes=10)) for name in sorted((up, down))
    ]
    with psycopg.connect(database_url) as conn:
        pushed = conn.execute("SELECT session, key FROM leads ORDER BY id").fetchall()
    assert sorted(pushed) == sorted(
        [*((up, tick_key(up, t)) for t in ticks), (down, tick_key(down, ticks[1]))]
    )
    for session in (up, down):
        assert (await schedules.get(session)).next_tick == start + timedelta(minutes=15)


@pytest.mark.slow
async def test_calls_by_lead_id_answer_for_the_leads_of_the_other_nodes_sessions(
    db: Database, database_url: str, citus_cluster: Cluster
) -> None:
    """With a worker node stopped, a lead of the other node's session is read, shown on its
    page, cancelled, retried and located for a scoped token as before: its session is found
    node by node, then the statement is routed there. A lead the stopped node may hold
    answers Unavailable, and once every node answers, an id no node has is NotFound."""
    queue = Queue(db)
    await queue.sweep_all()  # the service's boot sweep (the queue knew it is sharded already)
    assert queue.sharded
    nodes = node_of(database_url, [f"s{n}" for n in range(SESSIONS)])
    stopped = citus_cluster.workers[0]
    up = next(session for session, port in nodes.items() if port != stopped.port)
    down = next(session for session, port in nodes.items() if port == stopped.port)
    first, second = (await queue.push(up, [NewLead({"n": 1}), NewLead({"n": 2})])).ids
    [elsewhere] = (await queue.push(down, [NewLead({"n": 3})])).ids
    nowhere = max(first, second, elsewhere) + 1000
    citus_cluster.stop_node(stopped)
    try:
        assert (await queue.get(first)).session == up
        assert (await timeline(queue, first)).lead.id == first
        assert (await queue.cancel(first)).status == "failed"
        assert (await queue.retry(first)).status == "queued"
        assert await queue.sessions_of([first, second]) == {first: up, second: up}
        for call in (queue.get, queue.cancel, queue.retry):
            with pytest.raises(Unavailable, match="out of reach"):
                await call(elsewhere)
        with pytest.raises(Unavailable):
            await queue.sessions_of([first, elsewhere])
        with pytest.raises(Unavailable):
            await queue.get(nowhere)  # the stopped node may hold it
    finally:
        citus_cluster.start_node(stopped)
    assert (await queue.get(elsewhere)).session == down
    with pytest.raises(NotFound):
        await queue.get(nowhere)
    with pytest.raises(NotFound):
        await queue.cancel(nowhere)


@pytest.mark.slow
async def test_over_http_a_lead_and_its_outcome_answer_while_another_node_is_stopped(
    citus_url: str, citus_cluster: Cluster
) -> None:
    """``GET /leads/{id}``, with and without a wait for its outcome, for a lead of the other
    node's session: 200 while a worker node is stopped (the wait's watch, a row of every
    node, cannot be written: the wait goes on at the poll); 503 for a lead of the stopped
    node's session."""
    settings = Settings(
        database_url=citus_url,
        api_tokens="",
        allowed_hosts="leaseq.test",
        sweep_interval_s=3600,
        poll_interval_s=0.2,
    )
    nodes = node_of(citus_url, [f"s{n}" for n in range(SESSIONS)])
    stopped = citus_cluster.workers[0]
    up = next(session for session, port in nodes.items() if port != stopped.port)
    down = next(session for session, port in nodes.items() if port == stopped.port)
    async with serving(settings) as client:
        await listening(client)
        pushed = []
        for session in (up, down):
            answer = await client.post(
                f"/sessions/{session}/leads", json={"leads": [{"payload": {}}]}
            )
            pushed += answer.json()["ids"]
        lead, other = pushed
        citus_cluster.stop_node(stopped)
        try:
            assert (await client.get(f"/leads/{lead}")).json()["session"] == up
            waiting = asyncio.create_task(client.get(f"/leads/{lead}", params={"wait_s": 10}))
            leased = await client.post("/lease", json={"session": up, "owner": "w"})
            [lease] = leased.json()["leases"]
            done = {"lead_id": lead, "token": lease["token"], "result": {"ok": True}}
            assert (await client.post("/complete", json=done)).status_code == 200
            answered = await asyncio.wait_for(waiting, 10)
            assert (answered.status_code, answered.json()["status"]) == (200, "done")
            unreachable = await client.get(f"/leads/{other}")
            assert unreachable.status_code == 503
            assert unreachable.json()["code"] == "unavailable"
        finally:
            citus_cluster.start_node(stopped)
        assert (await client.get(f"/leads/{other}")).json()["session"] == down
