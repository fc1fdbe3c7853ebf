"""The worker keeps the promise (docs/contract.md#invariant-7 and #invariant-8), with real
processes throughout.

A real ``leaseq serve`` per test (some are stopped or cut off), workers as
``leaseq worker`` subprocesses or in this process, commands that spawn
children or ignore SIGTERM, and proxies that cut a worker off or lose the
service's answers. Every lease is short (2 to 6 s).
"""

from __future__ import annotations

import asyncio
import os
import signal
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from leaseq import AsyncClient, RetryPolicy
from leaseq.model import Counts, Lease, NewLead
from leaseq.worker import Command, Job, Worker
from leaseq.worker.core import DEFAULT_WORKER_TTL_S
from tests.support.lossy_proxy import FirstOf, LossyProxy
from tests.support.proxy import Proxy
from tests.support.serving import Service, Services
from tests.support.worker_support import (
    HANDLER,
    alive,
    completions,
    eventually,
    exited,
    guards_of,
    holds,
    kill_leftovers,
    ledger,
    ledger_times,
    pids,
    start_worker,
    tail,
)

pytestmark = pytest.mark.service

FAST_SWEEPS = {"LEASEQ_SWEEP_INTERVAL_S": "0.3"}  # expired leases come back quickly
FAST_RETRY = RetryPolicy(attempts=6, base_s=0.05, max_s=0.2)


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def serve(services: Services, database_url: str, **env: str) -> Service:
    return services.start(database_url=database_url, env={**FAST_SWEEPS, **env})


async def quick(job: Job) -> dict[str, Any]:
    return {"attempt": job.attempt}


async def run_until_done(worker: Worker, done: int, timeout_s: float = 15.0) -> None:
    """Run ``worker`` (made with ``forever``) until it has finished ``done`` leads; stop it."""
    run = asyncio.create_task(worker.run())
    try:
        await eventually(lambda: holds(worker.stats.finished >= done), timeout_s)
    finally:
        worker.stop()
        async with asyncio.timeout(10):
            await run


# -- docs/contract.md#invariant-8: a worker that dies takes its commands with it -


async def test_kill_9_of_the_worker_takes_its_command_tree_with_it(
    services: Services, database_url: str, session: str, tmp_path: Path
) -> None:
    """The worker asks for 2 s, so the lead comes back soon."""
    service = serve(services, database_url, LEASEQ_LEASE_TTL_S="2")
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url) as client:
        hang = NewLead({"mode": "hang_first", "pid_dir": str(tmp_path)})
        [lead_id] = (await client.push(session, [hang])).ids
        worker = start_worker(
            service.url, session, ["--owner", "doomed", "--ttl", "2", "-q", "--", *HANDLER], log
        )
        try:
            await eventually(lambda: holds(len(pids(tmp_path)) == 2), timeout_s=15)
            assert guards_of(worker.pid)
            worker.kill()  # SIGKILL, as the OOM killer does: the worker alone
            await asyncio.to_thread(worker.wait, 5)
            killed = time.monotonic()

            async def all_gone() -> bool:
                return not any(alive(pid) for pid in pids(tmp_path)) and not guards_of(worker.pid)

            await eventually(all_gone, timeout_s=3)  # the command and its child, at once

            other = Worker(client, session, quick, owner="other", wait_s=2, forever=True)
            await run_until_done(other, 1)
            assert time.monotonic() - killed < 10  # back after the 2 s lease, not a minute
        finally:
            worker.kill()
            worker.wait()
            kill_leftovers(tmp_path)
    assert [e for e, _, _ in ledger(database_url, lead_id)] == [
        "pushed",
        "leased",
        "expired",
        "leased",
        "completed",
    ]
    assert completions(database_url, lead_id) == ["other"]
    [(_, at, expires_at)] = [t for t in ledger_times(database_url, lead_id) if t[0] == "leased"][:1]
    assert expires_at is not None and expires_at - at == timedelta(seconds=2)  # the worker's


@pytest.mark.slow
async def test_a_worker_killed_outright_strands_its_lead_for_its_short_ttl_not_the_services(
    services: Services, database_url: str, session: str, tmp_path: Path
) -> None:
    """The service keeps its default of five minutes; ``leaseq worker`` given no ``--ttl``
    asks for its own 30 s (renewed every 10 s while it lives). Killed with SIGKILL, it
    strands its lead for those 30 s at most: the lead is leased again well before five
    minutes."""
    service = serve(services, database_url)  # LEASEQ_LEASE_TTL_S: the service's default
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url) as client:
        hang = NewLead({"mode": "hang", "pid_dir": str(tmp_path)})
        [lead_id] = (await client.push(session, [hang])).ids
        worker = start_worker(
            service.url, session, ["--owner", "doomed", "-q", "--", *HANDLER], log
        )
        try:
            await eventually(lambda: holds(len(pids(tmp_path)) == 2), timeout_s=15)
            worker.kill()  # SIGKILL: no release, no last renewal
            await asyncio.to_thread(worker.wait, 5)
            again: list[Lease] = []

            async def leased_again() -> bool:
                again.extend(await client.lease(session, "other", wait_s=2))
                return bool(again)

            # The deadline is the only failure: the worker's ttl, and the sweep's beat.
            await eventually(leased_again, timeout_s=DEFAULT_WORKER_TTL_S + 15)
        finally:
            worker.kill()
            worker.wait()
            kill_leftovers(tmp_path)
    [lease] = again
    assert (lease.lead.id, lease.attempt) == (lead_id, 2)
    assert [e for e, _, _ in ledger(database_url, lead_id)] == [
        "pushed",
        "leased",
        "expired",
        "leased",
    ]
    [(_, at, expires_at)] = [t for t in ledger_times(database_url, lead_id) if t[0] == "leased"][:1]
    assert expires_at is not None
    assert expires_at - at == timedelta(seconds=DEFAULT_WORKER_TTL_S)  # the worker's, not 300 s


async def test_kill_9_of_the_worker_takes_a_grandchild_in_a_session_of_its_own_too(
    services: Services, database_url: str, session: str, tmp_path: Path
) -> None:
    """The grandchild left the command's process group and session (``setsid``): only the
    slot's guard, its subreaper, still knows it; the worker's death ends it with the rest."""
    service = serve(services, database_url, LEASEQ_LEASE_TTL_S="2")
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url) as client:
        await client.push(session, [NewLead({"mode": "escape", "pid_dir": str(tmp_path)})])
        worker = start_worker(service.url, session, ["--ttl", "2", "-q", "--", *HANDLER], log)
        try:
            await eventually(lambda: holds(len(pids(tmp_path)) == 2), timeout_s=15)
            command, grandchild = pids(tmp_path)
            assert os.getsid(grandchild) == grandchild != os.getsid(command)  # it escaped
            assert all(map(alive, (command, grandchild))) and guards_of(worker.pid)
            worker.kill()
            await asyncio.to_thread(worker.wait, 5)

            async def all_gone() -> bool:
                return not any(map(alive, (command, grandchild))) and not guards_of(worker.pid)

            await eventually(all_gone, timeout_s=3)
        finally:
            worker.kill()
            worker.wait()
            kill_leftovers(tmp_path)


async def test_what_a_command_leaves_behind_in_another_session_is_ended(
    services: Services, database_url: str, session: str, tmp_path: Path
) -> None:
    """The command exits at once, its grandchild (``setsid``) still running: the lead is done,
    and the grandchild is gone by the time the worker ends."""
    service = serve(services, database_url)
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url) as client:
        leave = {"mode": "escape", "leave": True, "pid_dir": str(tmp_path)}
        first, second = (await client.push(session, [NewLead(leave), NewLead({})])).ids
        worker = start_worker(service.url, session, ["--wait", "0.5", "-q", "--", *HANDLER], log)
        try:
            assert await exited(worker, log) == 0, tail(log)
            [(command, grandchild)] = [tuple(pids(tmp_path))]
            assert not alive(command) and not alive(grandchild)
            assert (await client.get(first)).status == (await client.get(second)).status == "done"
        finally:
            kill_leftovers(tmp_path)


async def test_a_command_deaf_to_sigterm_is_killed_before_its_lease_can_end(
    services: Services, database_url: str, session: str, tmp_path: Path
) -> None:
    """Cut off from the service, the worker kills the whole command before the lease's expiry.

    The command ignores SIGTERM and writes down the time every 20 ms until it
    is killed; the next holder writes down when it starts.
    """
    service = serve(services, database_url)
    stamps = tmp_path / "stamps"
    log = tmp_path / "worker.log"
    cut = Proxy("127.0.0.1", service.port)
    await cut.start()
    async with AsyncClient(service.url) as client:
        [lead_id] = (
            await client.push(session, [NewLead({"mode": "deaf_first", "stamps": str(stamps)})])
        ).ids
        args = ["--owner", "a", "--ttl", "3", "--kill-grace", "0.5", "-q", "--", *HANDLER]
        a = start_worker(f"http://127.0.0.1:{cut.port}", session, args, log)
        try:
            await eventually(lambda: holds(stamps.exists() and stamps.stat().st_size > 0), 15)
            await cut.stop()  # from now on, the worker reaches nothing: no renewal is confirmed
            b = Worker(client, session, Command(HANDLER), owner="b", wait_s=2, forever=True)
            await run_until_done(b, 1, timeout_s=20)
        finally:
            a.kill()
            a.wait()
            await cut.stop()
        report = await client.report(session)
    lines = [line.split() for line in stamps.read_text().splitlines()]
    deaf = [float(line[0]) for line in lines if len(line) == 2]
    [next_started] = [float(line[0]) for line in lines if len(line) == 3]
    [(_, _, expired_at)] = [t for t in ledger_times(database_url, lead_id) if t[0] == "expired"]
    assert expired_at is not None
    assert len(deaf) > 5 and max(deaf) < expired_at.timestamp() < next_started
    assert report["overlapping_leases"] == 0 and report["double_completions"] == 0
    assert completions(database_url, lead_id) == ["b"]
    assert "lease not renewed in time" in log.read_text()


# -- a stalled service, lost answers --------------------------------------------------


async def test_a_service_stopped_for_half_a_lease_costs_nothing(
    services: Services, database_url: str, session: str
) -> None:
    """SIGSTOP for 3 s of a 6 s lease: the renewal waits it out, the lead is done on attempt 1."""
    service = serve(services, database_url)
    async with AsyncClient(service.url) as client:
        [lead_id] = (await client.push(session, [NewLead({})])).ids

        async def five_seconds(job: Job) -> dict[str, Any]:
            await asyncio.sleep(5)
            return {"attempt": job.attempt}

        worker = Worker(client, session, five_seconds, ttl_s=6, wait_s=0.5)
        run = asyncio.create_task(worker.run())
        await eventually(lambda: holds(worker.stats.leased == 1))
        await asyncio.sleep(0.5)
        os.kill(service.pid, signal.SIGSTOP)
        try:
            await asyncio.sleep(3)
        finally:
            os.kill(service.pid, signal.SIGCONT)
        async with asyncio.timeout(20):
            stats = await run
        assert (stats.done, stats.lost) == (1, 0)
        lead = await client.get(lead_id)
    assert (lead.status, lead.attempts, lead.result) == ("done", 1, {"attempt": 1})
    assert [e for e, _, _ in ledger(database_url, lead_id)] == ["pushed", "leased", "completed"]


async def test_lost_answers_never_turn_one_intent_into_two_effects(
    services: Services, database_url: str, session: str
) -> None:
    """The first answer to a push, a lease, a renewal, a completion and a completion that
    leased never arrives."""
    service = serve(services, database_url)
    drop = FirstOf(
        push=lambda e: e.path.endswith("/leads"),
        lease=lambda e: e.path == "/lease" and b'"leases":[]' not in e.answer,
        renew=lambda e: e.path == "/renew/batch",
        # Completions, alone or in batches: one that leased nothing (the queue ran dry) …
        complete=lambda e: e.path.startswith("/complete") and b'"leases":[{' not in e.answer,
        # … and one that leased the next leads: its retry, under the same key, gets them.
        complete_and_lease=lambda e: e.path.startswith("/complete") and b'"leases":[{' in e.answer,
    )

    async def a_second(job: Job) -> dict[str, Any]:
        await asyncio.sleep(1.2)  # a renewal a third of the 3 s ttl in
        return {"n": job.payload["n"]}

    async with (
        LossyProxy(service.port, drop) as proxy,
        AsyncClient(proxy.url, retry_policy=FAST_RETRY) as client,
    ):
        pushed = await client.push(session, [NewLead({"n": n}) for n in range(12)])
        worker = Worker(client, session, a_second, concurrency=4, ttl_s=3, wait_s=0.5)
        async with asyncio.timeout(30):
            stats = await worker.run()
    assert drop.fired == set(drop.rules)  # each kind of answer was lost once
    assert (pushed.created, len(set(pushed.ids))) == (12, 12)
    assert (stats.leased, stats.done, stats.lost, stats.released) == (12, 12, 0, 0)
    async with AsyncClient(service.url) as direct:
        assert await direct.stats(session) == Counts(done=12)
        report = await direct.report(session)
        leads = [await direct.get(lead_id) for lead_id in pushed.ids]
    assert [lead.attempts for lead in leads] == [1] * 12
    assert {k: report[k] for k in ("leads", "pushed", "leases", "completions")} == dict.fromkeys(
        ("leads", "pushed", "leases", "completions"), 12
    )
    assert (report["double_completions"], report["overlapping_leases"]) == (0, 0)
    assert report["wasted_attempts"] == 0


# -- docs/contract.md#invariant-7: the last attempt, released or expired -------------


async def test_the_last_attempt_fails_the_lead_whether_released_or_expired(
    services: Services, database_url: str, session: str, tmp_path: Path
) -> None:
    service = serve(services, database_url, LEASEQ_LEASE_TTL_S="2")
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url) as client:
        hang = {"mode": "hang", "pid_dir": str(tmp_path)}
        [released] = (await client.push(session, [NewLead(hang, max_attempts=2)])).ids
        before: set[int] = set()
        for _ in (1, 2):  # a worker told to stop gives the lead back, each time
            worker = start_worker(service.url, session, ["--grace", "0", "-q", "--", *HANDLER], log)
            try:

                async def running(before: set[int] = before) -> bool:
                    now = set(pids(tmp_path))  # the hang program's and its child's, anew
                    return len(now) == 2 and not now & before and all(map(alive, now))

                await eventually(running, 15)
                before = set(pids(tmp_path))
                worker.send_signal(signal.SIGTERM)
                assert await exited(worker, log) == 0
                assert not any(map(alive, before))
            finally:
                worker.kill()
                worker.wait()
                kill_leftovers(tmp_path)
        lead = await client.get(released)
        assert (lead.status, lead.attempts) == ("failed", 2)
        assert lead.error == "released on attempt 2 of 2: worker shutting down"

        [expired] = (await client.push(session, [NewLead({}, max_attempts=1)])).ids
        [lease] = await client.lease(session, "gone")  # never renewed, never finished

        async def failed() -> bool:
            return (await client.get(expired)).status == "failed"

        await eventually(failed, timeout_s=10)
        assert (await client.get(expired)).error == "lease expired on attempt 1 of 1"
        assert lease.attempt == 1 and await client.lease(session, "late") == []
    for lead_id, ends in ((released, ["released", "released"]), (expired, ["expired"])):
        events = [e for e, _, _ in ledger(database_url, lead_id)]
        assert [e for e in events if e != "pushed" and e != "leased"] == ends
        assert events.count("leased") == len(ends)  # never leased beyond max_attempts
