"""A worker's cooldown end to end: a handler's ``Throttled`` and ``leaseq worker
--throttle-exit``, against a real ``leaseq serve`` process."""

from __future__ import annotations

import sys
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from leaseq import AsyncClient, Throttled
from leaseq.model import NewLead
from leaseq.worker import Job, Worker
from tests.support.serving import Service
from tests.support.worker_support import exited, ledger, start_worker, tail

pytestmark = pytest.mark.service


@pytest.fixture
def session() -> str:
    return f"throttled-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def client(service: Service) -> AsyncIterator[AsyncClient]:
    """A client of the module's service (``conftest``'s ``served``)."""
    async with AsyncClient(service.url) as leaseq:
        yield leaseq


async def test_a_throttled_handler_pauses_its_session_and_keeps_its_attempt(
    client: AsyncClient, session: str
) -> None:
    [lead_id] = (await client.push(session, [NewLead({}, max_attempts=1)])).ids
    seen: list[int] = []

    async def handler(job: Job) -> dict[str, Any]:
        seen.append(job.attempt)
        if job.attempt == 1:
            job.throttle(120)
        if job.attempt == 2:
            raise Throttled(retry_after=120)
        return {"attempt": job.attempt}

    for _ in range(2):
        stats = await Worker(client, session, handler, wait_s=0.2).run()
        assert stats.released == 1
        lead = await client.get(lead_id)
        assert lead.status == "queued"  # max_attempts 1, and never failed
        counts = await client.stats(session)
        assert counts.paused_until is not None
        assert (await client.settings(session)).paused_until == counts.paused_until
        await client.resume(session)
    await Worker(client, session, handler, wait_s=0.2).run()
    lead = await client.get(lead_id)
    assert lead.status == "done" and lead.result == {"attempt": 3} and seen == [1, 2, 3]


async def test_leaseq_worker_maps_an_exit_code_to_a_throttle(
    service: Service, db_url: str, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    [lead_id] = (await client.push(session, [NewLead({}, max_attempts=1)])).ids
    log = tmp_path / "worker.log"
    args = ["--wait", "0.2", "--throttle-exit", "75", "--throttle-for", "2m"]
    process = start_worker(
        service.url, session, [*args, "--", sys.executable, "-c", "exit(75)"], log
    )
    assert await exited(process, log) == 0, tail(log)
    lead = await client.get(lead_id)
    assert lead.status == "queued" and lead.attempts == 1, tail(log)
    paused = (await client.stats(session)).paused_until
    assert paused is not None
    events = [event for event, _, _ in ledger(db_url, lead_id)]
    assert events == ["pushed", "leased", "released"]
    # an ordinary non-zero exit still spends the attempt
    await client.resume(session)
    process = start_worker(
        service.url, session, [*args, "--", sys.executable, "-c", "exit(3)"], log
    )
    assert await exited(process, log) == 0, tail(log)
    assert (await client.get(lead_id)).status == "failed"


async def test_bad_throttle_flags_are_usage_errors(
    service: Service, session: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    for flags in (["--throttle-for", "2h"], ["--throttle-for", "soon"], ["--throttle-exit", "0"]):
        argv = [*flags, "--", sys.executable, "-c", "exit(0)"]
        process = start_worker(service.url, session, argv, log)
        assert await exited(process, log) == 2, tail(log)
