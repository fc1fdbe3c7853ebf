"""leaseq through PgBouncer in transaction mode (Debian's package, started by the tests).

With ``database_pooled`` the pool keeps no session state on the pooled
connections (no startup options, no prepared statements, no LISTEN); long
polls are woken by NOTIFY over the direct ``listen_database_url``, or by the
slow poll when only the pooler is reachable. The whole API suite runs once
more through the pooler.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import stat
import time
from collections.abc import Callable
from datetime import timedelta

import httpx
import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.api.serve import ServeError, migration_url
from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.model import NewLead
from tests.api import shapes
from tests.deploy import pgbouncer as pgb
from tests.deploy.pgbouncer import PgBouncer
from tests.support import leasing_of
from tests.support.in_process import (
    POOLER_URL_ENV,
    listening,
    runtime_of,
    serving,
    until,
    waiters,
)
from tests.support.serving import Services, api_suite

# The one API test that is about the direct connection: through a pooler the
# statement_timeout comes from the pooler's connect_query, not from the pool's.
DIRECT_ONLY = (
    "tests/api/test_limits.py::test_every_database_call_is_bounded_by_statement_timeout",
)


def pooled_settings(bouncer: PgBouncer, database_url: str, **overrides: object) -> Settings:
    """API settings that reach ``database_url`` through ``bouncer``, LISTENing directly."""
    values: dict[str, object] = {
        "database_url": bouncer.through(database_url),
        "listen_database_url": database_url,
        "database_pooled": True,
        "allowed_hosts": "leaseq.test",
        "pool_size": 10,
        "sweep_interval_s": 3600,
    }
    values.update(overrides)
    return Settings(**values)  # type: ignore[arg-type]


def dbname(url: str) -> str:
    name = make_url(url).database
    assert name is not None
    return name


async def push(client: httpx.AsyncClient, session: str, n: int) -> list[int]:
    leads = [{"payload": {"i": i}} for i in range(n)]
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": leads})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


def test_pooled_settings_prepare_nothing_and_listen_only_directly() -> None:
    direct, pooled = "postgresql://db/leaseq", "postgresql://pooler:6432/leaseq"
    assert Settings().prepared_statements
    assert Settings(database_url=direct).listen_url == direct
    only_pooler = Settings(database_url=pooled, database_pooled=True)
    assert not only_pooler.prepared_statements
    assert only_pooler.listen_url is None  # never LISTEN through the pooler
    both = only_pooler.model_copy(update={"listen_database_url": direct})
    assert both.listen_url == direct
    supported = only_pooler.model_copy(update={"database_prepared_statements": True})
    assert supported.prepared_statements  # a pooler that tracks prepared statements (>= 1.21)
    # Given only the direct URL for LISTEN, the service takes itself to be pooled: every
    # setting the app reads is the same as with the flag, so the API suite runs through the
    # pooler once, with the flag.
    listen_url_only = Settings(database_url=pooled, listen_database_url=direct)
    derived = ("pooled", "prepared_statements", "listen_url")
    assert [getattr(listen_url_only, name) for name in derived] == [
        getattr(both, name) for name in derived
    ]


def test_serve_migrate_behind_a_pooler_migrates_over_the_direct_url() -> None:
    direct, pooled = "postgresql://db/leaseq", "postgresql://pooler:6432/leaseq"
    assert migration_url(Settings(database_url=direct)) == direct
    both = Settings(database_url=pooled, database_pooled=True, listen_database_url=direct)
    assert migration_url(both) == direct
    with pytest.raises(ServeError, match="direct connection"):
        migration_url(Settings(database_url=pooled, database_pooled=True))


def test_the_tests_pooler_lets_no_other_user_reach_the_server(pgbouncer: PgBouncer) -> None:
    """It trusts whoever connects, so it has no TCP port, and its socket's folder is private."""
    config = {str(row["key"]): str(row["value"]) for row in pgbouncer.show("CONFIG")}
    assert config["listen_addr"] == ""
    assert config["unix_socket_dir"] == str(pgbouncer.dir)
    folder = pgbouncer.dir.stat()
    assert stat.S_IMODE(folder.st_mode) == 0o700
    owner = os.geteuid() if pgbouncer.run_as is None else pwd.getpwnam(pgbouncer.run_as).pw_uid
    assert folder.st_uid == owner


async def test_the_pooled_server_connection_keeps_no_session_state(
    start_pgbouncer: Callable[..., PgBouncer], database_url: str
) -> None:
    # One server connection: every statement of every client goes through it,
    # so what the queue leaves behind on it is there to see.
    bouncer = start_pgbouncer(pool_size=1)
    settings = pooled_settings(bouncer, database_url, statement_timeout_ms=1234)
    db = Database.from_settings(settings, pool_size=4)
    queue = Queue(db, group_commit=False)  # each call its own statement, for the pooler to count
    try:

        async def work(worker: int) -> None:
            for _ in range(8):  # more than psycopg's prepare_threshold (5) on each connection
                await queue.push("s", [NewLead({"w": worker})])
                [lease] = await leasing_of(queue).lease_next("s", f"w{worker}", max=1, ttl_s=60)
                await queue.renew(lease.lead.id, lease.token, ttl_s=60)
                await queue.complete(lease.lead.id, lease.token, result={"ok": True})
                await queue.stats("s")

        await asyncio.gather(*(work(w) for w in range(4)))
        [state] = await db.rows(
            "SELECT (SELECT count(*) FROM pg_prepared_statements) AS prepared,"
            " (SELECT count(*) FROM pg_listening_channels()) AS listening,"
            " current_setting('statement_timeout') AS statement_timeout"
        )
        assert (await queue.stats("s")).done == 32
    finally:
        await db.close()
    assert state["prepared"] == 0
    assert state["listening"] == 0
    # The pooler's connect_query, not the pool's setting: no startup options go through.
    assert state["statement_timeout"] == f"{pgb.STATEMENT_TIMEOUT_MS // 1000}s"
    assert bouncer.transactions(dbname(database_url)) > 4 * 8 * 4


def test_prepared_statements_need_the_setting_or_the_poolers_support(
    pgbouncer_program: str, start_pgbouncer: Callable[..., PgBouncer], database_url: str
) -> None:
    """Why the pool prepares nothing behind a pooler: two clients sharing one server
    connection both name their statement ``_pg3_0`` (unless the pooler tracks them)."""
    supports = pgb.version(pgbouncer_program) >= (1, 21)
    extra = "max_prepared_statements = 100\n" if supports else ""
    bouncer = start_pgbouncer(pool_size=1, extra=extra)
    url = bouncer.through(database_url)

    def run_twice_over_two_clients(prepare_threshold: int | None) -> None:
        with (
            psycopg.connect(url, autocommit=True, prepare_threshold=prepare_threshold) as a,
            psycopg.connect(url, autocommit=True, prepare_threshold=prepare_threshold) as b,
        ):
            for conn in (a, b):
                for i in range(8):
                    assert conn.execute("SELECT %s::int + 1", (i,)).fetchone() == (i + 1,)

    run_twice_over_two_clients(None)  # what database_pooled does
    if supports:
        run_twice_over_two_clients(5)
    else:
        with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
            run_twice_over_two_clients(5)


async def test_a_direct_listen_url_means_a_pooler() -> None:
    pooled, direct = "postgresql://u@pgbouncer:6432/db", "postgresql://u@postgres/db"
    forgot = Settings(database_url=pooled, listen_database_url=direct)
    assert forgot.pooled and not forgot.prepared_statements and forgot.listen_url == direct
    assert not Settings(database_url=direct).pooled
    said = Settings(database_url=pooled, listen_database_url=direct, database_pooled=False)
    assert not said.pooled and said.prepared_statements


class Answered(int):
    """A status that says which call answered it, in an assertion's message."""

    call: str

    def __new__(cls, response: httpx.Response) -> Answered:
        status = super().__new__(cls, response.status_code)
        status.call = f"{response.request.method} {response.request.url.path}"
        if status >= 500:
            status.call += f": {response.text[:300]}"
        return status

    def __repr__(self) -> str:
        return f"{int(self)} ({self.call})" if self >= 500 else str(int(self))


async def hammer(client: httpx.AsyncClient, workers: int = 6, rounds: int = 10) -> list[int]:
    """Push, lease, read and complete from ``workers`` tasks at once; every status answered."""

    async def work(worker: int) -> list[int]:
        statuses: list[int] = []
        for _ in range(rounds):  # past psycopg's prepare_threshold (5) on every connection
            lead = {"leads": [{"payload": {"w": worker}}]}
            pushed = await client.post("/sessions/s/leads", json=lead)
            leased = await client.post("/lease", json={"session": "s", "owner": f"w{worker}"})
            stats = await client.get("/sessions/s/stats")
            statuses += [Answered(pushed), Answered(leased), Answered(stats)]
            for lease in leased.json().get("leases", []):
                body = {"lead_id": lease["lead"]["id"], "token": lease["token"]}
                statuses.append(Answered(await client.post("/complete", json=body)))
        return statuses

    return [
        status
        for statuses in await asyncio.gather(*map(work, range(workers)))
        for status in statuses
    ]


@pytest.mark.parametrize(
    ("told", "warning"),
    [
        ({"database_pooled": True, "database_prepared_statements": True}, "prepared statements"),
        ({}, "refused startup options"),
    ],
    ids=["prepared-statements-forced-on", "told-nothing"],
)
async def test_a_pooler_nobody_mentioned_never_costs_a_5xx(
    start_pgbouncer: Callable[..., PgBouncer],
    database_url: str,
    caplog: pytest.LogCaptureFixture,
    told: dict[str, object],
    warning: str,
) -> None:
    """Behind a pooler the service was not told of (or told wrong), the first error shows it:
    prepared statements go off for the pool (and startup options, when refused), one
    warning says so, and no call gets a 5xx."""
    bouncer = start_pgbouncer(pool_size=2)
    settings = Settings(
        database_url=bouncer.through(database_url),
        api_tokens="",
        allowed_hosts="*",
        sweep_interval_s=3600,
        **told,  # type: ignore[arg-type]
    )
    async with serving(settings) as client:
        statuses = await hammer(client)
        stats = (await client.get("/sessions/s/stats")).json()
        prepared = runtime_of(client).db.prepared_statements
    assert [s for s in statuses if s >= 500] == []
    assert stats["done"] + stats["queued"] == 60 and stats["leased"] == 0
    assert not prepared
    warnings = [r for r in caplog.records if r.name == "leaseq.pg" and r.levelname == "WARNING"]
    assert len(warnings) == 1 and warning in warnings[0].getMessage()


async def test_api_flows_through_pgbouncer(pgbouncer: PgBouncer, database_url: str) -> None:
    before = pgbouncer.transactions(dbname(database_url))
    async with serving(pooled_settings(pgbouncer, database_url)) as client:
        [first, second, third] = await push(client, "s", 3)
        # With an Idempotency-Key: a transaction of several statements through the pooler.
        once = {"Idempotency-Key": "through-the-pooler"}
        body = {"session": "s", "owner": "w", "max": 3}
        leased = (await client.post("/lease", json=body, headers=once)).json()
        tokens = {lease["lead"]["id"]: lease["token"] for lease in leased["leases"]}
        assert sorted(tokens) == [first, second, third]
        again = (await client.post("/lease", json=body, headers=once)).json()
        assert {lease["lead"]["id"]: lease["token"] for lease in again["leases"]} == tokens

        renewed = await client.post(
            "/renew", json={"lead_id": first, "token": tokens[first], "ttl_s": 60}
        )
        assert renewed.status_code == 200
        done = await client.post("/complete", json={"lead_id": first, "token": tokens[first]})
        assert done.json()["lead"]["status"] == "done"
        retried = await client.post("/complete", json={"lead_id": first, "token": tokens[first]})
        assert retried.status_code == 200 and retried.json() == done.json()
        other = {"lead_id": first, "token": tokens[first], "status": "failed"}
        refused = await client.post("/complete", json=other)
        assert refused.status_code == 409 and refused.json()["code"] == "lease_lost"
        released = await client.post("/release", json={"lead_id": second, "token": tokens[second]})
        assert released.json()["lead"]["status"] == "queued"

        # The third lease runs out (on an injected clock): a sweep requeues it.
        queue = runtime_of(client).queue
        later = await queue.db_now() + timedelta(seconds=3600)
        assert (await queue.sweep("s", now=later)).requeued == 1
        lost = await client.post("/renew", json={"lead_id": third, "token": tokens[third]})
        assert lost.json()["code"] == "lease_lost"
        swept = await client.post("/sweep", json={"all": True})
        assert swept.json() == {"requeued": 0, "failed": 0}

        stats = (await client.get("/sessions/s/stats")).json()
        shapes.counts(stats, queued=2, done=1)
        total = (await client.get("/stats")).json()["total"]
        shapes.counts(total, queued=2, done=1)
        assert (await client.get("/readyz")).status_code == 200
        report = (await client.get("/sessions/s/report")).json()
        assert report["double_completions"] == 0 and report["overlapping_leases"] == 0
    assert pgbouncer.transactions(dbname(database_url)) > before


async def test_a_long_poll_is_woken_by_notify_over_the_direct_listen_url(
    pgbouncer: PgBouncer, database_url: str
) -> None:
    # The slow poll is off the table (60 s, beyond wait_s): only the NOTIFY can wake it.
    settings = pooled_settings(pgbouncer, database_url, poll_interval_s=60)
    async with serving(settings) as client:
        assert runtime_of(client).listener.listens
        await listening(client)
        waiting = asyncio.create_task(
            client.post("/lease", json={"session": "s", "owner": "w", "wait_s": 20})
        )
        await waiters(client, 1)
        [pushed] = await push(client, "s", 1)
        answer = await asyncio.wait_for(waiting, timeout=15)
        [lease] = answer.json()["leases"]
        assert lease["lead"]["id"] == pushed


async def test_a_wait_for_an_outcome_is_woken_by_notify_over_the_direct_listen_url(
    pgbouncer: PgBouncer, database_url: str
) -> None:
    """GET /leads/{id}?wait_s through the pooler: its watch and reads go through PgBouncer,
    its wake-up comes over the direct LISTEN connection (the re-check is 60 s away)."""
    settings = pooled_settings(pgbouncer, database_url, poll_interval_s=60)
    async with serving(settings) as client:
        await listening(client)
        [lead_id] = await push(client, "s", 1)
        [lease] = (await client.post("/lease", json={"session": "s", "owner": "w"})).json()[
            "leases"
        ]
        waiting = asyncio.create_task(client.get(f"/leads/{lead_id}", params={"wait_s": 20}))
        await until(lambda: runtime_of(client).listener.outcome_waiters == 1)
        started = time.monotonic()
        done = await client.post("/complete", json={"lead_id": lead_id, "token": lease["token"]})
        assert done.status_code == 200
        answer = await asyncio.wait_for(waiting, timeout=20)
        assert time.monotonic() - started < 5
        assert answer.json()["status"] == "done"


async def test_with_only_the_pooler_a_long_poll_falls_back_to_the_slow_poll(
    pgbouncer: PgBouncer, database_url: str
) -> None:
    settings = pooled_settings(
        pgbouncer, database_url, listen_database_url=None, poll_interval_s=0.2
    )
    async with serving(settings) as client:
        listener = runtime_of(client).listener
        assert not listener.listens
        waiting = asyncio.create_task(
            client.post("/lease", json={"session": "s", "owner": "w", "wait_s": 20})
        )
        await waiters(client, 1)
        [pushed] = await push(client, "s", 1)
        answer = await asyncio.wait_for(waiting, timeout=15)
        [lease] = answer.json()["leases"]
        assert lease["lead"]["id"] == pushed
        assert not listener.connected
    with psycopg.connect(database_url, autocommit=True) as conn:
        listens = conn.execute(
            "SELECT count(*) FROM pg_stat_activity"
            " WHERE datname = current_database() AND query ILIKE 'LISTEN%%'"
        ).fetchone()
    assert listens == (0,)


async def test_many_workers_through_a_few_server_connections(
    start_pgbouncer: Callable[..., PgBouncer], database_url: str
) -> None:
    bouncer = start_pgbouncer(pool_size=3)  # 16 workers, 10 pooled clients, 3 server connections
    leads = 300
    async with serving(pooled_settings(bouncer, database_url)) as client:
        ids = await push(client, "s", leads)
        seen: list[int] = []

        async def worker(name: str) -> None:
            while True:
                answer = await client.post(
                    "/lease", json={"session": "s", "owner": name, "max": 3, "ttl_s": 60}
                )
                assert answer.status_code == 200, answer.text
                got = answer.json()["leases"]
                if not got:
                    return
                seen.extend(lease["lead"]["id"] for lease in got)
                items = [{"lead_id": g["lead"]["id"], "token": g["token"]} for g in got]
                done = await client.post("/complete/batch", json={"items": items})
                assert all(r["ok"] for r in done.json()["results"])

        await asyncio.wait_for(asyncio.gather(*(worker(f"w{i}") for i in range(16))), 60)
        assert sorted(seen) == sorted(ids)  # every lead handed out exactly once
        stats = (await client.get("/sessions/s/stats")).json()
        assert stats["done"] == leads and stats["pending"] == 0
        report = (await client.get("/sessions/s/report")).json()
        assert report["completions"] == leads and report["double_completions"] == 0
    servers = [s for s in bouncer.show("SERVERS") if s["database"] == dbname(database_url)]
    assert 0 < len(servers) <= 3


@pytest.mark.service
def test_serve_with_migrate_through_pgbouncer(
    pgbouncer: PgBouncer, empty_database_url: str, services: Services
) -> None:
    """``leaseq serve --migrate`` behind a pooler migrates over the direct URL, then serves."""
    service = services.start(
        "--migrate",
        database_url=pgbouncer.through(empty_database_url),
        env={"LEASEQ_DATABASE_POOLED": "true", "LEASEQ_LISTEN_DATABASE_URL": empty_database_url},
    )
    with service.client() as client:
        assert client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]}).is_success
        assert client.get("/sessions/s/stats").json()["queued"] == 1
    assert pgbouncer.transactions(dbname(empty_database_url)) > 0


@pytest.mark.service
@pytest.mark.slow
@pytest.mark.timeout(2400)  # as the cluster's: CI runs the suites beside the other tests
def test_the_api_suite_passes_through_pgbouncer(pgbouncer: PgBouncer, server_url: str) -> None:
    """tests/api once more, every app reaching its database through PgBouncer, told so by
    ``database_pooled`` and given the direct URL for LISTEN (never a 5xx)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEQ_")}
    env.update({"LEASEQ_TEST_DATABASE_URL": server_url, POOLER_URL_ENV: pgbouncer.url("postgres")})
    # The default selection: the slow fuzzing of tests/api runs its own service on the
    # direct URL, so through the pooler it would only repeat itself.
    api_suite(env, DIRECT_ONLY, timeout_s=2300)
    pooled = [r for r in pgbouncer.show("STATS") if str(r["database"]).startswith("leaseq_t_")]
    assert len(pooled) >= 20  # the apps' databases were reached through the pooler
