"""What one API process runs besides its routes, wired together: database, queue, leasing
(one session's leases, the fleet's share-out across sessions, the long poll), the waits for
outcomes (``app.domain.outcome``), listener, and
the maintenance services of ``app.service.maintenance``.

``Runtime.start`` opens the pool, starts the listener, tries boot recovery
before serving and, if the database is down, keeps trying in the background
while readyz answers 503; then the sweeper, and the pruner (idempotency keys
always, terminal leads when ``prune_after_s`` is set), and the scheduler. ``Runtime.stop`` ends
long polls (they answer with no leases), cancels the tasks, and drains and
closes the pool.

Servers wait for open requests to finish before they run the lifespan
shutdown, so a long poll would hold a stopping server for up to 30 s. When
the server handles SIGTERM/SIGINT with a Python handler (uvicorn does), the
runtime chains its own in front: the signal ends the long polls at once, then
the server's handler runs as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

import psycopg

from app import metrics
from app.config import Settings
from app.domain.fences import Fences
from app.domain.outcome import Outcomes
from app.domain.queue import Queue
from app.domain.schedules import Schedules
from app.domain.tokens import Tokens
from app.leasing.entry import Leasing
from app.service.maintenance import Pruner, Readiness, Recovery, Scheduler, Sweeper
from app.store.listener import Listener
from app.store.pool import Database
from leaseq.errors import Unavailable

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


@dataclass
class Runtime:
    settings: Settings
    db: Database
    queue: Queue
    leasing: Leasing
    listener: Listener
    recovery: Recovery
    readiness: Readiness
    tokens: Tokens
    outcomes: Outcomes
    schedules: Schedules
    fences: Fences
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _chained: dict[signal.Signals, tuple[Any, Any]] = field(default_factory=dict)

    @staticmethod
    def check(settings: Settings) -> None:
        """Raises ValueError for settings a runtime cannot be built from (no database URL)."""
        if settings.database_url is None:
            raise ValueError(
                "LEASEQ_DATABASE_URL is not set (`leaseq serve` starts an embedded PostgreSQL)"
            )

    @classmethod
    def build(cls, settings: Settings) -> Runtime:
        cls.check(settings)
        # leaseq_db_pool_connections{state="checked_out"} follows every checkout and checkin.
        db = Database.from_settings(settings, on_checkout=metrics.POOL.labels("checked_out").inc)
        queue = Queue(
            db,
            ledger=settings.ledger,
            default_ttl_s=settings.lease_ttl_s,
            max_payload_bytes=settings.max_payload_bytes,
            group_commit=settings.group_commit,
            default_max_queued=settings.max_queued,
            quota_retry_after_s=settings.quota_retry_after_s,
        )
        leasing = Leasing(queue, fair_by=settings.fair_by)
        listener = Listener(
            settings.listen_url,  # None behind a pooler without a direct URL: slow poll
            max_waiters=settings.max_waiters,
            max_outcome_waiters=settings.max_outcome_waiters,
            poll_interval_s=settings.poll_interval_s,
            connect_timeout_s=settings.connect_timeout_s,
        )
        leasing.listen(listener)
        tokens = Tokens(db, queue.sessions_of, recheck_s=settings.token_recheck_s)
        leasing.token_live = tokens.live
        listener.on_token_revoked = tokens.changed
        recovery = Recovery(queue)
        outcomes = Outcomes(queue, listener)
        schedules = Schedules(
            db,
            default_max_attempts=queue.default_max_attempts,
            max_payload_bytes=settings.max_payload_bytes,
        )
        readiness = Readiness(db, recovery)
        fences = Fences(db, settings.fence_key_list)
        return cls(
            settings,
            db,
            queue,
            leasing,
            listener,
            recovery,
            readiness,
            tokens,
            outcomes,
            schedules,
            fences,
        )

    async def start(self) -> None:
        self._chain_shutdown_signals()
        await self.db.open()
        metrics.POOL.labels("size").inc(self.db.size)
        self._spawn(self.listener.run(), "leaseq-listener")
        await self.recovery.once()
        # The fence keys, read (or made, on a new database) before the first lease: made later,
        # on a cluster with a worker node stopped, their write would fail every session's.
        # A database not migrated yet has no leaseq_config: the service starts unready
        # (/readyz says why) and the keys are read at the first lease instead.
        with contextlib.suppress(Unavailable, psycopg.errors.UndefinedTable):
            await self.fences.keys()
        sweeper = Sweeper(self.queue, self.recovery, self.settings.sweep_interval_s)
        self._spawn(sweeper.run(), "leaseq-sweeper")
        pruner = Pruner(
            self.queue,
            self.settings.prune_after_s,
            self.settings.prune_interval_s,
            keys_after_s=self.settings.idempotency_ttl_s,
        )
        self._spawn(pruner.run(), "leaseq-pruner")
        self._spawn(Scheduler(self.schedules).run(), "leaseq-scheduler")

    def _spawn(self, work: Any, name: str) -> None:
        self._tasks.append(asyncio.create_task(work, name=name))

    async def stop(self) -> None:
        self._unchain_shutdown_signals()
        self.listener.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.leasing.fleet.close()
        await self.db.close()  # after the statements whose callers stopped waiting
        metrics.POOL.labels("size").dec(self.db.size)
        metrics.process_exit()

    async def ready(self) -> str | None:
        """None when ready to serve; else why not (readyz)."""
        return await self.readiness.reason()

    def _chain_shutdown_signals(self) -> None:
        """Make SIGTERM/SIGINT end the long polls before the server's own handler runs."""
        if threading.current_thread() is not threading.main_thread():
            return
        loop = asyncio.get_running_loop()
        for sig in SHUTDOWN_SIGNALS:
            previous = signal.getsignal(sig)
            if not callable(previous) or previous is signal.default_int_handler:
                continue  # no server handler to run after ours: leave the default alone

            def on_signal(signum: int, frame: FrameType | None, previous: Any = previous) -> None:
                loop.call_soon_threadsafe(self.listener.close)
                previous(signum, frame)

            signal.signal(sig, on_signal)
            self._chained[sig] = (on_signal, previous)

    def _unchain_shutdown_signals(self) -> None:
        for sig, (ours, previous) in self._chained.items():
            if signal.getsignal(sig) is ours:
                signal.signal(sig, previous)
        self._chained.clear()
