"""The work loop and ``leaseq worker`` against a real ``leaseq serve`` process.

Most tests share one service (and database) per module, each in a session of
its own; the test that restarts the service has its own. Workers run in this
process (``Worker``) or as ``leaseq worker`` subprocesses.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from leaseq import AsyncClient, RetryPolicy
from leaseq.model import Counts, NewLead
from leaseq.worker import Cached, Command, Job, StopReason, Worker, run_worker
from tests.support import scrapes
from tests.support.serving import Service, Services, free_port
from tests.support.worker_support import (
    HANDLER,
    RecordingTransport,
    alive,
    completions,
    eventually,
    exited,
    guards_of,
    holds,
    kill_leftovers,
    ledger,
    pids,
    start_worker,
)

pytestmark = pytest.mark.service

FAST_RETRY = RetryPolicy(attempts=3, base_s=0.05, max_s=0.2)
FAST_SWEEPS = {"LEASEQ_SWEEP_INTERVAL_S": "0.3"}  # expired leases come back quickly
SERVE_ENV = FAST_SWEEPS  # the module's service (conftest's ``served``)


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


@pytest.fixture
async def client(service: Service) -> Any:
    async with AsyncClient(service.url) as client:
        yield client


async def run_until(worker: Worker, check: Callable[[], bool], timeout_s: float = 10.0) -> None:
    """Run ``worker`` until ``check()`` holds, then stop it (no grace) and wait for the end."""
    task = asyncio.create_task(worker.run())
    try:
        async with asyncio.timeout(timeout_s):
            while not check():
                assert not task.done(), "the worker ended early"
                await asyncio.sleep(0.05)
    finally:
        worker.stop()
        async with asyncio.timeout(10):
            await task


async def quick(job: Job) -> dict[str, Any]:
    return {"by": "quick", "attempt": job.attempt}


# -- a lease lost while the handler runs ---------------------------------------


async def test_blocked_renewals_cancel_the_handler_and_nothing_is_sent(
    service: Service, db_url: str, client: AsyncClient, session: str
) -> None:
    [lead_id] = (await client.push(session, [NewLead({"n": 1})])).ids
    cut_off = RecordingTransport()
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def outlives_its_lease(job: Job) -> dict[str, Any]:
        started.set()
        cut_off.blocked.update({"/renew/batch", "/lease"})  # this worker reaches nothing now
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return {"by": "a"}

    async with AsyncClient(service.url, transport=cut_off, retry_policy=FAST_RETRY) as a_client:
        a = Worker(a_client, session, outlives_its_lease, owner="a", ttl_s=1.0, wait_s=0.2)
        a_run = asyncio.create_task(a.run())
        async with asyncio.timeout(5):
            await started.wait()
            await cancelled.wait()  # no renew confirmed: cancelled before the lease ran out
        a.stop()
        async with asyncio.timeout(5):
            await a_run
    assert a.stats.lost == 1 and a.stats.finished == 0
    assert cut_off.count("/complete") == cut_off.count("/release") == 0

    b = Worker(client, session, quick, owner="b", ttl_s=5, wait_s=2, grace_s=0)
    await run_until(b, lambda: b.stats.done == 1)
    assert completions(db_url, lead_id) == ["b"]
    lead = await client.get(lead_id)
    assert (lead.status, lead.result, lead.attempts) == ("done", {"by": "quick", "attempt": 2}, 2)


async def test_a_checkpoint_outlives_its_holder_and_the_next_one_resumes_there(
    client: AsyncClient, session: str, service: Service
) -> None:
    """A's heartbeat stores its checkpoint; A is then cut off and its lease lost; B, leasing
    the lead after the sweep, starts from A's checkpoint."""
    [lead_id] = (await client.push(session, [NewLead({"pages": 100})])).ids
    cut_off = RecordingTransport()

    async def reads_forty_pages(job: Job) -> None:
        job.checkpoint({"page": 40})
        await asyncio.sleep(60)  # until its lease is lost

    async def stored() -> bool:
        return (await client.get(lead_id)).checkpoint == {"page": 40}

    async with AsyncClient(service.url, transport=cut_off, retry_policy=FAST_RETRY) as a_client:
        a = Worker(a_client, session, reads_forty_pages, owner="a", ttl_s=1.5, wait_s=0)
        a_run = asyncio.create_task(a.run())
        await eventually(stored)  # carried by a heartbeat, a third of the ttl in
        cut_off.blocked.update({"/renew/batch", "/lease", "/renew", "/release"})
        await eventually(lambda: holds(a.stats.lost == 1))  # its handler stopped, nothing sent
        a.stop()
        async with asyncio.timeout(10):
            await a_run
    assert cut_off.count("/release") == 0

    resumed: list[Any] = []

    async def resumes(job: Job) -> str:
        resumed.append((job.attempt, job.lead.checkpoint, job.saved_checkpoint))
        return "read the other 60"

    b = Worker(client, session, resumes, owner="b", ttl_s=5, wait_s=3, grace_s=0)
    await run_until(b, lambda: b.stats.done == 1)
    assert resumed == [(2, {"page": 40}, {"page": 40})]


async def test_an_operator_cancel_stops_a_sync_handler_and_its_result_is_dropped(
    service: Service, db_url: str, client: AsyncClient, session: str
) -> None:
    [lead_id] = (await client.push(session, [NewLead({"n": 1})])).ids
    started = threading.Event()
    reasons: list[str | None] = []

    def polls_its_token(job: Job) -> dict[str, Any]:
        started.set()
        while not job.cancel_token.wait(0.05):
            pass
        reasons.append(job.cancel_token.reason)
        return {"partial": True}  # never sent

    a = Worker(client, session, polls_its_token, owner="a", ttl_s=1.5, wait_s=0.2)
    a_run = asyncio.create_task(a.run())
    await eventually(lambda: asyncio.sleep(0, started.is_set()))
    await client.cancel(lead_id)
    async with asyncio.timeout(5):
        stats = await a_run  # lost at the next heartbeat, then the queue is empty
    assert reasons == [StopReason.LOST] and stats.lost == 1 and stats.finished == 0

    await client.retry(lead_id)
    b = Worker(client, session, quick, owner="b", ttl_s=5, wait_s=2, grace_s=0)
    await run_until(b, lambda: b.stats.done == 1)
    assert completions(db_url, lead_id) == ["b"]
    assert (await client.get(lead_id)).result == {"by": "quick", "attempt": 2}


async def test_heartbeats_keep_long_handlers_alive_one_batch_per_tick(
    service: Service, session: str
) -> None:
    transport = RecordingTransport()
    running: list[int] = []
    peak = 0

    def renewals() -> list[int]:
        """How many leads each renewal carried, in the order they were sent."""
        return [
            len(json.loads(request.content)["items"])
            for request in transport.requests
            if request.url.path == "/renew/batch"
        ]

    async def longer_than_the_ttl(job: Job) -> Any:
        nonlocal peak
        running.append(job.id)
        peak = max(peak, len(running))
        # Past the 1.5 s ttl: four renewals, a tick (ttl / 3) apart, kept it alive.
        await eventually(lambda: holds(len(renewals()) >= 4), timeout_s=30)
        running.remove(job.id)
        return Cached({"n": job.payload["n"]}) if job.payload["n"] == 0 else job.payload

    async with AsyncClient(service.url, transport=transport) as client:
        ids = (await client.push(session, [NewLead({"n": n}) for n in range(3)])).ids
        worker = Worker(client, session, longer_than_the_ttl, concurrency=3, ttl_s=1.5, wait_s=0.5)
        async with asyncio.timeout(60):
            stats = await worker.run()
        assert (stats.done, stats.cached, stats.lost, peak) == (2, 1, 0, 3)
        assert (await client.get(ids[0])).status == "cached"
    # While the three ran, each tick renewed them together: one batch, not one call per lead.
    assert renewals()[:4] == [3, 3, 3, 3]


# -- stopping, crashing, restarting -------------------------------------------


async def test_sigterm_releases_leads_in_flight_within_the_grace_period(
    service: Service, db_url: str, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    leads = [NewLead({"mode": "hang_first", "pid_dir": str(tmp_path)}) for _ in range(3)]
    ids = (await client.push(session, leads)).ids
    log = tmp_path / "worker.log"
    args = ["--owner", "term", "--concurrency", "3", "--ttl", "30", "--grace", "1", "--quiet"]
    worker = start_worker(service.url, session, [*args, "--", *HANDLER], log)
    try:
        await eventually(lambda: asyncio.sleep(0, len(pids(tmp_path)) == 6), timeout_s=15)
        signalled = time.monotonic()
        worker.send_signal(signal.SIGTERM)
        assert await exited(worker, log) == 0
        took = time.monotonic() - signalled
        # The hung handlers had their 1 s of grace; exited's deadline is far short of the
        # 30 s ttl, and the leads are released below, not left to expire.
        assert took >= 1.0, log.read_text()
        assert not any(alive(pid) for pid in pids(tmp_path))
        assert await client.stats(session) == Counts(queued=3)  # released, not left to expire
        for lead_id in ids:
            assert ("released", "term", 1) in ledger(db_url, lead_id)

        other = Worker(client, session, quick, owner="other", ttl_s=5, wait_s=0.5)
        async with asyncio.timeout(10):
            stats = await other.run()
        assert stats.done == 3
        for lead_id in ids:
            assert completions(db_url, lead_id) == ["other"]
    finally:
        worker.kill()
        kill_leftovers(tmp_path)


async def test_kill_9_mid_lead_another_worker_finishes_after_the_ttl(
    service: Service, db_url: str, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    [lead_id] = (await client.push(session, [NewLead({"n": 1})])).ids
    log = tmp_path / "worker.log"
    args = ["--owner", "doomed", "--ttl", "1.5", "--quiet"]
    worker = start_worker(
        service.url, session, [*args, "--handler", "tests.support.handle_lead:stall_first"], log
    )
    try:

        async def leased() -> bool:
            return (await client.get(lead_id)).status == "leased"

        await eventually(leased, timeout_s=15)
        worker.kill()
        worker.wait(5)
    finally:
        worker.kill()
    other = Worker(client, session, quick, owner="other", ttl_s=5, wait_s=2, grace_s=0)
    await run_until(other, lambda: other.stats.done == 1)
    events = ledger(db_url, lead_id)
    assert [e for e, _, _ in events] == ["pushed", "leased", "expired", "leased", "completed"]
    assert completions(db_url, lead_id) == ["other"]


async def test_the_worker_rides_out_a_service_restart(
    database_url: str, tmp_path: Path, session: str
) -> None:
    services = Services(tmp_path)
    try:
        service = services.start(database_url=database_url, env=FAST_SWEEPS)
        async with AsyncClient(service.url) as client:
            ids = (await client.push(session, [NewLead({"n": n}) for n in range(30)])).ids

            async def work(job: Job) -> dict[str, Any]:
                await asyncio.sleep(0.05)
                return {"n": job.payload["n"]}

            # A ttl far longer than the restart: no lease runs out while the service is away.
            worker = Worker(client, session, work, concurrency=3, ttl_s=30, wait_s=0.5)
            run = asyncio.create_task(worker.run())
            await eventually(lambda: asyncio.sleep(0, worker.stats.done >= 5))
            service.terminate()
            await asyncio.to_thread(service.wait)
            await asyncio.sleep(0.5)
            assert not run.done()
            restart = services.start
            await asyncio.to_thread(
                restart, database_url=database_url, port=service.port, env=FAST_SWEEPS
            )
            async with asyncio.timeout(30):
                stats = await run
            assert stats.lost == 0
            assert await client.stats(session) == Counts(done=30)
            report = await client.report(session)
            assert report["double_completions"] == 0
        for lead_id in ids:
            assert len(completions(database_url, lead_id)) == 1
    finally:
        services.close()


# -- the stop rule ---------------------------------------------------------------


async def test_a_worker_stops_when_the_queue_is_empty(client: AsyncClient, session: str) -> None:
    worker = Worker(client, session, quick, wait_s=0.5)
    began = time.monotonic()
    async with asyncio.timeout(30):  # the deadline: it does stop
        stats = await worker.run()
    assert time.monotonic() - began >= 0.45  # after one long poll of wait_s came back empty
    assert stats.leased == 0


async def test_run_worker_blocks_until_the_queue_is_empty(
    service: Service, client: AsyncClient, session: str
) -> None:
    ids = (await client.push(session, [NewLead({"n": n}) for n in range(4)])).ids

    def double(job: Job) -> dict[str, int]:
        return {"twice": job.payload["n"] * 2}

    stats = await asyncio.to_thread(
        run_worker, service.url, session, double, concurrency=2, wait_s=0.5
    )
    assert stats.done == 4
    assert [(await client.get(i)).result for i in ids] == [{"twice": n * 2} for n in range(4)]


async def test_forever_keeps_waiting(service: Service, client: AsyncClient, session: str) -> None:
    transport = RecordingTransport()
    async with AsyncClient(service.url, transport=transport) as recorded:
        worker = Worker(recorded, session, quick, wait_s=0.5, forever=True, grace_s=0)
        run = asyncio.create_task(worker.run())
        # A third long poll: two came back empty and it asked again.
        await eventually(
            lambda: holds(sum(r.url.path == "/lease" for r in transport.requests) >= 3)
        )
        assert not run.done()
        await client.push(session, [NewLead({})])
        await eventually(lambda: asyncio.sleep(0, worker.stats.done == 1))
        assert not run.done()
        worker.stop()
        async with asyncio.timeout(15):
            await run


# -- leaseq worker -- command -----------------------------------------------------


async def test_command_success(
    service: Service, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    leads = [NewLead({"mode": "ok", "x": 1}), NewLead({"mode": "text"}), NewLead({"mode": "ok"})]
    ids = (await client.push(session, leads)).ids
    log = tmp_path / "worker.log"
    worker = start_worker(service.url, session, ["-c", "2", "--wait", "0.5", "--", *HANDLER], log)
    assert await exited(worker, log) == 0
    first = await client.get(ids[0])
    assert first.status == "done"
    assert first.result == {
        "lead": ids[0],
        "attempt": 1,
        "session": session,
        "payload": leads[0].payload,
    }
    assert (await client.get(ids[1])).result == {"output": "hello, not json"}
    assert await client.stats(session) == Counts(done=3)
    assert "done 3" in log.read_text()  # the progress line


async def test_one_guard_per_slot_runs_every_lead_and_ends_with_the_run(
    client: AsyncClient, session: str
) -> None:
    """A lead costs a fork and an exec: the slot's guard is started once, not per lead."""
    ids = (await client.push(session, [NewLead({"mode": "ok", "n": n}) for n in range(4)])).ids
    seen: set[int] = set()

    async def watching(job: Job) -> Any:
        seen.update(guards_of(os.getpid()))
        return await command(job)

    command = Command(HANDLER)
    watching.aclose = command.aclose  # type: ignore[attr-defined]
    stats = await Worker(client, session, watching, wait_s=0.5).run()
    assert stats.done == 4 and [(await client.get(i)).status for i in ids] == ["done"] * 4
    assert len(seen) == 1  # the one guard of the one slot, from the second lead on
    assert not any(alive(pid) for pid in seen) and not guards_of(os.getpid())


async def test_command_non_zero_exit(
    service: Service, db_url: str, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    leads = [
        NewLead({"mode": "fail"}, max_attempts=1),
        NewLead({"mode": "fail_first"}, max_attempts=2),
    ]
    failing, flaky = (await client.push(session, leads)).ids
    log = tmp_path / "worker.log"
    args = ["--wait", "0.5", "--retry-delay", "0", "--quiet", "--", *HANDLER]
    assert await exited(start_worker(service.url, session, args, log), log) == 0
    lead = await client.get(failing)
    assert lead.status == "failed"
    assert (
        lead.error is not None and "exit status 3" in lead.error and "something broke" in lead.error
    )
    lead = await client.get(flaky)
    assert (lead.status, lead.attempts, lead.result["attempt"]) == ("done", 2, 2)
    assert [e for e, _, _ in ledger(db_url, flaky)].count("released") == 1


async def test_command_past_its_max_runtime_is_killed(
    service: Service, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    hang = NewLead({"mode": "hang", "pid_dir": str(tmp_path)}, max_attempts=1)
    [lead_id] = (await client.push(session, [hang])).ids
    log = tmp_path / "worker.log"
    args = ["--max-runtime", "1", "--wait", "0.5", "--quiet", "--", *HANDLER]
    try:
        began = time.monotonic()
        assert await exited(start_worker(service.url, session, args, log), log) == 0
        assert time.monotonic() - began >= 1
        assert len(pids(tmp_path)) == 2 and not any(alive(pid) for pid in pids(tmp_path))
        lead = await client.get(lead_id)
        assert lead.status == "failed" and lead.error == "max runtime exceeded (1s)"
    finally:
        kill_leftovers(tmp_path)


async def test_command_of_a_lost_lease_is_killed(
    service: Service, db_url: str, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    [lead_id] = (
        await client.push(session, [NewLead({"mode": "hang", "pid_dir": str(tmp_path)})])
    ).ids
    log = tmp_path / "worker.log"
    args = ["--owner", "w", "--ttl", "1.5", "--wait", "0.5", "--quiet", "--", *HANDLER]
    worker = start_worker(service.url, session, args, log)
    try:
        await eventually(lambda: asyncio.sleep(0, len(pids(tmp_path)) == 2), timeout_s=15)
        await client.cancel(lead_id)
        await eventually(
            lambda: asyncio.sleep(0, not any(alive(pid) for pid in pids(tmp_path))), timeout_s=5
        )
        assert await exited(worker, log) == 0
        assert [e for e, _, _ in ledger(db_url, lead_id)] == [
            "pushed",
            "leased",
            "cancelled",
        ]
        assert "lease lost" in log.read_text()
    finally:
        worker.kill()
        kill_leftovers(tmp_path)


async def test_forever_with_metrics_until_sigterm(
    service: Service, client: AsyncClient, session: str, tmp_path: Path
) -> None:
    port = free_port()
    log = tmp_path / "worker.log"
    args = ["--forever", "--wait", "0.5", "--metrics-port", str(port), "--quiet"]
    worker = start_worker(
        service.url, session, [*args, "--handler", "tests.support.handle_lead:quick"], log
    )
    metrics_url = f"http://127.0.0.1:{port}/metrics"
    try:

        async def metrics() -> str:
            try:
                async with httpx.AsyncClient() as http:
                    return (await http.get(metrics_url)).text
            except httpx.TransportError:
                return ""

        await eventually(lambda: _truthy(metrics()), timeout_s=15)
        before = await answered_leases(service)
        # Two long polls answered since: one came back empty and the worker asked again.
        await eventually(lambda: _at_least(answered_leases(service), before + 2), timeout_s=15)
        assert worker.poll() is None  # an empty queue does not stop it
        await client.push(session, [NewLead({}), NewLead({})])

        async def drained() -> bool:
            return await client.stats(session) == Counts(done=2)

        await eventually(drained)
        text = await metrics()
        assert 'leaseq_worker_completed_total{status="done"} 2.0' in text
        assert "leaseq_worker_leased_total 2.0" in text
        assert "leaseq_worker_handler_duration_seconds_count 2.0" in text
        worker.send_signal(signal.SIGTERM)
        assert await exited(worker, log, timeout_s=5) == 0
    finally:
        worker.kill()


async def _truthy(value: Awaitable[str]) -> bool:
    return bool(await value)


async def _at_least(value: Awaitable[float], least: float) -> bool:
    return await value >= least


async def answered_leases(service: Service) -> float:
    """How many POST /lease the service has answered 200 (its /metrics)."""
    async with httpx.AsyncClient() as http:
        text = (await http.get(f"{service.url}/metrics")).text
    found = scrapes.samples(text)
    labels = {"method": "POST", "route": "/lease", "status": "200"}
    return scrapes.value(found, "leaseq_request_duration_seconds_count", **labels)
