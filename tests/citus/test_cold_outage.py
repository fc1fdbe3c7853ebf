"""A worker node stops under a fresh ``leaseq serve``, as a user runs it over REST: the
sessions of the other node keep working, those of the stopped node answer 503
``unavailable`` (never a 500, never a hang), and once the node is back they work again on
the same server; nothing is lost or done twice.

The service is new and asked nothing before the outage's first request: what it knows of
the cluster it read from the catalog when it connected. Each verb is sent for a session of
each node (push, lease, renew, complete, release, a read of one lead), one at a time and
all at once, so the calls of the stopped node's session are in flight while the others'
run on the same pool. How long each answer took is printed (``-s``), never asserted: the
client's timeout is the only deadline.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.model import NewLead
from tests.citus.cluster import Cluster, node_of
from tests.support import leasing_of
from tests.support.serving import Service, Services, until

CANDIDATES = [f"s{n}" for n in range(16)]
CLIENT_TIMEOUT_S = 30.0  # a hang fails here
BACK_WITHIN_S = 20.0


class Side:
    """The leases a session holds for the verbs of one round, taken by the test's queue."""

    def __init__(self, session: str, leases: list[tuple[int, str]], lead_id: int) -> None:
        self.session = session
        self.leases = leases
        self.lead_id = lead_id

    def calls(self) -> dict[str, Callable[[httpx.Client], httpx.Response]]:
        """One request per verb (each lease used by one verb)."""
        s = self.session
        (renewed, token_r), (completed, token_c), (released, token_l) = self.leases
        return {
            "push": lambda c: c.post(f"/sessions/{s}/leads", json={"leads": [{"payload": {}}]}),
            "lease": lambda c: c.post("/lease", json={"session": s, "owner": "w"}),
            "renew": lambda c: c.post("/renew", json={"lead_id": renewed, "token": token_r}),
            "complete": lambda c: c.post(
                "/complete", json={"lead_id": completed, "token": token_c}
            ),
            "release": lambda c: c.post("/release", json={"lead_id": released, "token": token_l}),
            "get": lambda c: c.get(f"/leads/{self.lead_id}"),
        }


async def _side(queue: Queue, session: str) -> Side:
    ids = (await queue.push(session, [NewLead({"n": n}) for n in range(5)])).ids
    leases = await leasing_of(queue).lease_next(session, "setup", max=3, ttl_s=600)
    return Side(session, [(lease.lead.id, lease.token) for lease in leases], ids[-1])


def _send(
    service: Service, calls: dict[str, Callable[[httpx.Client], httpx.Response]]
) -> dict[str, tuple[int, str, float]]:
    """Every call at once: (status, problem code, seconds) of each."""

    def one(call: Callable[[httpx.Client], httpx.Response]) -> tuple[int, str, float]:
        with httpx.Client(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
            start = time.monotonic()
            response = call(client)
            took = time.monotonic() - start
        problem = response.json() if response.status_code >= 400 else {}
        code = f"{problem.get('code', '')}" + (
            f": {problem['detail']}" if "detail" in problem else ""
        )
        return response.status_code, str(code), took

    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = {name: pool.submit(one, call) for name, call in calls.items()}
        return {name: future.result() for name, future in futures.items()}


@pytest.fixture
def restarting(citus_cluster: Cluster) -> Iterator[Cluster]:
    """The cluster, its first worker started again after the test whatever happened."""
    yield citus_cluster
    stopped = citus_cluster.workers[0]
    if stopped.process is None or stopped.process.poll() is not None:
        citus_cluster.start_node(stopped)


@pytest.mark.slow
async def test_a_stopped_worker_node_costs_a_fresh_service_only_its_sessions(
    db: Database, database_url: str, restarting: Cluster, tmp_path: Path
) -> None:
    nodes = node_of(database_url, CANDIDATES)
    stopped = restarting.workers[0]
    down = next(session for session, port in nodes.items() if port == stopped.port)
    up = next(session for session, port in nodes.items() if port != stopped.port)
    queue = Queue(db)
    before = {side: await _side(queue, side) for side in (up, down)}
    services = Services(tmp_path)
    try:
        service = services.start(database_url=database_url, env={"LEASEQ_LOG_LEVEL": "info"})
        restarting.stop_node(stopped)
        try:
            # The stopped node's calls in flight beside the other node's, on one pool.
            answers: dict[str, Any] = {}
            for side, calls in before.items():
                for verb, call in calls.calls().items():
                    answers[f"{side} {verb}"] = call
            during = _send(service, answers)
            # And the other node's alone, after the stopped node's answered.
            after = _send(service, dict(before[up].calls()))
        finally:
            restarting.start_node(stopped)
        print("during the outage (status, code, seconds):", during)
        print("the other node's alone:", after)
        for name, (status, code, _) in during.items():
            if name.startswith(f"{up} "):
                assert status < 300, (name, status, code)
            else:
                assert (status, code.partition(":")[0]) == (503, "unavailable"), (name, code)
        # The other node's leases were used by the first round: a release sent again is
        # lease_lost, a completion sent again answers as the first did.
        assert all(
            status < 300 or code.startswith("lease_lost") for status, code, _ in after.values()
        ), after

        # Back: the stopped node's session works again on the same server.
        with httpx.Client(base_url=service.url, timeout=CLIENT_TIMEOUT_S) as client:
            until(
                lambda: client.get(f"/sessions/{down}/stats").status_code == 200,
                BACK_WITHIN_S,
                "the stopped node's session to answer again",
            )
        again = {side: await _side(queue, side) for side in (up, down)}
        back = _send(
            service,
            {
                f"{side} {verb}": call
                for side in again
                for verb, call in again[side].calls().items()
            },
        )
        print("after the node's return:", back)
        assert all(status < 300 for status, _, _ in back.values()), back
        log = service.log()
    finally:
        services.close()
    assert " 500 " not in log, log

    # Nothing lost or done twice: five leads a round set up, the pushes answered 2xx (three
    # of the other node's session, one of the stopped node's), the completions answered
    # 2xx (the same completion sent again changes nothing).
    for side, pushed, done in ((up, 10 + 3, 2), (down, 10 + 1, 1)):
        counts = await queue.stats(side)
        total = counts.queued + counts.leased + counts.done + counts.failed + counts.cached
        assert (total, counts.done, counts.failed) == (pushed, done, 0), (side, counts)
