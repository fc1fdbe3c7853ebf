"""The worker's state machine on a fake clock, against an in-memory service (no PostgreSQL).

Leases are judged on the worker's clock (``Worker(clock=...)``): here a
``FakeClock`` that moves only when the test moves it, so a lease runs out,
or a handler passes its maximum runtime, exactly when the test says, and
never because the machine was slow.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from leaseq.client import AsyncClient, RetryPolicy
from leaseq.limits import MAX_ERROR_CHARS
from leaseq.model import Lead, Lease
from leaseq.worker import Cached, Job, StopReason, Worker
from leaseq.worker.loop import Held, safety_margin
from tests.unit.fake_service import EPOCH, FakeClock, FakeService

pytestmark = pytest.mark.timeout(30)

QUICK = RetryPolicy(attempts=2, base_s=0.001, max_s=0.002)
RETRY_DELAY_S = 7.0


@pytest.fixture
def service() -> FakeService:
    return FakeService(FakeClock())


def worker(service: FakeService, handler: Callable[[Job], Any], **options: Any) -> Worker:
    client = AsyncClient("http://leaseq.test", transport=service.transport(), retry_policy=QUICK)
    options.setdefault("ttl_s", 60.0)
    return Worker(
        client,
        "s",
        handler,
        owner="w",
        wait_s=0,
        grace_s=0,
        cancel_wait_s=2,
        retry_delay=lambda attempt: RETRY_DELAY_S,
        clock=service.clock,
        **options,
    )


async def until(check: Callable[[], bool], within_s: float = 10.0) -> None:
    async with asyncio.timeout(within_s):
        while not check():  # noqa: ASYNC110 (the state is the fake service's)
            await asyncio.sleep(0.005)


class Stalls:
    """An async handler that runs until it is cancelled, noting why it was."""

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.reasons: list[StopReason | None] = []

    async def __call__(self, job: Job) -> None:
        self.started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            self.reasons.append(job.cancel_token.reason)
            raise


# -- a lease held, on its own -------------------------------------------------


def held(received: float = 100.0, ttl_s: float = 30.0) -> Held:
    lead = Lead(
        id=1,
        session="s",
        priority=0,
        payload={},
        key=None,
        depth=0,
        parent_id=None,
        status="leased",
        owner="w",
        attempts=1,
        max_attempts=5,
        available_at=EPOCH,
        lease_expires_at=EPOCH,
        result=None,
        error=None,
        created_at=EPOCH,
        updated_at=EPOCH,
    )
    lease = Lease(lead, "t", 1, "w", EPOCH)
    return Held(Job(lease), valid_until=received + ttl_s - safety_margin(ttl_s), started=received)


def test_a_lease_is_surely_valid_until_its_ttl_less_the_margin() -> None:
    h = held(received=100.0, ttl_s=30.0)
    assert h.valid_until == 129.0  # the margin: 10% of the ttl, at most a second
    assert h.due(128.9, max_runtime_s=None) is None
    assert h.due(129.0, max_runtime_s=None) is StopReason.EXPIRED
    assert h.due(105.0, max_runtime_s=5) is StopReason.MAX_RUNTIME
    assert h.deadline(5) == 105.0 and h.deadline(None) == 129.0


def test_a_confirmed_renewal_counts_from_its_send_time_and_never_shortens() -> None:
    h = held(received=100.0, ttl_s=30.0)
    h.renewed(sent=120.0, ttl_s=30.0)
    assert h.valid_until == 149.0
    h.renewed(sent=110.0, ttl_s=30.0)  # an older renewal's answer, arriving late
    assert h.valid_until == 149.0


def test_losing_the_lease_overrides_any_earlier_reason() -> None:
    h = held()
    h.interrupt(StopReason.SHUTDOWN)
    assert h.reason is StopReason.SHUTDOWN and not h.lost
    h.interrupt(StopReason.MAX_RUNTIME)
    assert h.reason is StopReason.SHUTDOWN  # the first reason stands
    h.interrupt(StopReason.EXPIRED)
    assert h.reason is StopReason.EXPIRED and h.lost
    assert h.job.cancel_token.reason is StopReason.SHUTDOWN and h.job.cancelled


# -- the worker's outcomes ------------------------------------------------------


async def test_a_value_completes_the_lead_and_cached_finishes_it_as_cached(
    service: FakeService,
) -> None:
    done, cached = service.push({"n": 1}, {"n": 2})

    async def handle(job: Job) -> Any:
        return Cached({"from": "elsewhere"}) if job.payload["n"] == 2 else {"seen": job.payload}

    stats = await worker(service, handle).run()
    assert (stats.done, stats.cached, stats.failed, stats.lost) == (1, 1, 0, 0)
    assert (service.leads[done].status, service.leads[done].result) == ("done", {"seen": {"n": 1}})
    assert (service.leads[cached].status, service.leads[cached].result) == (
        "cached",
        {"from": "elsewhere"},
    )


async def test_an_error_is_retried_later_then_fails_with_the_services_error_limit(
    service: FakeService,
) -> None:
    [lead_id] = service.push({}, max_attempts=2)

    def handle(job: Job) -> None:  # a sync handler: it runs in a thread of its own
        raise RuntimeError("x" * (MAX_ERROR_CHARS + 100))

    first = await worker(service, handle).run()
    lead = service.leads[lead_id]
    assert (first.errors, first.released, first.failed) == (1, 1, 0)
    assert (lead.status, lead.released) == ("queued", [RETRY_DELAY_S])

    service.clock.advance(RETRY_DELAY_S)  # the retry is due: the last attempt
    last = await worker(service, handle).run()
    assert (last.errors, last.failed) == (1, 1)
    assert lead.status == "failed" and lead.attempts == 2
    assert lead.error is not None and len(lead.error) == MAX_ERROR_CHARS  # truncated, not refused
    assert lead.error.startswith("RuntimeError: xxx")


async def test_a_result_that_is_not_json_is_an_error(service: FakeService) -> None:
    [lead_id] = service.push({}, max_attempts=1)

    async def handle(job: Job) -> Any:
        return {"when": object()}

    stats = await worker(service, handle).run()
    assert stats.failed == 1
    assert service.leads[lead_id].error is not None
    assert service.leads[lead_id].error.startswith("the result is not JSON")


# -- stopping a handler -------------------------------------------------------------


async def test_a_lost_renewal_stops_the_handler_and_nothing_is_sent(service: FakeService) -> None:
    [lead_id] = service.push({})
    handler = Stalls()
    work = worker(service, handler, ttl_s=0.3)  # a heartbeat every 0.1 s
    run = asyncio.create_task(work.run())
    await handler.started.wait()
    service.lost.add(lead_id)
    stats = await run
    assert handler.reasons == [StopReason.LOST]
    assert (stats.lost, stats.finished) == (1, 0)
    assert "/complete" not in service.paths() and "/release" not in service.paths()


async def test_the_lease_runs_out_on_the_workers_clock_not_the_wall_clock(
    service: FakeService,
) -> None:
    service.push({})
    service.down.add("/renew/batch")  # no renewal is ever confirmed
    handler = Stalls()
    work = worker(service, handler, ttl_s=60)
    run = asyncio.create_task(work.run())
    await handler.started.wait()

    service.clock.advance(58.5)  # however long that took on the wall clock
    work.check_deadlines()
    await asyncio.sleep(0.05)
    assert handler.reasons == [] and not run.done()

    service.clock.advance(0.5)  # 59 s: the ttl less its margin (a second), before the expiry
    work.check_deadlines()
    stats = await run
    assert handler.reasons == [StopReason.EXPIRED]
    assert (stats.lost, stats.finished, stats.released) == (1, 0, 0)
    assert "/complete" not in service.paths() and "/release" not in service.paths()


async def test_max_runtime_on_the_workers_clock_fails_the_attempt(service: FakeService) -> None:
    [lead_id] = service.push({})
    handler = Stalls()
    work = worker(service, handler, max_runtime_s=5)
    run = asyncio.create_task(work.run())
    await handler.started.wait()
    service.clock.advance(5)
    work.check_deadlines()
    stats = await run
    assert handler.reasons == [StopReason.MAX_RUNTIME]
    assert (stats.errors, stats.released, stats.lost) == (1, 1, 0)
    assert service.leads[lead_id].released == [RETRY_DELAY_S]


async def test_stop_releases_the_leads_in_flight_at_once(service: FakeService) -> None:
    [lead_id] = service.push({})
    handler = Stalls()
    work = worker(service, handler)
    run = asyncio.create_task(work.run())
    await handler.started.wait()
    work.stop()  # grace_s = 0
    stats = await run
    assert handler.reasons == [StopReason.SHUTDOWN]
    assert stats.released == 1 and service.leads[lead_id].released == [0.0]


async def test_an_answer_the_service_never_gives_is_given_up_when_the_lease_runs_out(
    service: FakeService,
) -> None:
    [lead_id] = service.push({})
    service.down.add("/complete")

    async def handle(job: Job) -> dict[str, int]:
        return {"n": 1}

    work = worker(service, handle)
    run = asyncio.create_task(work.run())
    await until(lambda: service.paths().count("/complete") >= 3)  # retried while surely valid
    assert not run.done()
    service.clock.advance(60)
    stats = await run
    assert (stats.lost, stats.done) == (1, 0)
    assert service.leads[lead_id].status == "leased"  # left to expire, never sent twice
