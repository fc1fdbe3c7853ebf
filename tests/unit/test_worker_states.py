"""The worker's state machine on a fake clock, against an in-memory service (no PostgreSQL).

Leases are judged on the worker's clock (``Worker(clock=...)``): here a
``FakeClock`` that moves only when the test moves it, so a lease runs out,
or a handler passes its maximum runtime, exactly when the test says, and
never because the machine was slow.
"""

from __future__ import annotations

import asyncio
import math
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from leaseq import AsyncClient, RetryPolicy
from leaseq.errors import Unavailable
from leaseq.limits import MAX_ERROR_CHARS
from leaseq.model import Lead, Lease
from leaseq.worker import Cached, HandlerUnusable, Job, StopReason, Worker, WorkerStats
from leaseq.worker.core import DEFAULT_WORKER_TTL_S
from leaseq.worker.held import (
    Held,
    check_kill_grace,
    kill_grace,
    renew_backoff,
    safety_margin,
)
from tests.unit.fake_service import EPOCH, FakeClock, FakeService

pytestmark = pytest.mark.timeout(30)

QUICK = RetryPolicy(attempts=2, base_s=0.001, max_s=0.002)
RETRY_DELAY_S = 7.0


@pytest.fixture
def service() -> FakeService:
    return FakeService(FakeClock())


def worker(service: FakeService, handler: Callable[[Job], Any], **options: Any) -> Worker:
    client = AsyncClient("http://leaseq.test", transport=service.transport(), retry_policy=QUICK)
    # No prefetch unless a test asks: each test follows one lead's requests in order.
    options = {"ttl_s": 60.0, "wait_s": 0, "grace_s": 0, "prefetch": 0, **options}
    return Worker(
        client,
        "s",
        handler,
        owner="w",
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


def held(sent: float = 100.0, ttl_s: float = 30.0, kill_grace_s: float = 2.0) -> Held:
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
    lease = Lease(lead, "t", 1, "w", EPOCH, ttl_s)
    job = Job(lease, kill_grace_s=kill_grace_s)
    return Held.leased(job, sent=sent, ttl_s=ttl_s, received=sent + 0.5)


def test_the_stop_comes_a_kill_grace_and_a_margin_before_the_lease_can_end() -> None:
    """Timed from the request's send time: the service started the lease after it."""
    h = held(sent=100.0, ttl_s=30.0, kill_grace_s=2.0)
    assert h.valid_until == 130.0  # surely valid until the send time plus the ttl
    assert h.stop_at == 127.0  # less the kill grace (2 s) and the margin (1 s)
    assert h.due(126.9, max_runtime_s=None) is None
    assert h.due(127.0, max_runtime_s=None) is StopReason.EXPIRED
    assert h.due(105.5, max_runtime_s=5) is StopReason.MAX_RUNTIME  # from the handler's start
    assert h.deadline(5) == 105.5 and h.deadline(None) == 127.0
    assert safety_margin(3.0) == pytest.approx(0.3) and safety_margin(300.0) == 1.0


def test_renewals_are_due_a_third_of_the_ttl_after_the_last_confirmed_send() -> None:
    h = held(sent=100.0, ttl_s=30.0)
    assert h.renew_at == 110.0
    h.renewed(sent=111.0, ttl_s=30.0)  # its answer came much later: the schedule keeps to 111
    assert (h.valid_until, h.renew_at, h.stop_at) == (141.0, 121.0, 138.0)
    h.renewed(sent=105.0, ttl_s=30.0)  # an older renewal's answer, arriving late
    assert (h.valid_until, h.renew_at) == (141.0, 121.0)  # never shortens
    h.renew_failed(now=121.0)
    h.renew_failed(now=121.1)
    h.renew_failed(now=121.3)
    assert h.renew_at == pytest.approx(121.7)  # 0.1 s, doubling: quick retries
    assert [renew_backoff(n, 30.0) for n in (1, 2, 3, 4, 5, 6)] == [0.1, 0.2, 0.4, 0.8, 1.5, 1.5]
    assert renew_backoff(9, 1.5) == 0.1  # a short lease retries at once and often
    assert renew_backoff(9, 3600.0) == 2.0


def test_the_kill_grace_leaves_half_the_ttl_for_renewals() -> None:
    assert kill_grace(300.0) == 2.0  # the default
    assert kill_grace(3.0) == pytest.approx(0.3)  # a tenth of a short ttl
    assert kill_grace(3.0, 10.0) == pytest.approx(1.2)  # clamped: 1.5 s less the margin
    assert kill_grace(60.0, 5.0) == 5.0
    check_kill_grace(60.0, 29.0)
    with pytest.raises(ValueError, match=r"at most 1\.2s"):
        check_kill_grace(3.0, 2.0)


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


async def test_sync_handlers_run_on_threads_kept_for_the_next_lead(service: FakeService) -> None:
    """As many threads as leads run at once, not a new one per lead."""
    ids = service.push(*({"n": n} for n in range(6)))
    threads: list[int] = []

    def handle(job: Job) -> int:
        threads.append(threading.get_ident())
        return int(job.payload["n"])

    stats = await worker(service, handle).run()
    assert stats.done == 6 and [service.leads[i].result for i in ids] == list(range(6))
    assert len(set(threads)) == 1 and threads[0] != threading.get_ident()


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


# -- renewals and the stop, on the worker's clock ---------------------------------


async def started(service: FakeService, **options: Any) -> tuple[Worker, Stalls, asyncio.Task[Any]]:
    """A worker running a ``Stalls`` handler on one lead pushed beforehand."""
    handler = Stalls()
    work = worker(service, handler, **options)
    run = asyncio.create_task(work.run())
    await handler.started.wait()
    return work, handler, run


async def advance(service: FakeService, work: Worker, seconds: float) -> None:
    """Move the worker's clock and let it act on it (its renewals, its deadlines)."""
    service.clock.advance(seconds)
    work.check_deadlines()
    for _ in range(5):
        await asyncio.sleep(0.01)


async def test_a_lost_renewal_stops_the_handler_and_nothing_is_sent(service: FakeService) -> None:
    [lead_id] = service.push({})
    work, handler, run = await started(service, ttl_s=30)
    service.lost.add(lead_id)
    await advance(service, work, 10)  # the first renewal is due a third of the ttl in
    stats = await run
    assert handler.reasons == [StopReason.LOST]
    assert (stats.lost, stats.finished) == (1, 0)
    assert "/complete" not in service.paths() and "/release" not in service.paths()


async def test_the_lease_is_timed_from_when_its_request_was_sent(service: FakeService) -> None:
    """A lease whose answer took 15 s to come is stopped 15 s sooner than its receipt says."""
    service.push({})
    service.down.add("/renew/batch")  # no renewal is ever confirmed
    service.takes_s["/lease"] = 15.0
    work, handler, run = await started(service, ttl_s=60)  # sent at 1000, stop at 1057
    await advance(service, work, 1056.9 - service.clock())
    assert handler.reasons == [] and not run.done()
    await advance(service, work, 0.1)  # 1057: 60 s less the kill grace (2 s) and margin (1 s)
    stats = await run
    assert handler.reasons == [StopReason.EXPIRED]
    assert (stats.lost, stats.finished, stats.released) == (1, 0, 0)
    assert "/complete" not in service.paths() and "/release" not in service.paths()


async def test_a_lease_answered_late_runs_only_once_a_renewal_confirms_it(
    service: FakeService,
) -> None:
    """A long poll that waited 25 s of a 60 s lease: its age is unknown, so it is renewed first."""
    service.push({})
    service.takes_s["/lease"] = 25.0  # more than a third of the ttl: the renewal is due on arrival
    handler = Stalls()
    work = worker(service, handler, ttl_s=60)
    run = asyncio.create_task(work.run())
    await until(lambda: handler.started.is_set())
    assert service.paths() == ["/lease", "/renew/batch"]  # renewed (at 1025) before it ran
    service.down.add("/renew/batch")  # no renewal after that one
    await advance(service, work, 56.9)  # 1081.9: 60 s from the renewal, less grace and margin
    assert not handler.reasons
    await advance(service, work, 0.1)
    assert (await run).lost == 1 and handler.reasons == [StopReason.EXPIRED]


async def test_a_late_lease_that_cannot_be_confirmed_never_runs(service: FakeService) -> None:
    [lead_id] = service.push({})
    service.takes_s["/lease"] = 25.0
    service.down.add("/renew/batch")
    handler = Stalls()
    work = worker(service, handler, ttl_s=60)
    run = asyncio.create_task(work.run())
    await until(lambda: "/renew/batch" in service.paths())
    await advance(service, work, 59.9)  # received at 1025: surely over at 1085
    assert not run.done()
    await advance(service, work, 0.1)
    stats = await run
    assert not handler.started.is_set() and (stats.lost, stats.finished) == (1, 0)
    assert service.leads[lead_id].status == "leased"  # nothing sent: left to expire


async def test_renewals_keep_to_their_schedule_and_retry_quickly(service: FakeService) -> None:
    """Sent a third of the ttl after the last confirmed send time; after a failure, soon."""
    [lead_id] = service.push({})
    work, handler, run = await started(service, ttl_s=30)  # leased at 1000
    service.takes_s["/renew/batch"] = 5.0  # every answer takes 5 s
    await advance(service, work, 10)  # 1010: due; sent at 1010, answered at 1015
    assert service.paths().count("/renew/batch") == 1
    await advance(service, work, 4.9)  # 1019.9: not yet (1010 + 10), whatever the slow answer
    assert service.paths().count("/renew/batch") == 1
    await advance(service, work, 0.1)  # 1020
    assert service.paths().count("/renew/batch") == 2
    del service.takes_s["/renew/batch"]
    service.down.add("/renew/batch")
    await advance(service, work, 10)  # due at 1030 (sent at 1025): fails
    await advance(service, work, 0.1)  # retried 0.1 s later
    await advance(service, work, 0.2)  # then 0.2 s
    assert service.paths().count("/renew/batch") == 5
    service.down.clear()
    await advance(service, work, 0.4)
    assert service.paths().count("/renew/batch") == 6
    assert not handler.reasons and service.leads[lead_id].status == "leased"
    work.stop()
    await run


async def test_each_renewal_waits_no_longer_than_the_lease_has_left(service: FakeService) -> None:
    service.push({})
    service.down.add("/renew/batch")
    work, _, run = await started(service, ttl_s=30)  # stop at 1027 unless renewed
    await advance(service, work, 10)  # 17 s left: the client's own timeout (10 s) is shorter
    await advance(service, work, 15)  # 1025: the retry has 2 s left before the stop
    assert service.timeouts("/renew/batch") == [pytest.approx(10.0), pytest.approx(2.0)]
    work.stop()
    await run


async def test_a_hung_renewal_is_cut_off_and_the_handler_stopped_in_time(
    service: FakeService,
) -> None:
    """The service hangs: the call times out (real time) and the stop still comes at its time."""
    service.push({})
    service.held["/renew/batch"] = asyncio.Event()  # never set: no answer ever
    work, handler, run = await started(service, ttl_s=3)  # stop at 1000 + 3 - 0.3 - 0.3
    await advance(service, work, 1.0)  # due: sent, hangs; its timeout is 1.4 s
    assert service.timeouts("/renew/batch") == [pytest.approx(1.4)]
    await asyncio.sleep(1.6)  # it timed out; the worker's clock has not moved
    assert handler.reasons == []
    await advance(service, work, 1.41)  # past 1002.4
    stats = await run
    assert handler.reasons == [StopReason.EXPIRED] and stats.lost == 1


async def test_without_a_ttl_the_worker_asks_for_a_short_lease_not_the_services_default(
    service: FakeService,
) -> None:
    """A worker killed outright strands its leads for its own 30 s, not the service's 90."""
    service.default_ttl_s = 90.0
    service.push({})
    work, _, run = await started(service, ttl_s=None)
    [(_, lease_body)] = [(p, b) for p, b in service.requests if p == "/lease"]
    assert lease_body["ttl_s"] == DEFAULT_WORKER_TTL_S == 30.0
    await advance(service, work, 9.9)
    assert "/renew/batch" not in service.paths()
    await advance(service, work, 0.1)  # a third of the worker's 30 s
    [renewal] = [b for p, b in service.requests if p == "/renew/batch"]
    assert renewal["items"][0]["ttl_s"] == 30.0
    work.stop()
    await run


async def test_max_runtime_on_the_workers_clock_fails_the_attempt(service: FakeService) -> None:
    [lead_id] = service.push({})
    work, handler, run = await started(service, max_runtime_s=5)
    await advance(service, work, 5)
    stats = await run
    assert handler.reasons == [StopReason.MAX_RUNTIME]
    assert (stats.errors, stats.released, stats.lost) == (1, 1, 0)
    assert service.leads[lead_id].released == [RETRY_DELAY_S]


async def test_stop_releases_the_leads_in_flight_at_once(service: FakeService) -> None:
    [lead_id] = service.push({})
    work, handler, run = await started(service)
    work.stop()  # grace_s = 0
    stats = await run
    assert handler.reasons == [StopReason.SHUTDOWN]
    assert stats.released == 1 and service.leads[lead_id].released == [0.0]
    [(_, body)] = [(p, b) for p, b in service.requests if p == "/release"]
    assert body["error"] == "worker shutting down"  # kept should it be the last attempt


async def test_a_handler_that_will_not_stop_is_never_released(service: FakeService) -> None:
    """It may still run: giving its lead back would let a second run start beside it."""
    [lead_id] = service.push({})
    running, let_go = threading.Event(), threading.Event()

    def deaf(job: Job) -> None:  # a sync handler that never looks at its cancel token
        running.set()
        let_go.wait(30)

    work = worker(service, deaf, ttl_s=5, max_runtime_s=1)  # kill grace 0.5 s, margin 0.5 s
    run = asyncio.create_task(work.run())
    await until(running.is_set)
    try:
        await advance(service, work, 1)  # max runtime: told to stop, and it does not
        stats = await asyncio.wait_for(run, 5)
    finally:
        let_go.set()
    assert (stats.abandoned, stats.released, stats.lost, stats.finished) == (1, 0, 0, 0)
    assert "/release" not in service.paths() and "/complete" not in service.paths()
    assert service.leads[lead_id].status == "leased"  # left to expire


async def test_an_unusable_handler_releases_its_lead_and_ends_the_run(
    service: FakeService,
) -> None:
    first, second = service.push({}, {})

    async def cannot(job: Job) -> None:
        raise HandlerUnusable("cannot start ./missing: No such file or directory")

    with pytest.raises(HandlerUnusable, match="missing"):
        await worker(service, cannot).run()
    assert service.leads[first].released == [0.0]
    assert service.leads[second].status == "queued" and service.leads[second].attempts == 0
    [(_, body)] = [(p, b) for p, b in service.requests if p == "/release"]
    assert "missing" in body["error"]


async def test_an_unreachable_service_ends_the_run_after_give_up_s(service: FakeService) -> None:
    service.down.add("/lease")
    service.takes_s["/lease"] = 1.0  # each try costs a second of the worker's clock
    with pytest.raises(Unavailable, match=r"gave up after [\d.]+s .*http://leaseq\.test"):
        await worker(service, Stalls(), give_up_s=5).run()
    assert 5 <= service.paths().count("/lease") <= 8


async def test_giving_up_on_the_service_stops_the_leads_in_flight_at_once(
    service: FakeService,
) -> None:
    """A 300 s lease in flight does not keep a worker that gave up waiting 300 s more."""
    service.push({})
    work, handler, run = await started(service, concurrency=2, give_up_s=5, ttl_s=300)
    service.down.update({"/lease", "/release"})
    service.takes_s["/lease"] = 1.0
    with pytest.raises(Unavailable, match="gave up"):
        await asyncio.wait_for(run, 10)
    assert handler.reasons == [StopReason.SHUTDOWN]
    assert (work.stats.lost, work.stats.released) == (1, 0)
    assert service.paths().count("/release") == QUICK.attempts  # one call, not until the end


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


async def test_a_completion_whose_answer_was_lost_counts_as_done(service: FakeService) -> None:
    """The service's completion is idempotent: the retry's 200 is the first one's."""
    [lead_id] = service.push({})
    answers = iter([httpx.ReadTimeout("lost on the way back")])
    inner = service.handle

    async def loses_one_answer(request: httpx.Request) -> httpx.Response:
        response = await inner(request)
        if request.url.path == "/complete" and (lost := next(answers, None)) is not None:
            raise lost  # the completion happened; its answer never arrives
        return response

    client = AsyncClient(
        "http://leaseq.test", transport=httpx.MockTransport(loses_one_answer), retry_policy=QUICK
    )

    async def handle(job: Job) -> dict[str, int]:
        return {"n": 1}

    stats = await Worker(client, "s", handle, owner="w", wait_s=0, clock=service.clock).run()
    assert (stats.done, stats.lost) == (1, 0)
    assert service.paths().count("/complete") == 2
    assert service.leads[lead_id].status == "done"


def test_worker_stats_say_when_it_started_and_count_busy_time_only() -> None:
    clock = FakeClock()
    stats = WorkerStats(clock=clock)
    assert stats.started.tzinfo is not None  # a wall-clock instant, for people
    clock.advance(10)  # waiting for work: not counted
    stats.holding(2)
    clock.advance(4)
    stats.done = 8
    stats.holding(0)
    clock.advance(100)
    assert stats.busy() == 4 and stats.rate() == 2.0


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("ttl_s", 0.5),
        ("ttl_s", 3601.0),
        ("ttl_s", math.nan),
        ("grace_s", -1.0),
        ("grace_s", math.inf),
        ("max_runtime_s", 0.0),
        ("max_runtime_s", 1e12),
        ("wait_s", 31.0),
        ("kill_grace_s", -0.1),
        ("give_up_s", 0.0),
    ],
)
def test_an_absurd_option_is_refused_before_anything_is_sent(option: str, value: float) -> None:
    service = FakeService(FakeClock())
    with pytest.raises(ValueError, match=option):
        worker(service, Stalls(), **{option: value})
    with pytest.raises(ValueError, match="too long for a ttl"):
        worker(service, Stalls(), ttl_s=3, kill_grace_s=2)
    assert service.requests == []


# -- one request per lead ------------------------------------------------------


async def test_a_busy_worker_sends_one_request_per_lead(service: FakeService) -> None:
    service.push(*({"n": n} for n in range(5)))
    stats = await worker(service, lambda job: job.payload["n"]).run()
    assert stats.done == 5
    # The first lease, then each completion leases the next; the last finds nothing, and a
    # lease of its own says the queue is empty.
    assert service.paths() == ["/lease"] + ["/complete"] * 5 + ["/lease"]
    nexts = [body["next"] for path, body in service.requests if path == "/complete"]
    assert nexts == [{"session": "s", "owner": "w", "max": 1, "wait_s": 0.0, "ttl_s": 60.0}] * 5
    assert all(lead.status == "done" for lead in service.leads.values())


async def test_one_slot_with_a_lead_prefetched_is_still_one_request_per_lead(
    service: FakeService,
) -> None:
    """The next lead is held while the handler runs; each completion frees its slot as it is
    answered, so the next one asks for it (``next``) and no lease of its own goes between."""
    service.push(*({"n": n} for n in range(8)))

    async def handle(job: Job) -> None:
        return None

    stats = await worker(service, handle, prefetch=None).run()
    assert stats.done == 8
    assert service.paths() == ["/lease"] + ["/complete"] * 8 + ["/lease"]
    [first] = [body for path, body in service.requests if path == "/lease"][:1]
    assert first["max"] == 2  # the slot and the lead prefetched
    # Each a lone completion: /complete (one statement on the service) with next.
    completions = [body for path, body in service.requests if path == "/complete"]
    assert [b["next"]["max"] for b in completions] == [1] * 8


async def test_without_lease_on_complete_a_lead_is_two_requests(service: FakeService) -> None:
    service.push({"n": 0}, {"n": 1})
    stats = await worker(service, lambda job: None, lease_on_complete=False).run()
    assert stats.done == 2
    assert service.paths() == ["/lease", "/complete", "/lease", "/complete", "/lease"]
    assert all("next" not in body for path, body in service.requests if path == "/complete")


async def test_a_service_that_takes_no_next_gets_plain_completions(
    service: FakeService,
) -> None:
    service.push({"n": 0}, {"n": 1})
    plain = service._complete

    def no_next(body: dict[str, Any]) -> httpx.Response:
        if "next" in body:  # as a service before `next` answers an unknown field
            return httpx.Response(
                422,
                json={
                    "code": "validation_error",
                    "detail": "body.next: Extra inputs are not permitted",
                },
                headers={"content-type": "application/problem+json"},
            )
        return plain(body)

    service._complete = no_next  # type: ignore[method-assign]
    stats = await worker(service, lambda job: None).run()
    assert stats.done == 2 and stats.errors == 0
    assert service.paths() == ["/lease", "/complete", "/complete", "/lease", "/complete", "/lease"]
