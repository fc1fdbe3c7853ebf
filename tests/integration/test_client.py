"""The HTTP client against a real ``leaseq serve``: every endpoint, errors, retries, auth."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator

import psycopg
import pytest

from app.store.pool import libpq_url
from leaseq import AsyncClient, RetryPolicy
from leaseq.errors import Conflict, InvalidInput, LeaseLost, NotFound, Unauthorized, Unavailable
from leaseq.model import CompleteItem, Counts, NewLead, RenewItem
from tests.support.serving import Service, Services, free_port
from tests.support.worker_support import RecordingTransport, fresh_database

pytestmark = pytest.mark.service

FAST_RETRY = RetryPolicy(attempts=40, base_s=0.05, max_s=0.3)
SWEEPS_BY_HAND = {"LEASEQ_SWEEP_INTERVAL_S": "3600"}


@pytest.fixture
def service(services: Services, database_url: str) -> Service:
    """A service of this test's own (it is stopped, or its database taken away)."""
    return services.start(database_url=database_url, env=SWEEPS_BY_HAND)


@pytest.fixture(scope="module")
def shared(
    server_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Service]:
    """A service the tests that leave it as they found it share, each in its own sessions."""
    running = Services(tmp_path_factory.mktemp("serve"))
    with fresh_database(server_url, template_db) as url:
        try:
            yield running.start(database_url=url, env=SWEEPS_BY_HAND)
        finally:
            running.close()


async def test_every_endpoint(shared: Service) -> None:
    s, t = (f"{name}-{uuid.uuid4().hex[:8]}" for name in "st")
    async with AsyncClient(shared.url) as client:
        pushed = await client.push(
            s, [NewLead({"n": 1}, key="a"), {"payload": {"n": 2}}, NewLead({"n": 3}, key="a")]
        )
        assert pushed.created == 2 and pushed.duplicates == 1
        assert pushed.ids[0] == pushed.ids[2] != pushed.ids[1]
        assert await client.push(s, []) == type(pushed)([], 0, 0)

        one, two = await client.lease(s, "w1", max=2, ttl_s=30)
        assert (one.lead.payload, one.attempt, one.owner) == ({"n": 1}, 1, "w1")
        assert one.lead.status == "leased" and one.expires_at.tzinfo is not None
        renewed = await client.renew(one.lead.id, one.token, 60)
        assert renewed.expires_at > one.expires_at and renewed.ttl_s == 60
        [ok, lost] = await client.renew_many(
            [RenewItem(one.lead.id, one.token, 30), RenewItem(two.lead.id, "not-the-token")]
        )
        assert ok.ok and ok.expires_at is not None
        assert (lost.ok, lost.code) == (False, "lease_lost")

        done = await client.complete(one.lead.id, one.token, "done", {"r": 1})
        assert (done.status, done.result) == ("done", {"r": 1})
        released = await client.release(two.lead.id, two.token, 0)
        assert released.status == "queued"
        [again] = await client.lease(s, "w2", ttl_s=30)
        [answer] = await client.complete_many(
            [CompleteItem(again.lead.id, again.token, "cached", {"from": "elsewhere"})]
        )
        assert answer.ok
        assert (await client.get(again.lead.id)).status == "cached"

        assert await client.stats(s) == Counts(done=1, cached=1)
        everything = await client.stats_all()
        assert everything.sessions[s] == Counts(done=1, cached=1)
        assert everything.total.done >= 1
        report = await client.report(s)
        assert report["completions"] == 2 and report["double_completions"] == 0

        [lead_id] = (await client.push(t, [NewLead({})])).ids
        await client.lease(t, "w3", ttl_s=1)
        await asyncio.sleep(1.1)
        assert (await client.sweep(t)).requeued == 1
        assert (await client.sweep_all()).failed == 0
        cancelled = await client.cancel(lead_id)
        assert (cancelled.status, cancelled.error) == ("failed", "cancelled")
        assert (await client.retry(lead_id)).status == "queued"

        assert await client.healthz() and await client.readyz()
        assert "leaseq_" in await client.metrics()


async def test_errors_are_the_core_exceptions(shared: Service) -> None:
    session = f"e-{uuid.uuid4().hex[:8]}"
    async with AsyncClient(shared.url) as client:
        [lead_id] = (await client.push(session, [NewLead({})])).ids
        [lease] = await client.lease(session, "w", ttl_s=30)
        with pytest.raises(LeaseLost) as lost:
            await client.renew(lead_id, "wrong-token")
        assert lost.value.code == "lease_lost" and lost.value.status == 409  # type: ignore[attr-defined]
        done = await client.complete(lead_id, lease.token)
        assert await client.complete(lead_id, lease.token) == done  # a retry: the same answer
        with pytest.raises(LeaseLost):
            await client.complete(lead_id, lease.token, "cached")
        with pytest.raises(LeaseLost):
            await client.release(lead_id, lease.token)
        with pytest.raises(NotFound):
            await client.get(10**9)
        with pytest.raises(Conflict):
            await client.cancel(lead_id)
        with pytest.raises(Conflict):
            await client.retry(lead_id)
        with pytest.raises(InvalidInput) as invalid:
            await client.lease("not a session!", "w")
        assert "session" in str(invalid.value)
        with pytest.raises(InvalidInput):
            await client.lease(session, "w", ttl_s=0)


async def test_a_4xx_is_never_retried(shared: Service) -> None:
    transport = RecordingTransport()
    async with AsyncClient(shared.url, transport=transport, retry_policy=FAST_RETRY) as client:
        for call in (client.get(10**9), client.renew(1, "t"), client.lease("bad session", "w")):
            with pytest.raises((NotFound, LeaseLost, InvalidInput)):
                await call
    assert [status for _, status in transport.calls] == [404, 409, 422]


async def test_a_503_is_retried_until_the_database_is_back(
    service: Service, database_url: str
) -> None:
    name = psycopg.conninfo.conninfo_to_dict(libpq_url(database_url))["dbname"]
    transport = RecordingTransport()
    async with AsyncClient(service.url, transport=transport, retry_policy=FAST_RETRY) as client:
        await client.push("s", [NewLead({})])
        with psycopg.connect(libpq_url(database_url), dbname="postgres", autocommit=True) as admin:
            admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS false')
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                (name,),
            )
            try:
                call = asyncio.ensure_future(client.stats("s"))
                async with asyncio.timeout(10):
                    while 503 not in [status for _, status in transport.calls]:  # noqa: ASYNC110
                        await asyncio.sleep(0.05)
            finally:
                admin.execute(f'ALTER DATABASE "{name}" ALLOW_CONNECTIONS true')
        async with asyncio.timeout(15):
            assert await call == Counts(queued=1)
    statuses = [status for path, status in transport.calls if path == "/sessions/s/stats"]
    assert statuses[0] == 503 and statuses[-1] == 200


async def test_connection_errors_are_retried_then_unavailable(
    services: Services, service: Service, database_url: str
) -> None:
    async with AsyncClient(service.url, retry_policy=FAST_RETRY) as client:
        service.terminate()
        await asyncio.to_thread(service.wait)
        call = asyncio.ensure_future(client.stats("s"))
        await asyncio.sleep(0.3)
        assert not call.done()
        await asyncio.to_thread(
            services.start, database_url=database_url, port=service.port, env=SWEEPS_BY_HAND
        )
        async with asyncio.timeout(15):
            assert await call == Counts()
    nobody = f"http://127.0.0.1:{free_port()}"
    async with AsyncClient(nobody, retry_policy=RetryPolicy(attempts=3, base_s=0.01)) as client:
        with pytest.raises(Unavailable, match=f"GET {nobody}/sessions/s/stats: ConnectError"):
            await client.stats("s")
        assert not await client.healthz()


async def test_the_bearer_token_is_sent(services: Services, database_url: str) -> None:
    service = services.start(database_url=database_url, env={"LEASEQ_API_TOKENS": "s3cret"})
    transport = RecordingTransport()
    async with AsyncClient(service.url, transport=transport, retry_policy=FAST_RETRY) as client:
        with pytest.raises(Unauthorized):
            await client.stats("s")
        assert await client.readyz()  # the probes need no token
    assert transport.count("/sessions/s/stats") == 1
    async with AsyncClient(service.url, token="s3cret") as client:
        assert await client.stats("s") == Counts()


async def test_retry_failed_replays_a_sessions_failed_leads(shared: Service) -> None:
    session = f"r-{uuid.uuid4().hex[:8]}"
    async with AsyncClient(shared.url) as client:
        ids = (await client.push(session, [NewLead({}), NewLead({}), NewLead({})])).ids
        for lead_id in ids[:2]:
            await client.cancel(lead_id)
        assert await client.retry_failed(session) == 2
        assert await client.stats(session) == Counts(queued=3)
        assert await client.retry_failed(session) == 0
        with pytest.raises(InvalidInput):
            await client.retry_failed("-not-a-session")
