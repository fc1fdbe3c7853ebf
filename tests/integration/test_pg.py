"""``app.store.pool``: the pool every statement goes through, its error mapping and its shield.

A cancelled caller never strands a connection and its statement runs to its
end; an outage, a broken connection, a statement cut off and an exhausted
pool are ``Unavailable``, and a database that is down is said so at once,
not after the pool's timeout; other database errors pass through.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import psycopg
import pytest

from app.config import Settings
from app.store.pool import Connection, Database, libpq_url
from leaseq.errors import Unavailable
from tests.support.proxy import proxied
from tests.support.worker_support import eventually

pytestmark = pytest.mark.timeout(60)


def pool(url: str, **settings: Any) -> Database:
    base = {"statement_timeout_ms": 30_000, **settings}
    return Database.from_settings(Settings(**base), url, pool_size=settings.get("pool_size", 1))


@pytest.fixture
async def one(database_url: str) -> AsyncIterator[Database]:
    """A pool of one connection, so whatever strands it shows at once."""
    async with pool(database_url, pool_timeout_s=2) as db:
        await db.rows("CREATE TABLE marks (n int)")
        yield db


# An insert that waits for an advisory lock the test holds: it runs until the test says.
BLOCKED_INSERT = "INSERT INTO marks SELECT 1 FROM (SELECT pg_advisory_xact_lock(7)) AS locked"


@asynccontextmanager
async def lock_held(database_url: str) -> AsyncIterator[Callable[[], Awaitable[None]]]:
    """Advisory lock 7 held on a connection of the test's own; yields its release."""
    async with await psycopg.AsyncConnection.connect(
        libpq_url(database_url), autocommit=True
    ) as conn:
        await conn.execute("SELECT pg_advisory_lock(7)")

        async def release() -> None:
            await conn.execute("SELECT pg_advisory_unlock(7)")

        yield release


async def waits_for_the_lock(database_url: str) -> None:
    """Until another session's statement is waiting for an advisory lock (it is running)."""

    async def waiting() -> bool:
        async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as conn:
            cur = await conn.execute(
                "SELECT count(*) FROM pg_stat_activity"
                " WHERE datname = current_database() AND wait_event = 'advisory'"
            )
            row = await cur.fetchone()
        return row is not None and row[0] == 1

    await eventually(waiting)


async def test_a_cancelled_caller_leaves_its_statement_to_finish_and_the_connection_back(
    one: Database, database_url: str
) -> None:
    async with lock_held(database_url) as release:
        call = asyncio.create_task(one.rows(BLOCKED_INSERT))
        await waits_for_the_lock(database_url)  # the statement is running
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert one.stats().checked_out == 1  # still running, in a task of its own
        await release()
    # It finished and gave its one connection back (else the pool's 2 s timeout: Unavailable).
    assert await one.rows("SELECT count(*) AS n FROM marks") == [{"n": 1}]
    assert one.stats().checked_out == 0


async def test_close_drains_the_statements_whose_callers_left(database_url: str) -> None:
    db = pool(database_url)
    await db.rows("CREATE TABLE marks (n int)")
    async with lock_held(database_url) as release:
        call = asyncio.create_task(db.rows(BLOCKED_INSERT))
        await waits_for_the_lock(database_url)
        call.cancel()
        closing = asyncio.create_task(db.close())  # waits for the insert before closing
        await asyncio.sleep(0)
        assert not closing.done()
        await release()
        await closing
    with psycopg.connect(libpq_url(database_url)) as conn:
        assert conn.execute("SELECT count(*) FROM marks").fetchone() == (1,)


async def test_a_statement_cut_off_by_its_timeout_is_unavailable(database_url: str) -> None:
    async with pool(database_url, statement_timeout_ms=100) as db:
        with pytest.raises(Unavailable, match="QueryCanceled"):
            await db.rows("SELECT pg_sleep(2)")
        assert await db.rows("SELECT 1 AS one") == [{"one": 1}]


async def test_a_killed_connection_is_unavailable_once_then_replaced(
    one: Database, database_url: str
) -> None:
    [me] = await one.rows("SELECT pg_backend_pid() AS pid")
    with psycopg.connect(libpq_url(database_url), autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (me["pid"],))
    with pytest.raises(Unavailable, match="database unavailable"):
        await one.rows("SELECT 1")
    [again] = await one.rows("SELECT pg_backend_pid() AS pid")  # a new connection
    assert again["pid"] != me["pid"]


async def test_other_database_errors_pass_through(one: Database) -> None:
    with pytest.raises(psycopg.errors.UndefinedTable):
        await one.rows("SELECT * FROM no_such_table")
    with pytest.raises(psycopg.errors.UniqueViolation):
        await one.rows("CREATE UNIQUE INDEX ON marks (n)")
        await one.rows("INSERT INTO marks VALUES (1), (1)")
    assert await one.rows("SELECT 1 AS one") == [{"one": 1}]


async def test_an_exhausted_pool_is_unavailable_after_its_timeout(database_url: str) -> None:
    async with pool(database_url, pool_timeout_s=0.3) as db:
        taken, release = asyncio.Event(), asyncio.Event()

        async def hold(conn: Connection) -> None:
            taken.set()
            await release.wait()

        held = asyncio.create_task(db.run(hold))
        await taken.wait()
        with pytest.raises(Unavailable, match="no database connection free"):
            await db.rows("SELECT 1")
        release.set()
        await held
        assert await db.rows("SELECT 1 AS one") == [{"one": 1}]


async def test_a_database_that_is_down_is_said_so_at_once_and_used_as_soon_as_it_is_back(
    database_url: str,
) -> None:
    async with (
        proxied(database_url) as (proxy, through),
        pool(through, pool_size=4, pool_timeout_s=30, connect_timeout_s=2) as db,
    ):
        assert await db.rows("SELECT 1 AS one") == [{"one": 1}]
        await proxy.stop()  # the connection dies, new ones are refused
        for _ in range(3):
            # A deadline far short of the pool's 30 s: said at once, not after the timeout.
            async with asyncio.timeout(10):
                with pytest.raises(Unavailable, match="database unavailable"):
                    await db.rows("SELECT 1")
        await proxy.start()
        async with asyncio.timeout(10):  # no retry schedule to wait for
            assert await db.rows("SELECT 1 AS one") == [{"one": 1}]


async def test_pooled_connections_carry_no_startup_options_and_prepare_nothing(
    database_url: str,
) -> None:
    async def settings_of(conn: Connection) -> tuple[Any, Any]:
        [row] = await (await conn.execute("SHOW statement_timeout")).fetchall()
        return row["statement_timeout"], conn.prepare_threshold

    async with pool(database_url, statement_timeout_ms=1234) as direct:
        assert await direct.run(settings_of) == ("1234ms", 5)
    async with pool(database_url, statement_timeout_ms=1234, database_pooled=True) as pooled:
        timeout, threshold = await pooled.run(settings_of)
        assert timeout != "1234ms" and threshold is None
    prepared = {"database_pooled": True, "database_prepared_statements": True}
    async with pool(database_url, **prepared) as behind_a_tracking_pooler:
        assert (await behind_a_tracking_pooler.run(settings_of))[1] == 5
