"""What one API process runs besides its routes: engine, queue, listener, recovery, sweeper, pruner.

``Runtime.start`` builds them, tries boot recovery (one ``sweep_all``) before
serving and, if the database is down, keeps trying in the background while
readyz answers 503; then a sweeper requeues expired leases every
``sweep_interval_s``, and, when ``prune_after_s`` is set, a pruner deletes old
terminal leads every ``prune_interval_s``. Nothing here is needed for correctness — several
processes may serve one database, and each only speeds recovery up.
``Runtime.stop`` ends long polls (they answer with no leases), cancels the
tasks and closes the pool.

Servers wait for open requests to finish before they run the lifespan
shutdown, so a long poll would hold a stopping server for up to 30 s. When
the server handles SIGTERM/SIGINT with a Python handler (uvicorn does), the
runtime chains its own in front: the signal ends the long polls at once, then
the server's handler runs as before.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
from dataclasses import dataclass, field
from types import FrameType
from typing import Any

from sqlalchemy import event, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import metrics, migrate, sql
from app.config import Settings
from app.db import AUTOVACUUM_OFF, create_engine
from app.listener import Listener
from app.model import SweepResult
from app.queue import Queue

log = logging.getLogger("leaseq.api")

RECOVERY_BACKOFF_FIRST_S = 0.5
RECOVERY_BACKOFF_MAX_S = 10.0
SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def count_sweep(result: SweepResult, trigger: str) -> None:
    metrics.SWEEPS.labels(trigger).inc()
    metrics.SWEPT.labels("requeued").inc(result.requeued)
    metrics.SWEPT.labels("failed").inc(result.failed)


@dataclass
class Runtime:
    settings: Settings
    engine: AsyncEngine
    queue: Queue
    listener: Listener
    recovered: asyncio.Event = field(default_factory=asyncio.Event)
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)
    _chained: dict[signal.Signals, tuple[Any, Any]] = field(default_factory=dict)

    @classmethod
    def build(cls, settings: Settings) -> Runtime:
        url = settings.database_url
        if url is None:
            raise ValueError(
                "LEASEQ_DATABASE_URL is not set (`leaseq serve` starts an embedded PostgreSQL)"
            )
        engine = create_engine(settings, url)
        queue = Queue(
            engine,
            ledger=settings.ledger,
            default_ttl_s=settings.lease_ttl_s,
            max_payload_bytes=settings.max_payload_bytes,
        )
        listener = Listener(
            settings.listen_url,  # None behind a pooler without a direct URL: slow poll
            max_waiters=settings.max_waiters,
            poll_interval_s=settings.poll_interval_s,
            connect_timeout_s=settings.connect_timeout_s,
        )
        return cls(settings, engine, queue, listener)

    def _watch_pool(self) -> None:
        """Keep ``leaseq_db_pool_connections`` current as connections come and go."""
        checked_out = metrics.POOL.labels("checked_out")
        event.listen(self.engine.sync_engine, "checkout", lambda *_: checked_out.inc())
        event.listen(self.engine.sync_engine, "checkin", lambda *_: checked_out.dec())
        metrics.POOL.labels("size").inc(self.settings.pool_size)

    async def start(self) -> None:
        self._chain_shutdown_signals()
        self._watch_pool()
        self._tasks.append(asyncio.create_task(self.listener.run(), name="leaseq-listener"))
        await self._recover_once()
        self._tasks.append(asyncio.create_task(self._maintain(), name="leaseq-sweeper"))
        if self.settings.prune_after_s is not None:
            self._tasks.append(asyncio.create_task(self._prune(), name="leaseq-pruner"))

    async def stop(self) -> None:
        self._unchain_shutdown_signals()
        self.listener.close()
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()
        await self.queue.drain()
        await self.engine.dispose()
        metrics.POOL.labels("size").dec(self.settings.pool_size)
        metrics.process_exit()

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

    async def _recover_once(self) -> bool:
        """Boot recovery: requeue every lease that expired while no sweeper ran."""
        try:
            result = await self.queue.sweep_all()
        except Exception as exc:
            log.warning("boot recovery failed (%s: %s); retrying", type(exc).__name__, exc)
            return False
        count_sweep(result, "boot")
        log.info("boot recovery: %d requeued, %d failed", result.requeued, result.failed)
        self.recovered.set()
        await self._check_autovacuum()
        return True

    async def _check_autovacuum(self) -> None:
        """Once, when the database first answers: warn when the server runs no autovacuum."""
        try:
            async with self.engine.connect() as conn:
                enabled = bool((await conn.execute(sql.autovacuum())).scalar())
        except Exception as exc:
            log.warning("cannot read the autovacuum setting: %s: %s", type(exc).__name__, exc)
            return
        metrics.AUTOVACUUM.set(1 if enabled else 0)
        if not enabled:
            log.warning(AUTOVACUUM_OFF)

    async def _maintain(self) -> None:
        """Retry boot recovery until done, then sweep every ``sweep_interval_s``; never raise."""
        backoff = RECOVERY_BACKOFF_FIRST_S
        while not self.recovered.is_set():
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, RECOVERY_BACKOFF_MAX_S)
            await self._recover_once()
        while True:
            await asyncio.sleep(self.settings.sweep_interval_s)
            try:
                count_sweep(await self.queue.sweep_all(), "background")
            except Exception as exc:
                log.warning("background sweep failed: %s: %s", type(exc).__name__, exc)

    async def _prune(self) -> None:
        """Retention: every ``prune_interval_s``, delete terminal leads older than
        ``prune_after_s`` (in small batches, see ``Queue.prune``); never raise."""
        older_than_s = self.settings.prune_after_s
        assert older_than_s is not None
        while True:
            try:
                pruned = await self.queue.prune(older_than_s)
            except Exception as exc:
                log.warning("prune failed: %s: %s", type(exc).__name__, exc)
            else:
                if pruned:
                    log.info("pruned %d terminal leads older than %g s", pruned, older_than_s)
            await asyncio.sleep(self.settings.prune_interval_s)

    async def ready(self) -> str | None:
        """None when ready to serve; else why not (readyz)."""
        try:
            async with self.engine.connect() as conn:
                await conn.execute(text("SELECT 1"))
                at_head = await migrate.is_at_head(conn)
        except Exception as exc:
            return f"database unavailable: {type(exc).__name__}"
        if not at_head:
            return "the database schema is not at the newest migration"
        if not self.recovered.is_set():
            return "boot recovery has not finished"
        return None
