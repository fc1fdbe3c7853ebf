"""The work loop: lease leads, renew them, run a handler on each, complete or release.

It never runs a lead it no longer holds (docs/contract.md#invariant-8), and never gives
one back while its handler may still run. ``Worker`` is made of one part per
concept, each a module small enough to read whole:

- ``leasing``: leases into the free slots, long-polled; each lease held and run;
- ``heartbeat``: renews the leases in flight on their schedule, in batches;
- ``execution``: runs the handler until it ends or must stop; its ``Outcome``;
- ``settling``: sends what the outcome calls for (complete, release, nothing);
- ``completing``: completions that end close together, in one batch that leases the next;
- ``core``: the options and state they share, and the stop.

This module ties them together: ``run`` starts the heartbeat, leases until
the queue is empty (or forever, or stopped), and drains the leads in flight;
each lead is executed, then settled. On ``stop()`` (SIGTERM, SIGINT) the
worker leases no more, in-flight leads get ``grace_s`` to finish, then are
stopped and released for another worker.

Tests inject ``clock`` (monotonic seconds). Speaks to the service through
``AsyncClient`` only.
"""

from __future__ import annotations

import asyncio
import logging
import math
import signal
import threading
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from leaseq._client import AsyncClient
from leaseq.worker.execution import Execution
from leaseq.worker.heartbeat import Heartbeat
from leaseq.worker.held import Held
from leaseq.worker.job import Handler, StopReason
from leaseq.worker.leasing import Leasing
from leaseq.worker.settling import Settling
from leaseq.worker.stats import WorkerStats

log = logging.getLogger("leaseq.worker")


class Worker(Leasing, Heartbeat, Settling, Execution):
    """Leases leads and runs ``handler`` on each, ``concurrency`` at a time.

    ``session``: one session's name; several, to lease from whichever of them is
    furthest below its fair share by weight; None, from any session.

    ``await worker.run()`` returns the ``WorkerStats`` when the queue is empty
    (or after ``stop()``). Errors other than an unreachable service (bad
    session, unauthorized) end the run by raising; so does a service out of
    reach for ``give_up_s`` (``Unavailable``), and a handler that can run
    nothing (``HandlerUnusable``).

    ``ttl_s`` None asks for 30 s (``DEFAULT_WORKER_TTL_S``): renewed every third of it, so a
    worker killed outright strands its leads for seconds, not the service's default.
    ``kill_grace_s`` is how long a handler told to stop has before it is killed
    (a command) or abandoned (a function); None: 2 s, less for a short ttl.
    ``lease_on_complete``: completions that end close together go in one request that
    asks for the next leads (docs/contract.md#complete-and-lease), so a busy worker sends
    one request per batch of leads. ``prefetch``: leads held beyond those running, so the
    next is there when a handler ends (None: 1, a quarter of ``concurrency`` above 4).
    Raises ValueError for an option out of range.
    """

    async def run(self, *, handle_signals: bool = False) -> WorkerStats:
        """Work until the queue is empty (or forever, or stopped); SIGTERM/SIGINT call ``stop``.

        Raises what ended the run early: ``Unavailable`` after ``give_up_s`` out of
        reach, ``HandlerUnusable``, or the service's refusal (``LeaseqError``).
        """
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for signum in signals:
            loop.add_signal_handler(signum, self.stop)
        self.stats.started = datetime.now(UTC)
        heartbeat = asyncio.create_task(self._heartbeat(), name="leaseq-heartbeat")
        try:
            await self._lease_loop()
            await self._drain()
        finally:
            if self._runners:  # the lease loop raised: give back what is held, at once
                self._stopping_at = -math.inf
                self._interrupt_all(StopReason.SHUTDOWN)
                await asyncio.wait(self._runners)
            heartbeat.cancel()
            await asyncio.gather(heartbeat, return_exceptions=True)
            closing = getattr(self.handler, "aclose", None)
            if closing is not None:  # a handler's own processes (a command's guards)
                await closing()
            if self._threads is not None:
                self._threads.shutdown()
            for signum in signals:
                loop.remove_signal_handler(signum)
            self.stats.holding(0)
        if self._fatal is not None:
            raise self._fatal
        return self.stats

    async def _drain(self) -> None:
        """Wait for the leads in flight; when stopping, up to the grace period, then release."""
        if not self._runners:
            return
        if self.stopping:
            await asyncio.wait(self._runners, timeout=self._grace_left())
            self._interrupt_all(StopReason.SHUTDOWN)
        while self._runners:
            await asyncio.wait(self._runners)

    # -- one lead ----------------------------------------------------------

    async def _hold(self, held: Held) -> None:
        """One lead's life: executed, then settled; whatever happens, it is no longer held."""
        lead_id = held.lease.lead.id
        try:
            try:
                ended = await self._execute(held)
            finally:
                self._free_slot(held)
            held.settling = True
            self.metrics.handled(self.clock() - held.started)
            await self._settle(held, ended)
        except Exception:
            log.exception("lead %d: unexpected error in the worker", lead_id)
        finally:
            self._held.pop(held.lease.token, None)
            self.stats.holding(len(self._held))


def run_worker(
    url: str,
    session: str | Sequence[str] | None,
    handler: Handler,
    *,
    token: str | None = None,
    **options: Any,
) -> WorkerStats:
    """Blocking: work ``session`` (several, or None: any) at ``url`` until the queue is empty;
    SIGTERM/SIGINT stop it.

    ``options`` are ``Worker``'s (concurrency, ttl_s, wait_s, max_runtime_s, grace_s …).
    Signals are handled only when called from the main thread.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()

    async def main() -> WorkerStats:
        async with AsyncClient(url, token=token) as client:
            worker = Worker(client, session, handler, **options)
            return await worker.run(handle_signals=in_main_thread)

    return asyncio.run(main())
