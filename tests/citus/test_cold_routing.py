"""Every call that names one session or one lease is a router statement of that session, from
the first request of a fresh ``leaseq serve``, as a user runs it over REST.

Each verb gets a service process of its own, started on the cluster's coordinator and
asked nothing before the verb's request: the process met no refusal, so what it knows of
the cluster it read from the catalog when it connected (``app.store.topology``). What the
request sent is read from ``citus_stat_statements`` on the coordinator (the statements
whose count grew while it ran): each one Citus ran is a router statement whose partition
key is the request's session. The lead's own setup (a push, a lease to hold) is done by
the test's own queue before the service starts, in a session of the verb's own.

Left out of the comparison: the service's maintenance loops, which read every session by
design (the sessions the promoter and the sweeper would change, the due schedules), and
the reference tables' statements (a watch of an outcome wait is a row of every node).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import re
import uuid
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import Database
from leaseq.model import NewLead, SessionSettings
from tests.citus.cluster import Cluster
from tests.support import leasing_of
from tests.support.serving import Service, Services, until

# What the maintenance loops send (they read every session by design: the sessions the
# promoter, the sweeper and the pruner would change; the scheduler's look), and the writes of
# reference tables (a watch of an outcome wait, an operator's audit row, the settings the
# service keeps in leaseq_config as it starts: rows of every node by design).
BACKGROUND = re.compile(
    r"^(SELECT DISTINCT session FROM|INSERT INTO lead_waits|DELETE FROM lead_waits"
    r"|INSERT INTO operator_actions)|\bFROM schedules\b|\bleaseq_config\b"
)
# The pruner's last statement of a pass: the first pass runs as the service starts.
PRUNED = "DELETE FROM lead_waits WHERE until <"
QUIET = {
    "LEASEQ_LOG_LEVEL": "info",
    "LEASEQ_SWEEP_INTERVAL_S": "3600",
    "LEASEQ_PRUNE_INTERVAL_S": "3600",
}


@dataclass(frozen=True)
class Ran:
    """A statement the coordinator ran during a request: how often, and how Citus ran it."""

    query: str
    executor: str
    partition_key: str | None
    calls: int


def _snapshot(url: str) -> dict[tuple[int, str | None], tuple[str, str, int]]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT queryid, partition_key, executor, query, calls FROM citus_stat_statements"
            " WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchall()
    return {(row[0], row[1]): (row[3], row[2], row[4]) for row in rows}


def _ran(
    before: dict[tuple[int, str | None], tuple[str, str, int]],
    after: dict[tuple[int, str | None], tuple[str, str, int]],
) -> list[Ran]:
    """The statements whose count grew, but the maintenance loops' and reference tables'."""
    found = []
    for key, (query, executor, calls) in after.items():
        grew = calls - before.get(key, (query, executor, 0))[2]
        flat = re.sub(r"\s+", " ", query)
        if grew > 0 and not BACKGROUND.search(flat):
            found.append(Ran(flat[:100], executor, key[1], grew))
    return found


@pytest.fixture(scope="module")
def cold_url(citus_cluster: Cluster) -> Iterator[str]:
    """One database of the cluster for the module, migrated, with pg_stat_statements (what
    ``citus_stat_statements`` reads); each test uses sessions of its own in it."""
    name = f"leaseq_cold_{uuid.uuid4().hex[:12]}"
    url = citus_cluster.create_database(name)
    migrate.upgrade(url)
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
    yield url
    citus_cluster.drop_database(name)


@pytest.fixture
async def setup_queue(cold_url: str) -> Any:
    """The test's own queue on the cluster, for the leads and leases a verb needs first."""
    db = Database.from_settings(Settings(database_url=cold_url), pool_size=4)
    async with db:
        yield Queue(db)


class Cold:
    """A verb's setup, then its request to a fresh ``leaseq serve``: ``fresh()`` starts it."""

    def __init__(self, url: str, queue: Queue, services: Services, session: str) -> None:
        self.url = url
        self.queue = queue
        self.services = services
        self.session = session

    async def lease(self, n: int = 1, **fields: Any) -> list[tuple[int, str]]:
        """``n`` leads pushed and leased by the test's queue: (id, token) of each."""
        await self.queue.push(self.session, [NewLead({"n": i}, **fields) for i in range(n)])
        leases = await leasing_of(self.queue).lease_next(self.session, "setup", max=n, ttl_s=300)
        assert len(leases) == n
        return [(lease.lead.id, lease.token) for lease in leases]

    async def pushed(self, **fields: Any) -> int:
        [lead_id] = (await self.queue.push(self.session, [NewLead({}, **fields)])).ids
        return lead_id

    def fresh(self) -> Service:
        """A new ``leaseq serve``, ready, once its pruner's first pass is over (it starts
        with the process, and would run beside the request)."""
        before = _pruned(self.url)
        service = self.services.start(database_url=self.url, env=QUIET)
        until(lambda: _pruned(self.url) > before, 30.0, "the pruner's first pass")
        return service


def _pruned(url: str) -> int:
    """How often the pruner ended a pass, so far."""
    return sum(calls for query, _, calls in _snapshot(url).values() if query.startswith(PRUNED))


def _one_at_a_time(service: Service, requests: list[Callable[[httpx.Client], Any]]) -> None:
    with service.client() as client:
        for request in requests:
            request(client)


def ok(response: httpx.Response) -> httpx.Response:
    assert response.status_code < 300, (response.status_code, response.text)
    return response


async def verb_push(cold: Cold) -> Callable[[httpx.Client], Any]:
    leads = [{"payload": {}}]
    return lambda c: ok(c.post(f"/sessions/{cold.session}/leads", json={"leads": leads}))


async def verb_push_keyed(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.pushed(key="k1")  # one of the keys is in the session already
    leads = [{"payload": {}, "key": "k1"}, {"payload": {}, "key": "k2"}]
    return lambda c: ok(c.post(f"/sessions/{cold.session}/leads", json={"leads": leads}))


async def verb_push_idempotent(cold: Cold) -> Callable[[httpx.Client], Any]:
    leads = [{"payload": {}}]
    path, headers = f"/sessions/{cold.session}/leads", {"Idempotency-Key": "push-1"}
    return lambda c: ok(c.post(path, json={"leads": leads}, headers=headers))


async def verb_push_many(cold: Cold) -> Callable[[httpx.Client], Any]:
    leads = [{"payload": {"n": i}, "key": f"k{i}"} for i in range(300)]  # several statements
    return lambda c: ok(c.post(f"/sessions/{cold.session}/leads", json={"leads": leads}))


async def verb_push_after(cold: Cold) -> Callable[[httpx.Client], Any]:
    parent = await cold.pushed()
    leads = [{"payload": {}, "after": [parent]}]
    return lambda c: ok(c.post(f"/sessions/{cold.session}/leads", json={"leads": leads}))


async def verb_push_delayed(cold: Cold) -> Callable[[httpx.Client], Any]:
    leads = [{"payload": {}, "delay_s": 3600}]  # due after the module: no promotion
    return lambda c: ok(c.post(f"/sessions/{cold.session}/leads", json={"leads": leads}))


async def verb_lease(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.pushed()
    return lambda c: ok(c.post("/lease", json={"session": cold.session, "owner": "w"}))


async def verb_lease_many(cold: Cold) -> Callable[[httpx.Client], Any]:
    for _ in range(3):
        await cold.pushed()
    return lambda c: ok(c.post("/lease", json={"session": cold.session, "owner": "w", "max": 3}))


async def verb_lease_keyed(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.pushed()
    body = {"session": cold.session, "owner": "w"}
    return lambda c: ok(c.post("/lease", json=body, headers={"Idempotency-Key": "lease-1"}))


async def verb_lease_limited(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.queue.put_settings(cold.session, SessionSettings(max_leased=5))
    await cold.pushed()
    return lambda c: ok(c.post("/lease", json={"session": cold.session, "owner": "w"}))


async def verb_lease_per_key(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.queue.put_settings(cold.session, SessionSettings(max_leased_per_key=1))
    await cold.pushed(concurrency_key="a")
    return lambda c: ok(c.post("/lease", json={"session": cold.session, "owner": "w"}))


async def verb_lease_grouped(cold: Cold) -> Callable[[httpx.Client], Any]:
    for _ in range(8):
        await cold.pushed()
    body = {"session": cold.session, "owner": "w"}

    def together(client: httpx.Client) -> None:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            for done in [pool.submit(client.post, "/lease", json=body) for _ in range(8)]:
                ok(done.result())

    return together


async def verb_lease_waiting(cold: Cold) -> Callable[[httpx.Client], Any]:
    body = {"session": cold.session, "owner": "w", "wait_s": 20}

    def waiting(client: httpx.Client) -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiter = pool.submit(client.post, "/lease", json=body, timeout=40)
            # The lead comes once the lease waits (or before: then it takes it at once).
            asyncio.run(_push_other_loop(cold.url, cold.session))
            assert ok(waiter.result()).json()["leases"], "the waiting lease took nothing"

    return waiting


async def _push_other_loop(url: str, session: str) -> None:
    db = Database.from_settings(Settings(database_url=url), pool_size=1)
    async with db:
        await Queue(db).push(session, [NewLead({})])


async def verb_renew(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    return lambda c: ok(c.post("/renew", json={"lead_id": lead_id, "token": token}))


async def verb_renew_batch(cold: Cold) -> Callable[[httpx.Client], Any]:
    items = [{"lead_id": i, "token": t} for i, t in await cold.lease(2)]
    return lambda c: ok(c.post("/renew/batch", json={"items": items}))


async def verb_complete(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    return lambda c: ok(c.post("/complete", json={"lead_id": lead_id, "token": token}))


async def verb_complete_failed(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    body = {"lead_id": lead_id, "token": token, "status": "failed", "error": "no"}
    return lambda c: ok(c.post("/complete", json=body))


async def verb_complete_next(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    await cold.pushed()
    body = {"lead_id": lead_id, "token": token, "next": {"session": cold.session, "owner": "w"}}
    return lambda c: ok(c.post("/complete", json=body))


async def verb_complete_next_keyed(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    await cold.pushed()
    body = {"lead_id": lead_id, "token": token, "next": {"session": cold.session, "owner": "w"}}
    headers = {"Idempotency-Key": "complete-next-1"}
    return lambda c: ok(c.post("/complete", json=body, headers=headers))


async def verb_complete_next_keyed_again(cold: Cold) -> Callable[[httpx.Client], Any]:
    """A keyed completion with next sent again after its answer was lost: the completion
    found made (``completed_already``), the key's leases handed back (``valid_leases``)."""
    [(lead_id, token)] = await cold.lease()
    await cold.pushed()
    body = {"lead_id": lead_id, "token": token, "next": {"session": cold.session, "owner": "w"}}
    headers = {"Idempotency-Key": "complete-next-1"}

    def twice(client: httpx.Client) -> None:
        first = ok(client.post("/complete", json=body, headers=headers)).json()
        assert ok(client.post("/complete", json=body, headers=headers)).json() == first

    return twice


async def verb_complete_batch_next(cold: Cold) -> Callable[[httpx.Client], Any]:
    items = [{"lead_id": i, "token": t} for i, t in await cold.lease(2)]
    await cold.pushed()
    body = {"items": items, "next": {"session": cold.session, "owner": "w", "max": 2}}
    return lambda c: ok(c.post("/complete/batch", json=body))


async def verb_complete_batch_next_keyed(cold: Cold) -> Callable[[httpx.Client], Any]:
    items = [{"lead_id": i, "token": t} for i, t in await cold.lease(2)]
    await cold.pushed()
    body = {"items": items, "next": {"session": cold.session, "owner": "w", "max": 2}}
    headers = {"Idempotency-Key": "complete-batch-next-1"}
    return lambda c: ok(c.post("/complete/batch", json=body, headers=headers))


async def verb_complete_batch(cold: Cold) -> Callable[[httpx.Client], Any]:
    items = [{"lead_id": i, "token": t} for i, t in await cold.lease(2)]
    return lambda c: ok(c.post("/complete/batch", json={"items": items}))


async def verb_release(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    return lambda c: ok(c.post("/release", json={"lead_id": lead_id, "token": token}))


async def verb_release_last(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease(max_attempts=1)  # the release fails it
    return lambda c: ok(c.post("/release", json={"lead_id": lead_id, "token": token}))


async def verb_throttle(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()
    body = {"lead_id": lead_id, "token": token, "throttle_s": 30}
    return lambda c: ok(c.post("/release", json=body))


async def verb_cancel(cold: Cold) -> Callable[[httpx.Client], Any]:
    lead_id = await cold.pushed()
    return lambda c: ok(c.post(f"/leads/{lead_id}/cancel"))


async def verb_retry(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease(max_attempts=1)
    await cold.queue.complete(lead_id, token, "failed")
    return lambda c: ok(c.post(f"/leads/{lead_id}/retry"))


async def verb_get(cold: Cold) -> Callable[[httpx.Client], Any]:
    lead_id = await cold.pushed()
    return lambda c: ok(c.get(f"/leads/{lead_id}"))


async def verb_get_waiting(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease()

    def waiting(client: httpx.Client) -> None:
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            waiter = pool.submit(client.get, f"/leads/{lead_id}", params={"wait_s": 20}, timeout=40)
            # The lead ends while the wait waits (or before: then it answers at once).
            asyncio.run(_complete_other_loop(cold.url, lead_id, token))
            assert ok(waiter.result()).json()["status"] == "done"

    return waiting


async def _complete_other_loop(url: str, lead_id: int, token: str) -> None:
    db = Database.from_settings(Settings(database_url=url), pool_size=1)
    async with db:
        await Queue(db).complete(lead_id, token)


async def verb_events(cold: Cold) -> Callable[[httpx.Client], Any]:
    lead_id = await cold.pushed()
    return lambda c: ok(c.get(f"/leads/{lead_id}/events"))


async def verb_stats(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.pushed()
    return lambda c: ok(c.get(f"/sessions/{cold.session}/stats"))


async def verb_settings(cold: Cold) -> Callable[[httpx.Client], Any]:
    return lambda c: ok(c.get(f"/sessions/{cold.session}/settings"))


async def verb_settings_put(cold: Cold) -> Callable[[httpx.Client], Any]:
    return lambda c: ok(c.put(f"/sessions/{cold.session}/settings", json={"max_leased": 3}))


async def verb_pause(cold: Cold) -> Callable[[httpx.Client], Any]:
    return lambda c: ok(c.post(f"/sessions/{cold.session}/pause", json={"for_s": 60}))


async def verb_resume(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.queue.pause(cold.session, for_s=60)
    return lambda c: ok(c.post(f"/sessions/{cold.session}/resume"))


async def verb_report(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.lease()
    return lambda c: ok(c.get(f"/sessions/{cold.session}/report"))


async def verb_retry_failed(cold: Cold) -> Callable[[httpx.Client], Any]:
    [(lead_id, token)] = await cold.lease(max_attempts=1)
    await cold.queue.complete(lead_id, token, "failed")
    return lambda c: ok(c.post(f"/sessions/{cold.session}/retry-failed"))


async def verb_sweep(cold: Cold) -> Callable[[httpx.Client], Any]:
    await cold.lease()
    return lambda c: ok(c.post("/sweep", json={"session": cold.session}))


VERBS: dict[str, Callable[[Cold], Awaitable[Callable[[httpx.Client], Any]]]] = {
    name.removeprefix("verb_").replace("_", "-"): verb
    for name, verb in dict(globals()).items()
    if name.startswith("verb_")
}


# Not router statements yet, each for a reason of its own (docs/scaling.md): none now.
NOT_YET: dict[str, str] = {}


@pytest.mark.slow
@pytest.mark.parametrize(
    "verb",
    [
        pytest.param(verb, marks=pytest.mark.xfail(reason=NOT_YET[verb], strict=True))
        if verb in NOT_YET
        else verb
        for verb in VERBS
    ],
)
async def test_a_fresh_service_routes_the_verb_to_its_session(
    cold_url: str, setup_queue: Queue, tmp_path: Path, verb: str
) -> None:
    session = f"cold-{verb}"
    cold = Cold(cold_url, setup_queue, Services(tmp_path), session)
    try:
        request = await VERBS[verb](cold)
        service = cold.fresh()
        before = _snapshot(cold_url)
        await asyncio.to_thread(_one_at_a_time, service, [request])
        ran = _ran(before, _snapshot(cold_url))
        log = service.log()
    finally:
        cold.services.close()
    assert ran, "the request ran no statement"
    not_routed = [one for one in ran if one.partition_key != session or one.executor != "adaptive"]
    assert not not_routed, not_routed
    # It knew where it runs before its first request, and said so once.
    assert log.count("the database is a Citus cluster") == 1, log


@pytest.mark.slow
@pytest.mark.parametrize("key", [None, "elsewhere-1"])
async def test_a_completion_whose_next_names_another_session_routes_each_step_to_its_own(
    cold_url: str, setup_queue: Queue, tmp_path: Path, key: str | None
) -> None:
    """A completion with next of two sessions (the lead's, the lease's) names two shards: it
    takes two steps, the completion routed to its lead's session (its token's), then the lease
    (and its key) routed to the other's, each committed on its own. Sent again with its key,
    it answers the same."""
    done, other = (f"cold-apart-{key is not None}-{name}" for name in ("done", "next"))
    cold = Cold(cold_url, setup_queue, Services(tmp_path), done)
    [(lead_id, token)] = await cold.lease()
    [next_id] = (await setup_queue.push(other, [NewLead({})])).ids
    body = {"lead_id": lead_id, "token": token, "next": {"session": other, "owner": "w"}}
    headers = {} if key is None else {"Idempotency-Key": key}
    answers: list[Any] = []

    def request(client: httpx.Client) -> None:
        answers.append(ok(client.post("/complete", json=body, headers=headers)).json())
        if key is not None:
            answers.append(ok(client.post("/complete", json=body, headers=headers)).json())

    try:
        service = cold.fresh()
        before = _snapshot(cold_url)
        await asyncio.to_thread(_one_at_a_time, service, [request])
        ran = _ran(before, _snapshot(cold_url))
    finally:
        cold.services.close()
    assert answers[0]["lead"]["status"] == "done"
    assert [lease["lead"]["id"] for lease in answers[0]["leases"]] == [next_id]
    assert all(answer == answers[0] for answer in answers)
    not_routed = [one for one in ran if one.partition_key not in (done, other)]
    assert not not_routed and all(one.executor == "adaptive" for one in ran), ran
    assert {one.partition_key for one in ran} == {done, other}, ran
    assert (await setup_queue.stats(done)).done == 1
    assert (await setup_queue.stats(other)).leased == 1
