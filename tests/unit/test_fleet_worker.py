"""The worker's side of fleets, on a fake clock against an in-memory service (no PostgreSQL):
checkpoints ride on renewals, leases across sessions, and ``leaseq sessions``' parsing."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import httpx
import pytest

from leaseq import AsyncClient
from leaseq.cli.sessions import changed, describe, parse_rate
from leaseq.model import SessionSettings
from leaseq.worker import Job, StopReason
from leaseq.worker.job import Checkpoints
from leaseq.worker.runner import Options, build
from tests.unit.fake_service import FakeClock, FakeService
from tests.unit.test_worker_states import QUICK, advance, until, worker

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def service() -> FakeService:
    return FakeService(FakeClock())


class Saves:
    """An async handler that sets ``checkpoints`` one by one as the test says, then returns."""

    def __init__(self, *to_set: Any) -> None:
        self.job: Job | None = None
        self.next = asyncio.Event()
        self.to_set = list(to_set)

    async def __call__(self, job: Job) -> str:
        self.job = job
        while True:
            await self.next.wait()
            self.next.clear()
            if not self.to_set:
                return "done"
            job.checkpoint(self.to_set.pop(0))


async def test_a_checkpoint_rides_on_the_next_renewal_once(service: FakeService) -> None:
    [lead_id] = service.push({})
    handler = Saves({"page": 3}, {"page": 7})
    work = worker(service, handler, ttl_s=30)
    run = asyncio.create_task(work.run())
    await until(lambda: handler.job is not None)
    handler.next.set()  # sets {"page": 3}
    await until(lambda: handler.job is not None and handler.job.saved_checkpoint == {"page": 3})
    assert service.leads[lead_id].checkpoint is None  # not before the heartbeat
    await advance(service, work, 10)  # the renewal is due a third of the ttl in
    renewals = [body for path, body in service.requests if path == "/renew/batch"]
    assert renewals[-1]["items"][0]["checkpoint"] == {"page": 3}
    assert service.leads[lead_id].checkpoint == {"page": 3}
    await advance(service, work, 10)  # nothing new: the next renewal carries none
    renewals = [body for path, body in service.requests if path == "/renew/batch"]
    assert len(renewals) == 2 and "checkpoint" not in renewals[-1]["items"][0]
    handler.next.set()  # sets {"page": 7}
    await until(lambda: handler.job is not None and handler.job.saved_checkpoint == {"page": 7})
    await advance(service, work, 10)
    assert service.leads[lead_id].checkpoint == {"page": 7}
    handler.next.set()  # returns
    stats = await run
    assert stats.done == 1 and service.leads[lead_id].status == "done"


async def test_a_checkpoint_not_sent_yet_is_carried_before_the_lead_is_given_back(
    service: FakeService,
) -> None:
    [lead_id] = service.push({})

    def handle(job: Job) -> None:
        job.checkpoint({"rows": 500})  # progress, then a failure before any heartbeat
        raise RuntimeError("the database went away")

    stats = await worker(service, handle, ttl_s=30).run()
    assert stats.released == 1
    assert service.paths()[:3] == ["/lease", "/renew", "/release"]
    lead = service.leads[lead_id]
    assert lead.checkpoint == {"rows": 500} and lead.status == "queued"

    # The next holder starts where this one got to.
    seen: list[Any] = []

    def resume(job: Job) -> str:
        seen.append((job.lead.checkpoint, job.saved_checkpoint))
        return "ok"

    service.clock.advance(60)
    assert (await worker(service, resume).run()).done == 1
    assert seen == [({"rows": 500}, {"rows": 500})]


async def test_a_checkpoint_the_service_refuses_is_dropped_and_the_lease_kept(
    service: FakeService,
) -> None:
    [lead_id] = service.push({})
    handler = Saves("too large")
    service.refused.append("too large")
    work = worker(service, handler, ttl_s=30)
    run = asyncio.create_task(work.run())
    await until(lambda: handler.job is not None)
    handler.next.set()
    await until(lambda: handler.job is not None and handler.job.saved_checkpoint == "too large")
    await advance(service, work, 10)  # refused (422) with it
    await advance(service, work, 0.1)  # retried at once, without it: renewed
    assert service.leads[lead_id].checkpoint is None
    assert handler.job is not None and handler.job.cancel_token.reason is None
    handler.next.set()
    assert (await run).done == 1 and service.leads[lead_id].status == "done"


def test_a_checkpoint_must_be_json_and_not_null() -> None:
    checkpoints = Checkpoints(saved={"from": "the lead"})
    assert checkpoints.latest == {"from": "the lead"} and checkpoints.unsent() is None
    for bad in (None, {1, 2}, float("nan"), object()):
        with pytest.raises(ValueError):
            checkpoints.set(bad)
    assert checkpoints.unsent() is None

    def set_many(n: int) -> None:
        for i in range(200):
            checkpoints.set({"thread": n, "i": i})

    threads = [threading.Thread(target=set_many, args=(n,)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    unsent = checkpoints.unsent()
    assert unsent is not None and unsent[0] == 800 and unsent[1]["i"] == 199
    checkpoints.sent(799)  # a renewal carrying an older one: the newest is still unsent
    assert checkpoints.unsent() == unsent
    checkpoints.sent(800)
    assert checkpoints.unsent() is None


async def test_leases_name_one_session_several_or_none() -> None:
    bodies: list[dict[str, Any]] = []

    async def answer(request: httpx.Request) -> httpx.Response:
        bodies.append(json.loads(request.content))
        return httpx.Response(200, json={"leases": []})

    transport = httpx.MockTransport(answer)
    async with AsyncClient("http://leaseq.test", transport=transport, retry_policy=QUICK) as api:
        await api.lease("a", "w")
        await api.lease(["a", "b"], "w")
        await api.lease(None, "w")
    assert [(b.get("session"), b.get("sessions")) for b in bodies] == [
        ("a", None),
        (None, ["a", "b"]),
        (None, None),
    ]


def test_the_worker_takes_sessions_or_any_session_not_both() -> None:
    url = "http://leaseq.test"
    assert build(Options(url, sessions=("a",), command=("true",))).session == "a"
    assert build(Options(url, sessions=("a", "b"), command=("true",))).session == ("a", "b")
    assert build(Options(url, any_session=True, command=("true",))).session is None
    for wrong in (Options(url, command=("true",)), Options(url, ("a",), True, ("true",))):
        with pytest.raises(ValueError, match="--any-session"):
            build(wrong)


def test_rates_and_settings_as_people_write_them() -> None:
    assert parse_rate("5/s") == 5 and parse_rate("5") == 5 and parse_rate("0.5/sec") == 0.5
    assert parse_rate("300/min") == 5 and parse_rate("7200/h") == 2 and parse_rate("None") is None
    for bad in ("fast", "5/week", "-1/s", "5/"):
        with pytest.raises(ValueError, match="--rate"):
            parse_rate(bad)
    current = SessionSettings(weight=2, max_leased=4, rate_per_s=1, burst=3)
    assert changed(current, weight=None, max_leased="10", rate=None, burst=None) == (
        SessionSettings(weight=2, max_leased=10, rate_per_s=1, burst=3)
    )
    lifted = changed(current, weight=3, max_leased="none", rate="none", burst=None)
    assert lifted == SessionSettings(weight=3)  # a rate lifted takes its burst along
    with pytest.raises(ValueError, match="--max-leased"):
        changed(current, weight=None, max_leased="lots", rate=None, burst=None)
    assert describe(current) == "weight 2, max leased 4, rate 1/s (burst 3)"
    assert describe(SessionSettings()) == "weight 1, no cap, no rate"


def test_stop_reasons_are_unchanged_by_checkpoints() -> None:
    assert StopReason.LOST.lease_gone and not StopReason.SHUTDOWN.lease_gone
