"""The service's Queue on a Citus cluster: what runs today (docs/scaling.md, "What runs on
Citus today"). A test marked xfail names the error that stops it; it fails (strict) once the
statement runs, so the marker goes with the fix."""

from __future__ import annotations

import asyncio
from typing import Any

import psycopg
import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.domain.report import report
from app.leasing.request import LeaseRequest
from app.store.pool import Database
from leaseq import push_in
from leaseq.errors import LeaseLost, NotFound
from leaseq.model import CompleteItem, NewLead, SessionSettings
from tests.citus.cluster import node_of
from tests.support import T0, at, leasing_of


def _ledger(database_url: str) -> list[tuple[int, str]]:
    with psycopg.connect(database_url, autocommit=True) as conn:
        rows = conn.execute("SELECT lead_id, event FROM lead_events ORDER BY id").fetchall()
    return [(lead_id, event) for lead_id, event in rows]


async def test_stats_of_a_session(queue: Queue, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO leads (session) VALUES ('s'), ('s'), ('t')")
    assert (await queue.stats("s")).queued == 2
    assert (await queue.stats("t")).queued == 1
    assert await queue.settings_all() == {}


async def test_push_lease_and_release_in_one_session(queue: Queue, database_url: str) -> None:
    """Each statement runs on the session's shard and writes its ledger rows there: the
    lease numbers its leads in order, a release puts one back, the next lease takes it."""
    pushed = await queue.push("s", [NewLead(payload={"n": n}) for n in range(3)])
    leasing = leasing_of(queue)
    leases = await leasing.lease_next("s", "w", max=2)
    assert [lease.lead.id for lease in leases] == pushed.ids[:2]
    assert len({lease.token for lease in leases}) == 2
    assert all(lease.lead.status == "leased" and lease.lead.owner == "w" for lease in leases)

    back = await queue.release(leases[0].lead.id, leases[0].token)
    assert back.status == "queued"
    again = await leasing.lease_next("s", "v", max=2)
    assert [lease.lead.id for lease in again] == [pushed.ids[0], pushed.ids[2]]
    assert again[0].lead.attempts == 2

    first, second, third = pushed.ids
    assert sorted(_ledger(database_url)) == sorted(
        [
            *[(first, "pushed"), (second, "pushed"), (third, "pushed")],
            *[(first, "leased"), (second, "leased"), (first, "released")],
            *[(first, "leased"), (third, "leased")],
        ]
    )
    counts = await queue.stats("s")
    assert (counts.queued, counts.leased) == (0, 3)


async def test_a_push_wakes_a_listener_on_the_coordinator(queue: Queue, database_url: str) -> None:
    """The push's notification is sent where the statement's results meet, the coordinator,
    which is where an API process connected to it listens."""
    with psycopg.connect(database_url, autocommit=True) as listener:
        listener.execute("LISTEN leaseq_queued")
        await queue.push("s", [NewLead(payload={}) for _ in range(3)])
        heard = [notify.payload for notify in listener.notifies(timeout=2, stop_after=1)]
    assert heard == ["s 3"]


async def test_flow_control_in_one_session(queue: Queue) -> None:
    """Pause, resume, a throttled release and a cap, each on the session's shard."""
    leasing = leasing_of(queue)
    await queue.push("s", [NewLead(payload={"n": n}) for n in range(3)])
    await queue.pause("s")
    assert await leasing.lease_next("s", "w") == []
    await queue.resume("s")
    [lease] = await leasing.lease_next("s", "w")

    await queue.release(lease.lead.id, lease.token, throttle_s=60)
    assert (await queue.settings("s")).paused_until is not None
    assert await leasing.lease_next("s", "w") == []
    await queue.resume("s")

    await queue.put_settings("s", SessionSettings(max_leased=1))
    assert len(await leasing.lease_next("s", "w", max=3)) == 1
    assert (await queue.stats("s")).leased == 1


async def test_cancel_and_retry(queue: Queue) -> None:
    pushed = await queue.push("s", [NewLead(payload={})])
    [lead_id] = pushed.ids
    assert (await queue.cancel(lead_id)).status == "failed"
    assert (await queue.retry(lead_id)).status == "queued"
    [lease] = await leasing_of(queue).lease_next("s", "w")
    assert lease.lead.id == lead_id


async def test_renewals_and_completions_run_on_their_sessions_shard(
    queue: Queue, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lock by lead id alone spans shards, which Citus refuses: the queue, which read from
    the catalog that it runs on a cluster before its first statement, groups renewals and
    completions by the session their tokens carry, and each group's statement names it, so
    it runs on that session's shard, from the first one on."""
    sent: list[tuple[str, Any]] = []
    rows = queue._rows

    async def watched(query: str, params: Any) -> Any:
        sent.append((query, params))
        return await rows(query, params)

    monkeypatch.setattr(queue, "_rows", watched)
    pushed = await queue.push("s", [NewLead(payload={}) for _ in range(3)])
    leases = await leasing_of(queue).lease_next("s", "w", max=3)
    assert queue.sharded  # known when the pool first connected, never learned from a refusal
    sent.clear()
    renewed = await queue.renew(leases[0].lead.id, leases[0].token, 120)
    assert renewed.ttl_s == 120
    done = await queue.complete(leases[0].lead.id, leases[0].token, result={"ok": 1})
    assert (done.status, done.result) == ("done", {"ok": 1})
    again = await queue.complete(leases[0].lead.id, leases[0].token, result={"ok": 1})
    assert again.status == "done"  # the same completion, sent again
    answers = await queue.complete_many(
        [CompleteItem(lease.lead.id, lease.token) for lease in leases[1:]]
        + [CompleteItem(leases[1].lead.id, leases[1].token.replace("~s", "~t"))]
    )
    assert [answer.ok for answer in answers] == [True, True, False]
    with pytest.raises(LeaseLost):
        await queue.renew(leases[1].lead.id, leases[1].token, 30)
    routed = [params for query, params in sent if "l.session = %(session)s" in query]
    assert routed and all(params["session"] == "s" for params in routed)
    events = [event for lead_id, event in _ledger(database_url) if lead_id in pushed.ids]
    assert events.count("completed") == 3
    assert (await queue.stats("s")).done == 3


async def test_a_completion_with_next_on_the_cluster(queue: Queue, database_url: str) -> None:
    """``complete`` with ``next`` in one statement (keyed or not) on the cluster, routed to the
    session's shard, the ledger written there by the row trigger (revision 0016)."""
    first, second, third = (await queue.push("s", [NewLead(payload={}) for _ in range(3)])).ids
    assert queue.sharded
    leasing = leasing_of(queue)
    [lease] = await leasing.lease_next("s", "w")
    for key in (None, "k1"):
        request = LeaseRequest.checked("w", session="s", max=1, idempotency_key=key)
        item = CompleteItem(lease.lead.id, lease.token)
        lead, leases = await leasing.complete_and_lease(item, request)
        assert lead.status == "done" and len(leases) == 1
        [lease] = leases
    assert (await queue.stats("s")).done == 2
    assert _ledger(database_url) == [
        *[(first, "pushed"), (second, "pushed"), (third, "pushed")],
        *[(first, "leased"), (first, "completed"), (second, "leased")],
        *[(second, "completed"), (third, "leased")],
    ]


def test_a_push_in_the_producers_transaction(database_url: str) -> None:
    """``leaseq_push`` on the coordinator: the lead and its ledger row commit or roll back
    with the producer's transaction, on the session's shard."""
    with psycopg.connect(database_url) as conn:
        push_in(conn, "s", {"dropped": True})
        conn.rollback()
        lead_id = push_in(conn, "s", {"kept": True}, key="k")
        assert push_in(conn, "s", {}, key="k") == lead_id
        conn.commit()
        found = conn.execute("SELECT id, payload FROM leads").fetchall()
        ledger = conn.execute("SELECT lead_id, event FROM lead_events").fetchall()
    assert found == [(lead_id, {"kept": True})]
    assert ledger == [(lead_id, "pushed")]


SESSIONS = 20
PER_SESSION = 15
WORKERS = 16


async def _work(queue: Queue, owner: str, sessions: list[str]) -> int:
    """Lease from each session in turn, complete what was leased; until every one is empty."""
    done = 0
    leasing = leasing_of(queue)
    while True:
        took = 0
        for session in sessions:
            for lease in await leasing.lease_next(session, owner, max=2):
                await queue.complete(lease.lead.id, lease.token, result={"by": owner})
                took += 1
        if not took:
            return done
        done += took


async def test_workers_over_sessions_on_both_nodes_lease_each_lead_once(
    queue: Queue, database_url: str, settings: Settings
) -> None:
    """16 workers of two API processes over 20 sessions, whose shards lie on both worker
    nodes: every lead leased and completed once, the ledger of each session clean."""
    sessions = [f"s{n}" for n in range(SESSIONS)]
    assert len(set(node_of(database_url, sessions).values())) == 2  # on both workers
    for session in sessions:
        await queue.push(session, [NewLead(payload={"n": n}) for n in range(PER_SESSION)])
    async with Database.from_settings(settings, database_url) as other_db:
        queues = [queue, Queue(other_db)]
        done = await asyncio.gather(
            *(
                _work(queues[i % 2], f"w{i}", sessions[i % SESSIONS :] + sessions[: i % SESSIONS])
                for i in range(WORKERS)
            )
        )
    assert sum(done) == SESSIONS * PER_SESSION
    for session in sessions:
        found = await report(queue, session)
        assert (found.leads, found.completed, found.leases) == (PER_SESSION,) * 3, session
        assert found.double_completions == 0 and found.overlapping_leases == 0, session
        assert (await queue.stats(session)).done == PER_SESSION


async def test_the_upkeep_of_every_session_runs_session_by_session(
    queue: Queue, database_url: str
) -> None:
    """Sweep, promote, the counts and the fleet's view across sessions on both worker nodes:
    a locking read across shards would be refused, so each session's runs on its shard."""
    sessions = [f"s{n}" for n in range(6)]
    for session in sessions:
        await queue.push(session, [NewLead(payload={}), NewLead(payload={}, delay_s=5)], now=T0)
    leasing = leasing_of(queue)
    for session in sessions:
        await leasing.lease_next(session, "w", ttl_s=10, now=T0)
    assert (await queue.available(now=at(1))) == {}  # the ready ones are leased

    assert await queue.promote(now=at(6)) == len(sessions)
    assert queue.sharded
    assert set(await queue.available(now=at(6))) == set(sessions)
    swept = await queue.sweep_all(now=at(11))
    assert (swept.requeued, swept.failed) == (len(sessions), 0)
    everything = await queue.stats_all(now=at(11))
    assert {name: counts.queued for name, counts in everything.sessions.items()} == {
        session: 2 for session in sessions
    }
    await queue.fold_counts()
    with psycopg.connect(database_url, autocommit=True) as conn:
        slots = conn.execute("SELECT count(*) FROM lead_counts WHERE slot <> 0").fetchone()
    assert slots == (0,)
    assert (await queue.stats_all(now=at(11))).total.queued == 2 * len(sessions)
    assert await queue.prune_keys(0) == 0
    assert [event for _, event in _ledger(database_url)].count("expired") == len(sessions)
    for session in sessions:
        assert (await queue.stats(session, now=at(11))).queued == 2


async def test_prune_of_every_session_runs_session_by_session(
    queue: Queue, database_url: str
) -> None:
    """Retention across sessions on both worker nodes: a locking read across shards would be
    refused, so each session with terminal leads is pruned on its shard."""
    sessions = [f"s{n}" for n in range(6)]
    leasing = leasing_of(queue)
    for session in sessions:
        await queue.push(session, [NewLead(payload={}), NewLead(payload={})], now=T0)
        [lease] = await leasing.lease_next(session, "w", now=T0)
        await queue.complete(lease.lead.id, lease.token, now=T0)
    assert await queue.prune(60, now=at(30)) == 0  # not old enough
    assert await queue.prune(60, now=at(61)) == len(sessions)
    assert queue.sharded
    for session in sessions:
        counts = await queue.stats(session, now=at(61))
        assert (counts.done, counts.queued) == (0, 1), session
    assert {event for _, event in _ledger(database_url)} == {"pushed"}


async def test_completions_with_next_sent_together_go_alone_on_a_cluster(queue: Queue) -> None:
    """Keyed completions with next sent at once would share one statement (lease_together,
    one PostgreSQL only): on the cluster each call goes alone, routed; every lead completed
    once and every caller leased its next."""
    await queue.push("s", [NewLead(payload={}) for _ in range(8)])
    leasing = leasing_of(queue)
    held = await leasing.lease_next("s", "w", max=4)
    assert queue.sharded
    answers = await asyncio.gather(
        *(
            leasing.complete_and_lease(
                CompleteItem(lease.lead.id, lease.token),
                LeaseRequest.checked("w", session="s", idempotency_key=f"k{i}"),
            )
            for i, lease in enumerate(held)
        )
    )
    assert queue.sharded
    assert [lead.id for lead, _ in answers] == [lease.lead.id for lease in held]
    assert all(len(leases) == 1 for _, leases in answers)
    counts = await queue.stats("s")
    assert (counts.done, counts.leased) == (4, 4)


async def test_lookups_of_lead_sessions_that_arrive_together_share_one_ask_of_the_nodes(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a cluster a call by lead id first asks every node for the lead's session: the
    lookups that arrive together (a crowd waiting on a few leads' outcomes) share that ask,
    and each answers for its own lead: the leads found are read, an id no node has is
    NotFound."""
    ids = (await queue.push("s", [NewLead(payload={}) for _ in range(3)])).ids
    ids += (await queue.push("t", [NewLead(payload={}) for _ in range(2)])).ids
    await queue.sweep_all()  # the service's boot sweep (the queue knew it is sharded already)
    assert queue.sharded
    sent: list[str] = []
    rows = queue._rows

    async def watched(query: str, params: Any) -> Any:
        sent.append(query)
        return await rows(query, params)

    monkeypatch.setattr(queue, "_rows", watched)
    nowhere = max(ids) + 1000
    answers = await asyncio.gather(
        *(queue.get(lead_id) for lead_id in ids * 20),
        queue.get(nowhere),
        return_exceptions=True,
    )
    assert isinstance(answers[-1], NotFound)
    found = answers[:-1]
    assert [lead.id for lead in found if not isinstance(lead, BaseException)] == ids * 20
    asks = [query for query in sent if "master_run_on_worker" in query]
    assert 1 <= len(asks) <= 2, len(asks)
