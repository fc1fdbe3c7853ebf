"""The one way to PostgreSQL at runtime: psycopg's own pool, one error mapping, one shield.

``Database`` wraps a ``psycopg_pool.AsyncConnectionPool`` of autocommit
connections (each statement its own transaction, one round trip; rows as
dicts). Every statement of the queue, the report, the dashboard, readiness
and maintenance runs through ``Database.run`` (or ``rows``), which:

* maps failures once: an outage, a broken connection, a failed connect, a
  statement cut off by ``statement_timeout`` or an exhausted pool is
  ``Unavailable``; any other database error passes through as it is;
* fails fast while the database is down: a checkout that has to wait for a
  new connection gives up as soon as a connection attempt fails, instead of
  waiting out the pool's timeout;
* shields the work from its caller's cancellation: a caller cancelled
  mid-statement (a client that hung up, a shutdown) stops waiting, but the
  statement runs to its end in a task of its own and the connection goes
  back to the pool, never stranded; ``drain`` waits for such work before
  ``close``.

Connections carry ``connect_timeout`` and, unless they go through a pooler
(``pooled``: PgBouncer in transaction mode refuses startup options), a
``statement_timeout``; psycopg prepares no statement unless prepared
statements are allowed (a transaction pooler hands each transaction to any
server connection, where a named statement may not exist). A pooler that
refuses the startup options gets connections without them (and no prepared
statements), with one warning. When a pooler
nobody told us of shows itself by such an error (``DuplicatePreparedStatement``,
``InvalidSqlStatementName``, or a bind refused because the server connection holds
another client's statement of that name), prepared statements are turned off for the whole
pool, one warning is logged, and the statement is run once more: the failed
one never ran (a statement outside a transaction is retried alone; a
transaction, rolled back by then, is retried whole).

It also knows where the database runs (``app.store.topology``): read from the catalog
before the first statement the queue builds (``know_topology``), again after a failed
connection attempt or a lost connection (the next call reads it before it runs), and every
``topology.RECHECK_S`` (in the background, the calls meanwhile using what was read). Each
new answer is logged once.

Knows nothing of HTTP and nothing of the queue.
"""

from __future__ import annotations

import asyncio
import logging
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Self, TypeVar
from urllib.parse import urlsplit, urlunsplit

import psycopg
import psycopg._queries
from psycopg.pq import ExecStatus, TransactionStatus
from psycopg.rows import DictRow, dict_row
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout

from app.store import topology
from app.store.outage_log import OutageLog, quiet_pool_attempts
from app.store.statements import Statement
from app.store.topology import ONE_POSTGRESQL, Topology
from leaseq.errors import Unavailable, first_line

if TYPE_CHECKING:
    from app.config import Settings

log = logging.getLogger("leaseq.pg")

T = TypeVar("T")
Row = DictRow
Connection = psycopg.AsyncConnection[DictRow]
Params = Mapping[str, Any]

# psycopg turns a text's %(name)s placeholders into $n once and keeps the result, but only
# for texts of at most MAX_CACHED_STATEMENT_LENGTH bytes (4,096): a longer one is parsed
# again on every call (64 µs for complete_and_lease, a tenth of the service's CPU for a
# worker's request). Every text the service runs comes from the statement builders, a
# bounded set, so each is kept; tests/unit/test_rendered_sql.py checks every one fits.
STATEMENT_CACHE_BYTES = 16_384
psycopg._queries.MAX_CACHED_STATEMENT_LENGTH = max(
    psycopg._queries.MAX_CACHED_STATEMENT_LENGTH, STATEMENT_CACHE_BYTES
)

RECYCLE_S = 1800.0  # a connection is replaced after this long (server-side memory, failover)
DRAIN_TIMEOUT_S = 5.0

_SCHEME = re.compile(r"^postgres(?:ql)?(?:\+\w+)?://", re.IGNORECASE)


def libpq_url(url: str) -> str:
    """The URL as libpq (psql, psycopg) reads it: ``postgresql://``, whatever driver was named."""
    return _SCHEME.sub("postgresql://", url, count=1)


def redacted(url: str) -> str:
    """A database URL fit to print: its password hidden."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rpartition("@")
    user = netloc[0].partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc[2]}"))


@dataclass(frozen=True, slots=True)
class PoolStats:
    """The pool now: its configured size and the connections checked out of it."""

    size: int
    checked_out: int


class Database:
    """A pool of connections to one PostgreSQL database; see the module docstring.

    Build it with ``from_settings``: the defaults of every parameter are the
    settings' (``app.config``).
    """

    def __init__(
        self,
        url: str,
        *,
        pool_size: int,
        pool_timeout_s: float,
        connect_timeout_s: int,
        statement_timeout_ms: int,
        pooled: bool,
        prepared_statements: bool,
        on_checkout: Callable[[int], None] | None = None,
    ) -> None:
        """``on_checkout(n)`` hears each change (+1 out, -1 back) of the connections in use."""
        kwargs: dict[str, Any] = {
            "autocommit": True,
            "row_factory": dict_row,
            "connect_timeout": connect_timeout_s,
        }
        if not pooled:
            kwargs["options"] = f"-c statement_timeout={statement_timeout_ms}"
        if not prepared_statements:
            kwargs["prepare_threshold"] = None
        self.size = pool_size
        self.prepared_statements = prepared_statements
        self.failures = 0  # connection attempts failed and connections lost, so far
        self._connect_kwargs = kwargs  # the pool's own: what new connections are made with
        self._checked_out = 0
        self._on_checkout = on_checkout
        self._in_flight: set[asyncio.Future[Any]] = set()
        self._opened = False
        # Set when a connection attempt fails; replaced by a fresh one each time.
        self._connect_failed = asyncio.Event()
        self._last_failure: BaseException | None = None
        # Where the database runs: None until read; read again when stale (a failed
        # connection attempt, a lost connection) or older than topology.RECHECK_S.
        self._topology: Topology | None = None
        self._topology_stale = True
        self._topology_read_at = 0.0
        self._topology_reading: asyncio.Future[Topology] | None = None
        # An outage in a few lines instead of psycopg_pool's one per failed attempt.
        self.outage = OutageLog(f"the database at {redacted(url)}")
        quiet_pool_attempts()
        self._pool = AsyncConnectionPool(
            libpq_url(url),
            connection_class=_reporting(self),
            kwargs=kwargs,
            # Connections are made as they are needed, as many as pool_size; none
            # is kept open idle beyond the pool's max_idle.
            min_size=0,
            max_size=pool_size,
            timeout=pool_timeout_s,
            max_lifetime=RECYCLE_S,
            # A failed connect is tried once more at once, then left to the next
            # checkout, which fails fast meanwhile: no retry schedule runs behind
            # the callers' backs, and the first checkout after an outage connects.
            reconnect_timeout=0,
            open=False,
            name="leaseq",
        )

    @classmethod
    def from_settings(
        cls,
        settings: Settings,
        url: str | None = None,
        *,
        pool_size: int | None = None,
        on_checkout: Callable[[int], None] | None = None,
    ) -> Database:
        """The database ``settings`` describe (``url`` instead of ``settings.database_url``)."""
        target = url or settings.database_url
        if target is None:
            raise ValueError("no database URL")
        return cls(
            target,
            pool_size=pool_size or settings.pool_size,
            pool_timeout_s=settings.pool_timeout_s,
            connect_timeout_s=settings.connect_timeout_s,
            statement_timeout_ms=settings.statement_timeout_ms,
            pooled=settings.pooled,
            prepared_statements=settings.prepared_statements,
            on_checkout=on_checkout,
        )

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def open(self) -> None:
        """Start the pool (connections are made on demand). Idempotent."""
        if not self._opened:
            self._opened = True
            await self._pool.open(wait=False)

    async def close(self, drain_timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Wait (at most ``drain_timeout_s``) for shielded work, then close every connection."""
        await self.drain(drain_timeout_s)
        await self._pool.close()

    async def drain(self, timeout_s: float = DRAIN_TIMEOUT_S) -> None:
        """Wait, at most ``timeout_s``, for work whose callers stopped waiting."""
        if self._in_flight:
            await asyncio.wait(set(self._in_flight), timeout=timeout_s)

    def stats(self) -> PoolStats:
        return PoolStats(size=self.size, checked_out=self._checked_out)

    # -- where it runs -------------------------------------------------------

    @property
    def topology(self) -> Topology:
        """The topology read last (one PostgreSQL until the first read)."""
        return self._topology or ONE_POSTGRESQL

    async def know_topology(self) -> Topology:
        """The topology, read first when it never was or is stale (after a failed or lost
        connection); one older than ``topology.RECHECK_S`` is read again in the background
        while this call goes on with it. Raises Unavailable when it cannot be read."""
        if self._topology is None or self._topology_stale:
            return await self.read_topology()
        aged = time.monotonic() - self._topology_read_at > topology.RECHECK_S
        if aged and self._topology_reading is None:
            self._start_reading()  # a failure is retried by the next call
        return self._topology

    async def read_topology(self) -> Topology:
        """Read the topology now (one read shared by the callers that ask meanwhile); log it
        when it is new."""
        if self._topology_reading is None:
            self._start_reading()
        assert self._topology_reading is not None
        return await asyncio.shield(self._topology_reading)

    def _start_reading(self) -> None:
        self._topology_read_at = time.monotonic()  # one read per period, even a failed one
        reading = asyncio.ensure_future(self._read_topology())
        self._topology_reading = reading
        reading.add_done_callback(self._topology_read)

    async def _read_topology(self) -> Topology:
        self._topology_stale = False  # a failure while reading marks it stale again
        found = await self.run(topology.read)
        if found != self._topology:
            log.info("the database is %s", found.describe())
        self._topology = found
        return found

    def _topology_read(self, reading: asyncio.Future[Topology]) -> None:
        self._topology_reading = None
        if reading.cancelled() or reading.exception() is not None:
            self._topology_stale = True  # the next call reads it again

    # -- running work --------------------------------------------------------

    async def run(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        """Run ``work`` on a pooled connection, shielded from the caller's cancellation.

        Raises Unavailable for an outage or an exhausted pool; other database
        errors as psycopg raised them.
        """
        task = asyncio.ensure_future(self._on_connection(work))
        self._in_flight.add(task)
        task.add_done_callback(self._finished)
        return await asyncio.shield(task)

    async def rows(self, query: Statement | str, params: Params | None = None) -> list[Row]:
        """The rows of one statement (none for a statement that returns none): a built
        ``Statement``, or text and its parameters."""

        async def fetch(conn: Connection) -> list[Row]:
            return await execute(conn, query, params)

        return await self.run(fetch)

    def _finished(self, task: asyncio.Future[Any]) -> None:
        self._in_flight.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log an abandoned task's error

    async def _on_connection(self, work: Callable[[Connection], Awaitable[T]]) -> T:
        conn = await self._checkout()
        self._count(1)
        try:
            if not self.prepared_statements:
                conn.prepare_threshold = None
            try:
                return await work(conn)
            except psycopg.Error as exc:  # in a transaction, rolled back whole: run it again
                if not _prepared_lost(exc):
                    raise
                self.prepared_statements_failed(exc)
                conn.prepare_threshold = None
                return await work(conn)
        except psycopg.Error as exc:
            if _outage(conn, exc):
                self.failures += 1
                if conn.broken or conn.closed:  # reconnecting: read where it runs again
                    self._topology_stale = True
                raise Unavailable(f"database unavailable: {type(exc).__name__}") from exc
            raise
        finally:
            await self._pool.putconn(conn)  # a broken one is discarded and replaced
            self._count(-1)

    def _count(self, change: int) -> None:
        self._checked_out += change
        if self._on_checkout is not None:
            self._on_checkout(change)

    async def _checkout(self) -> Connection:
        """A connection of the pool; Unavailable as soon as the database is known to be down."""
        await self.open()
        try:
            if self._pool.get_stats().get("pool_available", 0) > 0:
                return await self._pool.getconn()  # one is idle: no wait, no connect
            return await self._waiting_checkout()
        except PoolTimeout as exc:
            raise Unavailable("no database connection free; try again shortly") from exc
        except PoolClosed as exc:
            raise Unavailable("the database pool is closed") from exc

    async def _waiting_checkout(self) -> Connection:
        """Wait for a connection, but no longer than the next failed connection attempt."""
        failed = self._connect_failed
        getting = asyncio.ensure_future(self._pool.getconn())
        watching = asyncio.ensure_future(failed.wait())
        try:
            await asyncio.wait({getting, watching}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            watching.cancel()
        if not getting.done():
            getting.cancel()
            await asyncio.gather(getting, return_exceptions=True)
        if getting.cancelled():
            why = type(self._last_failure).__name__ if self._last_failure else "connect failed"
            raise Unavailable(f"database unavailable: {why}") from self._last_failure
        return getting.result()

    def prepared_statements_failed(self, exc: BaseException) -> None:
        """A pooler lost a prepared statement: prepare none from now on, on any connection."""
        if not self.prepared_statements:
            return
        self.prepared_statements = False
        self._connect_kwargs["prepare_threshold"] = None
        log.warning(
            "%s: the database URL goes through a pooler that does not keep prepared "
            "statements; they are now off for this pool (set LEASEQ_DATABASE_POOLED=true, "
            "or LEASEQ_LISTEN_DATABASE_URL, to start so)",
            type(exc).__name__,
        )

    def pooler_refused_options(self, exc: BaseException) -> None:
        """A pooler refused the startup options: connect without them, prepare nothing."""
        if "options" not in self._connect_kwargs:
            return
        del self._connect_kwargs["options"]
        self._connect_kwargs["prepare_threshold"] = None
        self.prepared_statements = False
        log.warning(
            "the database URL goes through a pooler (it refused startup options: %s); "
            "connecting without them, prepared statements off, LEASEQ_STATEMENT_TIMEOUT_MS "
            "not applied (set LEASEQ_DATABASE_POOLED=true to start so)",
            first_line(exc),
        )

    def _failed_to_connect(self, exc: BaseException) -> None:
        """A connection attempt failed: whoever waits for a connection gives up now."""
        self._last_failure = exc
        self.failures += 1
        self._topology_stale = True  # the cluster may be another one once it answers
        self.outage.failed(exc)
        failed, self._connect_failed = self._connect_failed, asyncio.Event()
        failed.set()


# A lost connection, whatever the statement: an outage, a restart, a timeout.
_LOST = (psycopg.OperationalError, psycopg.InterfaceError)
# Citus's words for a worker node it could not reach, raised with no SQLSTATE of their own
# (XX000, as psycopg's InternalError); its other node failures are OperationalErrors (08006).
# A statement of a stopped node's shards is then an outage, never the statement's fault.
_NODE_UNREACHABLE = ("failure on connection marked as essential:", "cannot connect to ")


def _outage(conn: Connection, exc: psycopg.Error) -> bool:
    """Whether ``exc`` on ``conn`` is the database's outage (Unavailable) rather than the
    statement's own failure."""
    return (
        conn.broken
        or conn.closed
        or isinstance(exc, _LOST)
        or (
            isinstance(exc, psycopg.errors.InternalError_)
            and str(exc).startswith(_NODE_UNREACHABLE)
        )
    )


# A database error that ``Database.run`` lets through: not an outage (those it raises as
# Unavailable) but the statement's own failure (a value out of range, a constraint, an
# exception raised in SQL), which the same statement meets again on the same rows.
StatementFailed = psycopg.Error
# What PgBouncer answers a connection that carries startup options (statement_timeout).
_STARTUP_REFUSED = "unsupported startup parameter"


def _prepared_lost(exc: BaseException) -> bool:
    """A prepared statement a transaction pooler lost, doubled or mixed up between server
    connections: a name this connection prepared is missing there, already taken, or bound
    to another client's statement (``bind message supplies 6 parameters, but prepared
    statement "_pg3_0" requires 9``). The statement did not run."""
    if isinstance(
        exc, psycopg.errors.DuplicatePreparedStatement | psycopg.errors.InvalidSqlStatementName
    ):
        return True
    return isinstance(exc, psycopg.errors.ProtocolViolation) and "prepared statement" in str(exc)


def _reporting(database: Database) -> type[Connection]:
    """The pool's connection class: it tells ``database`` of every failed connection attempt."""

    class Reporting(psycopg.AsyncConnection[DictRow]):
        def prepared_statements_failed(self, exc: BaseException) -> None:
            database.prepared_statements_failed(exc)

        @classmethod
        async def connect(cls, *args: Any, **kwargs: Any) -> Self:
            try:
                try:
                    made = await super().connect(*args, **kwargs)
                except psycopg.OperationalError as exc:
                    if "options" not in kwargs or _STARTUP_REFUSED not in str(exc):
                        raise
                    database.pooler_refused_options(exc)
                    kwargs = {**kwargs, "prepare_threshold": None}
                    del kwargs["options"]
                    made = await super().connect(*args, **kwargs)
            except psycopg.Error as exc:
                database._failed_to_connect(exc)
                raise
            database.outage.connected()
            return made

    return Reporting


async def execute(
    conn: Connection, query: Statement | str, params: Params | None = None
) -> list[Row]:
    """Run one statement on ``conn``; its rows as dicts (none when it returns none).

    ``query`` is a built ``Statement`` (``app.store.statements``), or text with ``params``.

    Outside a transaction, a prepared statement a pooler lost is run once more,
    unprepared (it never ran); inside one, the error goes to ``Database.run``.
    """
    text, bound = (query.text, query.params) if isinstance(query, Statement) else (query, params)
    try:
        cursor = await conn.execute(text, bound)
    except psycopg.Error as exc:
        if not _prepared_lost(exc) or conn.info.transaction_status != TransactionStatus.IDLE:
            raise
        report = getattr(conn, "prepared_statements_failed", None)
        if report is not None:
            report(exc)
        conn.prepare_threshold = None
        cursor = await conn.execute(text, bound, prepare=False)
    # The result's status, not ``cursor.description``: that builds a Column per column on
    # every call, and the row factory builds them once already.
    result = cursor.pgresult
    if result is None or result.status != ExecStatus.TUPLES_OK:
        return []
    return await cursor.fetchall()
