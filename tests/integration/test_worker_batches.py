"""The worker's batching against a real ``leaseq serve``: completions that finish while one
is in flight go together in one ``/complete/batch``, each lead hearing its own answer, and
a prefetched lead waits, held, for a handler slot.

A completion is held back by the test's transport (real HTTP, answered by the service)
until the leads behind it have queued theirs, so the batch they make is known.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest

from leaseq import AsyncClient
from leaseq.model import Counts, NewLead
from leaseq.worker import Job, Worker
from tests.support.serving import Service
from tests.support.worker_support import RecordingTransport, eventually, holds, ledger

pytestmark = pytest.mark.service

MAX_PAYLOAD_BYTES = 4096
SERVE_ENV = {"LEASEQ_MAX_PAYLOAD_BYTES": str(MAX_PAYLOAD_BYTES)}


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


COMPLETIONS = ("/complete", "/complete/batch")  # a lone completion, a batch of them


class HoldFirstCompletion(RecordingTransport):
    """Holds the first completion until ``release`` is set; records every request."""

    def __init__(self) -> None:
        super().__init__()
        self.held = asyncio.Event()
        self.release = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.path in COMPLETIONS and not self.held.is_set():
            self.held.set()
            await self.release.wait()
        return await super().handle_async_request(request)

    def batches(self) -> list[dict[str, Any]]:
        """Each completion request: its items (one for ``/complete``), ``next`` and key."""
        found = []
        for r in self.requests:
            if r.url.path in COMPLETIONS:
                body = json.loads(r.content)
                items = body.get("items") or [{k: v for k, v in body.items() if k != "next"}]
                key = r.headers.get("Idempotency-Key")
                found.append({"items": items, "next": body.get("next"), "key": key})
        return found


async def test_completions_close_together_go_in_one_batch_each_answered_for_itself(
    service: Service, db_url: str, session: str
) -> None:
    """Three handlers end while the first completion is in flight: the three go in one
    request. One of them lost its lease (an operator cancelled its lead): that lead alone is
    lost, the other two are done, and every completion that leased carried a key."""
    transport = HoldFirstCompletion()
    first_done = asyncio.Event()
    returned: list[int] = []

    async with AsyncClient(service.url, transport=transport) as client:
        ids = (await client.push(session, [NewLead({"n": n}) for n in range(4)])).ids
        cancelled = ids[3]

        async def handler(job: Job) -> dict[str, Any]:
            if job.payload["n"] > 0:
                await first_done.wait()
            if job.id == cancelled:
                await client.cancel(job.id)  # its lease is gone before it completes
            returned.append(job.id)
            return {"n": job.payload["n"]}

        worker = Worker(client, session, handler, concurrency=4, ttl_s=30, wait_s=0.5)
        run = asyncio.create_task(worker.run())
        await eventually(lambda: holds(transport.held.is_set()))  # the first is in flight
        first_done.set()
        # The three others end and queue their completions behind the one in flight.
        await eventually(lambda: holds(len(returned) == 4 and len(worker._pending) == 3))
        transport.release.set()
        async with asyncio.timeout(20):
            stats = await run
        batches = transport.batches()
        status = {lead_id: (await client.get(lead_id)).status for lead_id in ids}
    assert [len(b["items"]) for b in batches[:2]] == [1, 3]
    assert sorted(i["lead_id"] for i in batches[1]["items"]) == sorted(ids[1:])
    assert all(b["key"] for b in batches if b["next"])
    assert (stats.done, stats.lost, stats.released) == (3, 1, 0)
    assert status == {**dict.fromkeys(ids[:3], "done"), cancelled: "failed"}  # error "cancelled"
    assert [e for e, _, _ in ledger(db_url, cancelled)] == ["pushed", "leased", "cancelled"]


async def test_a_batch_refused_for_one_result_completes_the_others(
    service: Service, session: str
) -> None:
    """One result of a batch is too large: the service refuses the batch whole, the worker
    sends each completion again alone, and only that lead fails, saying why."""
    transport = HoldFirstCompletion()
    first_done = asyncio.Event()
    returned: list[int] = []
    async with AsyncClient(service.url, transport=transport) as client:
        leads = [NewLead({"n": n}, max_attempts=1) for n in range(4)]
        ids = (await client.push(session, leads)).ids

        async def handler(job: Job) -> dict[str, Any]:
            if job.payload["n"] > 0:
                await first_done.wait()
            returned.append(job.id)
            return {"big": "x" * MAX_PAYLOAD_BYTES} if job.payload["n"] == 2 else {}

        worker = Worker(client, session, handler, concurrency=4, ttl_s=30, wait_s=0.5)
        run = asyncio.create_task(worker.run())
        await eventually(lambda: holds(transport.held.is_set()))
        first_done.set()
        await eventually(lambda: holds(len(returned) == 4 and len(worker._pending) == 3))
        transport.release.set()
        async with asyncio.timeout(20):
            stats = await run
        leads_now = [await client.get(lead_id) for lead_id in ids]
        calls = [status for path, status in transport.calls if path == "/complete/batch"]
    assert 422 in calls  # the batch of three, refused whole
    assert (stats.done, stats.failed, stats.lost) == (3, 1, 0)
    assert [lead.status for lead in leads_now] == ["done", "done", "failed", "done"]
    assert "the result was refused" in (leads_now[2].error or "")


async def test_a_prefetched_lead_waits_for_a_slot_and_goes_back_at_once_on_stop(
    service: Service, db_url: str, session: str
) -> None:
    """One slot: while its handler runs, the next lead is already held (renewed like any
    other) but does not run. Told to stop, the worker gives the prefetched lead back at once,
    while the running handler still has its grace; never started, it spent no attempt, so
    on its only attempt it is queued again, not failed."""
    release = asyncio.Event()
    started: list[int] = []

    async def handler(job: Job) -> dict[str, Any]:
        started.append(job.id)
        await release.wait()
        return {}

    async with AsyncClient(service.url) as client:
        leads = [NewLead({"n": n}, max_attempts=1) for n in range(3)]
        ids = (await client.push(session, leads)).ids
        worker = Worker(client, session, handler, concurrency=1, ttl_s=30, wait_s=0.5)
        run = asyncio.create_task(worker.run())
        await eventually(lambda: holds(worker.stats.leased == 2 and len(started) == 1))
        assert started == [ids[0]]
        assert await client.stats(session) == Counts(queued=1, leased=2)
        worker.stop()  # the grace (10 s) is for the handler running, not for the one waiting

        async def given_back() -> bool:
            return await client.stats(session) == Counts(queued=2, leased=1)

        await eventually(given_back)
        assert started == [ids[0]]  # the prefetched lead never ran
        release.set()
        async with asyncio.timeout(20):
            stats = await run
    assert (stats.leased, stats.done, stats.released, stats.lost) == (2, 1, 1, 0)
    assert [e for e, _, _ in ledger(db_url, ids[1])] == ["pushed", "leased", "released"]
    async with AsyncClient(service.url) as client:
        assert (await client.get(ids[1])).status == "queued"  # max_attempts 1, still queued
