"""The service's maintenance: boot recovery, the sweeper, the pruner and the health checks.

Each is one small service over the queue, as River's ``internal/maintenance``:

* ``Recovery``: one sweep over every session before serving (boot recovery),
  retried with backoff while the database does not answer; once it succeeds,
  the autovacuum check runs;
* ``Sweeper``: requeues expired leases every ``interval_s``;
* ``Pruner``: forgets old idempotency keys, and deletes terminal leads older
  than ``older_than_s`` when set, every ``interval_s`` (retention);
  ``leaseq prune`` runs the same ``Queue.prune``;
* ``Scheduler``: pushes the lead of each schedule whose tick has come
  (``Schedules.tick``), every ``TICK_EVERY_S``, the first time at start (the
  latest tick missed while no process ran);
* ``check_autovacuum``: warns once when the server runs no autovacuum;
* ``Readiness``: why the service is not ready to serve, if it is not.

Nothing here is needed for correctness: several processes may run them on
one database, and each only speeds recovery up. None ever raises out of its
loop; each logs and tries again. Knows nothing of HTTP: ``app.service.runtime``
wires them into a process.
"""

from __future__ import annotations

import asyncio
import logging

import psycopg

from app import metrics
from app.domain.queue import Queue
from app.domain.schedules import Schedules
from app.store import migrate, statements
from app.store.pool import Database

log = logging.getLogger("leaseq.maintenance")

RECOVERY_BACKOFF_FIRST_S = 0.5
RECOVERY_BACKOFF_MAX_S = 10.0
# How long a readiness verdict is kept: at most one database check a second, however many probes.
READY_CACHE_S = 1.0
# How often delayed leads that came due are made ready, however long the sweep interval.
PROMOTE_EVERY_S = 1.0

# How often the due schedules are looked for: a tick is pushed within this of its time.
TICK_EVERY_S = 1.0

# What the operator is told, in the service's log and on the dashboard, when
# the server runs no autovacuum (``statements.autovacuum``).
AUTOVACUUM_OFF = (
    "Autovacuum is off on this PostgreSQL server (SHOW autovacuum): the space of finished "
    "and pruned leads is never reclaimed, so leads, lead_events and their indexes keep "
    "growing and leasing slows down. Turn autovacuum on, or run VACUUM leads, lead_events "
    "regularly."
)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


class Recovery:
    """Boot recovery: requeue every lease that expired while no sweeper ran."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue
        self.done = asyncio.Event()

    async def once(self) -> bool:
        """One attempt; True once recovered (then the autovacuum check runs)."""
        try:
            await self.queue.keep_config()
            result = await self.queue.sweep_all()
        except Exception as exc:
            log.warning("boot recovery failed (%s); retrying", _why(exc))
            return False
        metrics.count_sweep(result, "boot")
        log.info("boot recovery: %d requeued, %d failed", result.requeued, result.failed)
        self.done.set()
        await check_autovacuum(self.queue.db)
        return True

    async def until_done(self) -> None:
        """Retry with backoff until recovered (returns at once if it already is)."""
        backoff = RECOVERY_BACKOFF_FIRST_S
        while not self.done.is_set():
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECOVERY_BACKOFF_MAX_S)
            await self.once()


class Sweeper:
    """Requeue expired leases in every session every ``interval_s`` (after recovery), and make
    delayed leads that came due ready (``Queue.promote``), at least every ``PROMOTE_EVERY_S``."""

    def __init__(self, queue: Queue, recovery: Recovery, interval_s: float) -> None:
        self.queue = queue
        self.recovery = recovery
        self.interval_s = interval_s

    async def run(self) -> None:
        """Until cancelled; never raises otherwise."""
        await self.recovery.until_done()
        loop = asyncio.get_running_loop()
        swept_at = loop.time()
        while True:
            await asyncio.sleep(min(self.interval_s, PROMOTE_EVERY_S))
            try:
                await self.queue.promote()
            except Exception as exc:
                log.warning("promotion of due leads failed: %s", _why(exc))
            if loop.time() - swept_at < self.interval_s:
                continue
            swept_at = loop.time()
            try:
                metrics.count_sweep(await self.queue.sweep_all(), "background")
            except Exception as exc:
                log.warning("background sweep failed: %s", _why(exc))


class Periodic:
    """A service that runs ``once`` every ``interval_s`` until cancelled (``once`` logs its own
    failures, so ``run`` never raises otherwise)."""

    interval_s: float

    async def run(self) -> None:
        while True:
            await self.once()
            await asyncio.sleep(self.interval_s)

    async def once(self) -> None:
        raise NotImplementedError


class Pruner(Periodic):
    """Retention: every ``interval_s``, forget idempotency keys older than ``keys_after_s``
    and, when ``older_than_s`` is set, delete terminal leads older than that (in small
    batches, see ``Queue.prune``); then fold the lead counts (``Queue.fold_counts``), forget
    the frees of keys no lease reads (``Queue.forget_frees``) and delete
    the watches of outcomes that processes which stopped left
    (``app.store.statements.outcomes``)."""

    def __init__(
        self, queue: Queue, older_than_s: float | None, interval_s: float, keys_after_s: float
    ) -> None:
        self.queue = queue
        self.older_than_s = older_than_s
        self.interval_s = interval_s
        self.keys_after_s = keys_after_s

    async def once(self) -> None:
        """One pass; failures are logged."""
        try:
            keys = await self.queue.prune_keys(self.keys_after_s)
            if keys:
                log.info("forgot %d idempotency keys older than %g s", keys, self.keys_after_s)
            if self.older_than_s is not None:
                pruned = await self.queue.prune(self.older_than_s)
                if pruned:
                    log.info("pruned %d terminal leads older than %g s", pruned, self.older_than_s)
            await self.queue.fold_counts()
            await self.queue.forget_frees()
            await self.queue.db.rows(statements.forget_stale_watches())
        except Exception as exc:
            log.warning("prune failed: %s", _why(exc))


class Scheduler(Periodic):
    """Push the lead of every due schedule every ``interval_s``; exactly once per tick however
    many processes run one (``app.domain.schedules``)."""

    def __init__(self, schedules: Schedules, interval_s: float = TICK_EVERY_S) -> None:
        self.schedules = schedules
        self.interval_s = interval_s

    async def once(self) -> None:
        """One look; failures are logged."""
        try:
            for tick in await self.schedules.tick():
                log.info("schedule %s: tick %s pushed lead %d", tick.name, tick.tick, tick.lead_id)
        except Exception as exc:
            log.warning("schedule tick failed: %s", _why(exc))


async def check_autovacuum(db: Database) -> None:
    """Once, when the database first answers: warn when the server runs no autovacuum."""
    try:
        [row] = await db.rows(statements.autovacuum())
    except Exception as exc:
        log.warning("cannot read the autovacuum setting: %s", _why(exc))
        return
    enabled = bool(row["enabled"])
    metrics.AUTOVACUUM.set(1 if enabled else 0)
    if not enabled:
        log.warning(AUTOVACUUM_OFF)


async def schema_revision(db: Database) -> str | None:
    """The database's schema revision; None when it has no leaseq schema. Raises Unavailable."""
    try:
        rows = await db.rows(statements.schema_revision())
    except psycopg.errors.UndefinedTable:
        return None
    return str(rows[0]["version_num"]) if rows else None


class Readiness:
    """Whether the service may serve: the database answers at this code's schema, recovered.

    The verdict is kept for ``cache_s``: probes are open and cheap to send, so
    however often they come, one statement a second at most reaches the
    database, and concurrent probes share it. A failure the pool saw since
    (a lost connection, a failed connect) makes the next probe look again.
    """

    def __init__(self, db: Database, recovery: Recovery, *, cache_s: float = READY_CACHE_S) -> None:
        self.db = db
        self.recovery = recovery
        self.cache_s = cache_s
        self._checked_at: float | None = None
        self._failures = db.failures
        self._schema: str | None = None
        self._lock = asyncio.Lock()

    async def reason(self) -> str | None:
        """None when ready to serve; else why not (readyz)."""
        async with self._lock:
            now = asyncio.get_running_loop().time()
            stale = self._checked_at is None or now - self._checked_at >= self.cache_s
            if stale or self.db.failures != self._failures:
                self._failures = self.db.failures
                self._schema = await self._check_schema()
                self._checked_at = asyncio.get_running_loop().time()
            schema = self._schema
        if schema is not None:
            return schema
        if not self.recovery.done.is_set():
            return "boot recovery has not finished"
        return None

    async def _check_schema(self) -> str | None:
        try:
            revision = await schema_revision(self.db)
        except Exception as exc:
            return f"database unavailable: {type(exc.__cause__ or exc).__name__}"
        if revision != migrate.head():
            return "the database schema is not at the newest migration"
        return None
