"""Leasing: as many leads as there are free slots, long-polled, each then held and run.

A worker holds up to ``capacity`` leads: its handler slots and a small
prefetch, so the next lead is there when a handler ends. A long poll reserves
the slots it asks for; a completion's ``next`` (``completing``) asks only for
those neither held nor reserved, so the two never hold more than the capacity.

A lease is timed from when its request was *sent* (``Held.leased``), never
from the service's ``expires_at``. The loop stops when a lease comes back
empty after its whole wait with nothing in flight, unless ``forever``. When
the service cannot be reached, every retry says so with the service's URL,
and after ``give_up_s`` of failures the run ends with ``Unavailable``,
unless ``forever``. Told to stop while a long poll waits, the poll gets the
grace period: a lease it brings is given straight back.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

from leaseq.errors import LeaseqError, Unavailable
from leaseq.limits import MAX_LEASE_BATCH, MIN_TTL_S
from leaseq.model import Lease
from leaseq.worker.core import WorkerCore, naming
from leaseq.worker.held import Held, kill_grace
from leaseq.worker.job import Job, StopReason

log = logging.getLogger("leaseq.worker")

IDLE_POLL_S = 1.0  # an empty lease is not repeated sooner than this


class Leasing(WorkerCore):
    """Leases leads into the free slots and starts each (the module docstring)."""

    async def _lease_loop(self) -> None:
        failing_since: float | None = None
        failures = 0
        while not self.stopping:
            free = min(self.capacity - len(self._held) - self._reserved, MAX_LEASE_BATCH)
            if free <= 0:
                self._slot_freed.clear()
                await _first(self._slot_freed.wait(), self._stop_event.wait())
                continue
            sent = self.clock()
            self._reserved += free  # a completion meanwhile asks only for what is left
            try:
                try:
                    leases = await self._lease(free)
                finally:
                    self._reserved -= free
            except Unavailable as exc:
                failing_since = sent if failing_since is None else failing_since
                failures += 1
                why = naming(self.client.url, exc.detail)
                delay = self.client.retry_policy.delay(failures)
                failing = self.clock() - failing_since
                if self.give_up_s is not None and failing + delay >= self.give_up_s:
                    self._end(
                        Unavailable(
                            f"gave up after {failing:.1f}s without reaching the service "
                            f"({why}); --forever keeps trying"
                        )
                    )
                    return
                log.warning("lease failed (%s); again in %.1fs", why, delay)
                await self._sleep(delay)
                continue
            failing_since, failures = None, 0
            received = self.clock()
            for lease in leases:
                self._start(lease, sent=sent, received=received)
            if leases:
                continue
            # Empty after the whole wait: the queue is empty. Empty sooner: the service
            # cut the wait short (it is shutting down); that says nothing about the queue.
            waited = received - sent >= self.wait_s * 0.9
            if waited and not self._runners and not self.forever:
                log.info("queue empty: stopping")
                return
            await self._sleep(IDLE_POLL_S - (received - sent))

    async def _lease(self, free: int) -> list[Lease]:
        """One lease call; if the worker is told to stop meanwhile, it gets the grace period."""
        call = asyncio.ensure_future(
            self.client.lease(
                self.session, self.owner, max=free, ttl_s=self.ttl_s, wait_s=self.wait_s
            )
        )
        await _first(call, self._stop_event.wait())
        if not call.done():
            await asyncio.wait({call}, timeout=self._grace_left())
            if not call.done():
                call.cancel()
                await asyncio.gather(call, return_exceptions=True)
                return []
        return call.result()

    def _start(self, lease: Lease, *, sent: float, received: float) -> None:
        """Hold a lease whose request was sent at ``sent``, and run its handler."""
        self.stats.leased += 1
        self.metrics.leased()
        ttl = lease.ttl_s if lease.ttl_s is not None else self.ttl_s
        if ttl is None:  # a service too old to say: the worker cannot time the lease
            ttl = MIN_TTL_S
            self._fatal = LeaseqError("the service does not say a lease's ttl_s: give --ttl")
            self.stop()
        grace = kill_grace(ttl, self.kill_grace_s)
        if self.kill_grace_s is not None and grace < self.kill_grace_s and not self._clamped:
            self._clamped = True
            log.warning(
                "the kill grace is %.2fs, not %gs: the ttl is %gs", grace, self.kill_grace_s, ttl
            )
        job = Job.of(lease, kill_grace_s=grace)
        held = Held.leased(job, sent=sent, ttl_s=ttl, received=received)
        if not held.confirmed.is_set():
            log.info("lead %d: its lease came late; confirming it before it runs", lease.lead.id)
        if self.stopping:  # leased while stopping: give it straight back
            held.interrupt(StopReason.SHUTDOWN)
        self._held[lease.token] = held
        self.stats.holding(len(self._held))
        if held.renew_at < self._heartbeat_at:  # due before the heartbeat wakes: wake it now
            self._schedule.set()
        task = asyncio.create_task(self._hold(held), name=f"leaseq-lead-{lease.lead.id}")
        self._runners.add(task)
        task.add_done_callback(self._runner_done)

    def _runner_done(self, task: asyncio.Task[None]) -> None:
        self._runners.discard(task)
        self._slot_freed.set()


async def _first(*awaitables: Awaitable[Any]) -> None:
    """Wait until the first of several awaitables is done; cancel the others we wrapped."""
    futures = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for given, future in zip(awaitables, futures, strict=True):
            if future is not given and not future.done():
                future.cancel()
