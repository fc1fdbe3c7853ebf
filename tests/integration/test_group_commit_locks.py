"""Group commit with a lead's row held by a transaction outside leaseq (an operator's
``SELECT … FOR UPDATE`` in psql, a long migration, a stuck backup).

The grouped statements skip a row another transaction holds and send its items again alone,
so only the caller of that lead waits: every other renewal and completion, of its session
and of others, is answered while the lock is still held. The lock is released only after
they all answered, so a stall fails the test by its deadline, never by a timing figure.
Every call here runs on the database clock (no injected ``now``): one lane per kind, as in
production.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import httpx
import psycopg
import pytest

from app.config import Settings
from app.domain.queue import HELD_ROWS_POOL_SHARE, Queue
from app.store.pool import Database, libpq_url
from leaseq.errors import LeaseLost
from leaseq.model import CompleteItem, ItemResult, Lead, Lease, Renewal, RenewItem
from tests.integration.test_group_commit import DEADLINE_S, WAITING_ON_A_LOCK, groups, since
from tests.support import events, fetch, leads, leasing_of, row
from tests.support.in_process import until
from tests.support.serving import Service

WORKERS = 16
EACH = 3  # leads each worker holds
TTL_S = 60.0
CANCEL = (
    "UPDATE leads SET status = 'failed', error = 'cancelled by hand', lease_expires_at = NULL "
    "WHERE id = ANY(%s)"
)


@asynccontextmanager
async def row_locks(database_url: str, *lead_ids: int) -> AsyncIterator[psycopg.AsyncConnection]:
    """A transaction of another connection holding ``lead_ids``' rows (FOR UPDATE); it
    commits when the block ends, with whatever the block ran on it."""
    outside = await psycopg.AsyncConnection.connect(libpq_url(database_url))
    async with outside, outside.transaction():
        await outside.execute(
            "SELECT FROM leads WHERE id = ANY(%s) ORDER BY id FOR UPDATE", [list(lead_ids)]
        )
        yield outside


async def waiting_on_locks(database_url: str, n: int) -> None:
    """Until ``n`` statements wait on a lock (the ones sent alone for the held rows)."""
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True
    ) as watcher:

        async def waiting() -> bool:
            cursor = await watcher.execute(WAITING_ON_A_LOCK)
            return len(await cursor.fetchall()) >= n

        await until(waiting, within_s=DEADLINE_S)


async def work(
    queue: Queue, held: list[Lease]
) -> tuple[list[Renewal], list[ItemResult], Lead, list[ItemResult]]:
    """A worker with ``held``: a heartbeat each, one batch of them, then its completions (one
    alone, the rest in a batch); the answers of each."""
    renewals = [await queue.renew(lease.lead.id, lease.token, TTL_S) for lease in held]
    batch = await queue.renew_many([RenewItem(x.lead.id, x.token, TTL_S) for x in held])
    first, *rest = held
    completed = await queue.complete(first.lead.id, first.token, result={"w": 1})
    completions = await queue.complete_many([CompleteItem(x.lead.id, x.token) for x in rest])
    return renewals, batch, completed, completions


async def _fleet(queue: Queue) -> tuple[Lease, Lease, list[list[Lease]]]:
    """Two leads of session ``a`` to lock (one to renew, one to complete), and each worker's
    leads: half the workers in ``a`` beside them, half in ``b``."""
    await queue.push("a", leads(2 + WORKERS // 2 * EACH))
    await queue.push("b", leads(WORKERS // 2 * EACH))
    locked_renewed, locked_completed, *in_a = await leasing_of(queue).lease_next(
        "a", "w", max=2 + WORKERS // 2 * EACH, ttl_s=TTL_S
    )
    in_b = await leasing_of(queue).lease_next("b", "w", max=WORKERS // 2 * EACH, ttl_s=TTL_S)
    mine = in_a + in_b
    return locked_renewed, locked_completed, [mine[i::WORKERS] for i in range(WORKERS)]


@pytest.mark.parametrize("outside", ["commits unchanged", "cancels the leads"])
async def test_a_locked_lead_holds_up_only_its_own_caller(
    db: Database, database_url: str, outside: str
) -> None:
    queue = Queue(db)
    locked_renewed, locked_completed, fleet = await _fleet(queue)
    before = groups("renew")
    ids = [locked_renewed.lead.id, locked_completed.lead.id]
    async with row_locks(database_url, *ids) as holder:
        renewal = asyncio.create_task(queue.renew(locked_renewed.lead.id, locked_renewed.token, 30))
        completion = asyncio.create_task(
            queue.complete(locked_completed.lead.id, locked_completed.token)
        )
        await waiting_on_locks(database_url, 2)
        # Released only after this: a lane stalled behind the lock fails by the deadline.
        answers = await asyncio.wait_for(
            asyncio.gather(*(work(queue, held) for held in fleet)), DEADLINE_S
        )
        assert not renewal.done() and not completion.done()
        if outside == "cancels the leads":
            await holder.execute(CANCEL, [ids])

    for held, (renewals, batch, completed, completions) in zip(fleet, answers, strict=True):
        assert [renewal.ttl_s for renewal in renewals] == [TTL_S] * EACH
        assert [(item.lead_id, item.ok, item.ttl_s) for item in batch] == [
            (lease.lead.id, True, TTL_S) for lease in held
        ]
        assert completed.status == "done"
        assert completions == [ItemResult(lease.lead.id, True) for lease in held[1:]]
    sent, carried = since("renew", before)
    assert carried > sent  # the workers' heartbeats did go in groups

    if outside == "commits unchanged":
        renewed = await asyncio.wait_for(renewal, DEADLINE_S)
        assert renewed.ttl_s == 30
        assert (await row(db, locked_renewed.lead.id))["lease_expires_at"] == renewed.expires_at
        assert (await asyncio.wait_for(completion, DEADLINE_S)).status == "done"
    else:  # the holder changed the leads meanwhile: both calls see what it committed
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(renewal, DEADLINE_S)
        with pytest.raises(LeaseLost):
            await asyncio.wait_for(completion, DEADLINE_S)
        assert [(await row(db, i))["error"] for i in ids] == ["cancelled by hand"] * 2
    done = await fetch(db, "SELECT count(*) AS n FROM leads WHERE status = 'done'")
    assert done[0]["n"] == WORKERS * EACH + (outside == "commits unchanged")


async def test_many_held_rows_do_not_take_the_pool(database_url: str, settings: Settings) -> None:
    """Renewals of many rows held outside wait with a share of the pool only: the other
    callers keep connections, and are answered while the rows are held."""
    async with Database.from_settings(settings, database_url, pool_size=8) as db:
        queue = Queue(db)
        bound = 8 // HELD_ROWS_POOL_SHARE
        _, _, fleet = await _fleet(queue)
        await queue.push("held", leads(3 * bound))
        held = await leasing_of(queue).lease_next("held", "w", max=3 * bound, ttl_s=TTL_S)
        async with row_locks(database_url, *(lease.lead.id for lease in held)):
            renewals = [
                asyncio.create_task(queue.renew(lease.lead.id, lease.token, 30)) for lease in held
            ]
            await waiting_on_locks(database_url, bound)
            await asyncio.wait_for(
                asyncio.gather(*(work(queue, leases) for leases in fleet)), DEADLINE_S
            )
            assert len(await fetch(db, WAITING_ON_A_LOCK)) == bound  # the rest wait in turn
            assert not any(renewal.done() for renewal in renewals)
        answers = await asyncio.wait_for(asyncio.gather(*renewals), DEADLINE_S)
        assert [answer.ttl_s for answer in answers] == [30] * len(held)


async def test_racing_renewals_and_completions_stay_exactly_once(
    db: Database, database_url: str
) -> None:
    """Completions of one lease sent three times at once (one with another status), its
    heartbeats beside them, expired leases among them and some rows held outside meanwhile:
    each lead is completed once, with the status every completion told so was sent with,
    and a lost lease is lease_lost to every call."""
    queue = Queue(db)
    await queue.push("s", leads(40))
    valid = await leasing_of(queue).lease_next("s", "w", max=30, ttl_s=TTL_S)
    past = await queue.db_now() - timedelta(seconds=2 * TTL_S)
    expired = await leasing_of(queue).lease_next("s", "w", max=10, ttl_s=TTL_S, now=past)
    every = valid + expired

    def calls(lease: Lease) -> list[asyncio.Future[object]]:
        lead_id, token = lease.lead.id, lease.token
        return [
            asyncio.ensure_future(queue.complete(lead_id, token)),
            asyncio.ensure_future(queue.renew(lead_id, token, TTL_S)),
            asyncio.ensure_future(queue.complete(lead_id, token, "failed", error="boom")),
            asyncio.ensure_future(queue.complete_many([CompleteItem(lead_id, token)])),
            asyncio.ensure_future(queue.renew_many([RenewItem(lead_id, token, TTL_S)])),
            asyncio.ensure_future(queue.complete(lead_id, token)),
        ]

    held = [lease.lead.id for lease in valid[::6] + expired[::5]]
    async with row_locks(database_url, *held):
        futures = {lease.lead.id: calls(lease) for lease in every}
        await waiting_on_locks(database_url, 1)
    await asyncio.wait_for(
        asyncio.gather(*(f for fs in futures.values() for f in fs), return_exceptions=True),
        DEADLINE_S,
    )

    ledger = await events(db)
    for lease in valid:
        lead = await row(db, lease.lead.id)
        single, renewal, other, batch, renewals, again = (
            _outcome(f) for f in futures[lease.lead.id]
        )
        assert lead["status"] in ("done", "failed")
        told_done = [single, batch, again]
        if lead["status"] == "done":  # every completion with done is told so, the other lost
            assert told_done == ["ok"] * 3 and other == "lost"
        else:
            assert told_done == ["lost"] * 3 and other == "ok"
        assert renewal in ("ok", "lost") and renewals in ("ok", "lost")
        completed = [
            e for e in ledger if e["lead_id"] == lease.lead.id and e["event"] == "completed"
        ]
        assert len(completed) == 1
    for lease in expired:
        assert [_outcome(f) for f in futures[lease.lead.id]] == ["lost"] * 6
        assert (await row(db, lease.lead.id))["status"] == "leased"
        assert not [
            e for e in ledger if e["lead_id"] == lease.lead.id and e["event"] == "completed"
        ]


def _outcome(future: asyncio.Future[object]) -> str:
    """``ok`` or ``lost``, whether the call raised LeaseLost or answered an item refused."""
    if future.exception() is not None:
        assert isinstance(future.exception(), LeaseLost)
        return "lost"
    answer = future.result()
    if isinstance(answer, list):
        [item] = answer
        return "ok" if item.ok else "lost"
    return "ok"


async def test_a_locked_lead_holds_up_only_its_own_request_over_http(
    service: Service, db_url: str
) -> None:
    """The same through a real ``leaseq serve``: 16 clients heartbeat and complete over
    HTTP while another connection holds one leased lead's row."""
    async with httpx.AsyncClient(base_url=service.url, timeout=DEADLINE_S) as http:
        session = "http-lock"
        pushed = await http.post(
            f"/sessions/{session}/leads", json={"leads": [{"payload": {}}] * (WORKERS + 1)}
        )
        assert pushed.status_code == 201, pushed.text
        taken = await http.post(
            "/lease", json={"session": session, "owner": "w", "max": WORKERS + 1, "ttl_s": TTL_S}
        )
        assert taken.status_code == 200, taken.text
        locked, *mine = taken.json()["leases"]

        async def worker(lease: dict[str, object]) -> list[int]:
            body = {"lead_id": lease["lead"]["id"], "token": lease["token"]}  # type: ignore[index]
            renewed = await http.post("/renew", json={**body, "ttl_s": TTL_S})
            completed = await http.post("/complete", json={**body, "status": "done"})
            return [renewed.status_code, completed.status_code]

        locked_body = {"lead_id": locked["lead"]["id"], "token": locked["token"]}
        async with row_locks(db_url, locked["lead"]["id"]):
            renewal = asyncio.create_task(http.post("/renew", json={**locked_body, "ttl_s": 30}))
            await waiting_on_locks(db_url, 1)
            codes = await asyncio.wait_for(
                asyncio.gather(*(worker(lease) for lease in mine)), DEADLINE_S
            )
            assert codes == [[200, 200]] * WORKERS
            assert not renewal.done()
        answer = await asyncio.wait_for(renewal, DEADLINE_S)
        assert answer.status_code == 200, answer.text
        assert answer.json()["ttl_s"] == 30
