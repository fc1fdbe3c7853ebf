"""The work loop: lease leads, heartbeat them, run a handler on each, complete or release.

It never runs a lead it no longer holds. Every lease in flight is renewed in
one batch call per tick, at a third of the ttl; when a renew answers lost, or
no renew has been confirmed in time to be sure the lease is still valid (the
service unreachable), the lead's handler is stopped and its result is never
sent. An async handler is cancelled as a task; a sync handler runs in its own
thread and is told through the ``CancelToken`` of its ``Job``, which it polls.

After the handler (its ``Outcome``):

- it returned a value → ``complete(done, value)``; ``Cached(value)`` → ``cached``;
- it raised, or ran past ``max_runtime_s`` → ``release`` with a backoff delay
  while attempts remain (``attempt < max_attempts``), else ``complete(failed)``;
- the worker is stopping (``stop()``, SIGTERM, SIGINT) → in-flight leads get
  ``grace_s`` to finish, then are cancelled and released for another worker.

The loop stops when a lease comes back empty after its wait with nothing in
flight, unless ``forever``.

Leases are judged on ``clock`` (monotonic seconds; tests inject a fake one):
when each was received, until when it is surely valid, when its handler
passes ``max_runtime_s``. Speaks to the service through ``leaseq.client`` only.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import json
import logging
import math
import os
import random
import signal
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from leaseq.client import AsyncClient
from leaseq.errors import InvalidInput, LeaseLost, LeaseqError, PayloadTooLarge, Unavailable
from leaseq.limits import MAX_ERROR_CHARS, MAX_LEASE_BATCH, MAX_TTL_S, MAX_WAIT_S
from leaseq.model import JSON, FinalStatus, Lease, RenewItem
from leaseq.worker.job import Cached, Handler, Job, StopReason
from leaseq.worker.metrics import Metrics

log = logging.getLogger("leaseq.worker")

Clock = Callable[[], float]

DEFAULT_TTL_S = 60.0
DEFAULT_WAIT_S = 10.0
DEFAULT_GRACE_S = 10.0
CANCEL_WAIT_S = 5.0  # how long a stopped handler gets to end before it is abandoned
IDLE_POLL_S = 1.0  # an empty lease is not repeated sooner than this
RETRY_BASE_S = 1.0
MAX_RETRY_DELAY_S = 300.0


def default_owner() -> str:
    """``hostname-pid``: the name a worker leases under unless told otherwise."""
    return f"{os.uname().nodename}-{os.getpid()}"


def default_retry_delay(attempt: int, base_s: float = RETRY_BASE_S) -> float:
    """Seconds before failed attempt n is retried: base · 2^(n-1), at most 300, jittered."""
    delay = min(MAX_RETRY_DELAY_S, base_s * 2.0 ** max(attempt - 1, 0))
    return delay * random.uniform(0.75, 1.0)


def safety_margin(ttl_s: float) -> float:
    """How long before a lease's expiry its handler is stopped: the stop itself takes time."""
    return min(1.0, ttl_s * 0.1)


@dataclass(slots=True)
class WorkerStats:
    """What one worker did so far."""

    leased: int = 0
    done: int = 0
    cached: int = 0
    failed: int = 0  # completed as failed (attempts used up)
    errors: int = 0  # handler attempts that failed: exception, exit status, max runtime
    released: int = 0  # for a retry after an error, or at shutdown
    lost: int = 0  # leases lost while held: the handler was stopped, nothing sent
    in_flight: int = 0
    started: float = field(default_factory=time.monotonic)
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)

    @property
    def finished(self) -> int:
        return self.done + self.cached + self.failed

    def rate(self) -> float:
        """Leads finished per second since the start."""
        elapsed = self.clock() - self.started
        return self.finished / elapsed if elapsed > 0 else 0.0


class Outcome(StrEnum):
    """How a handler's run ended, and so what the worker sends."""

    DONE = "done"  # complete as done
    CACHED = "cached"  # complete as cached
    ERROR = "error"  # release for a retry, or complete as failed on the last attempt
    LOST = "lost"  # the lease is gone: send nothing
    SHUTDOWN = "shutdown"  # release for another worker


@dataclass(frozen=True, slots=True)
class Ended:
    """A handler's outcome, with its result or error."""

    outcome: Outcome
    result: JSON = None
    error: str | None = None


@dataclass(eq=False, slots=True)
class Held:
    """A lease in flight in this worker, on the worker's clock.

    ``valid_until`` is the instant before which the lease is surely still
    valid: its receipt (or a confirmed renewal's send time) plus the ttl,
    less a safety margin. Past it, or past the handler's maximum runtime,
    the handler must stop (``due``).
    """

    job: Job
    valid_until: float
    started: float
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)
    reason: StopReason | None = None
    settling: bool = False  # the handler is over; complete or release is being sent

    @property
    def lease(self) -> Lease:
        return self.job.lease

    @property
    def lost(self) -> bool:
        return self.reason is not None and self.reason.lease_gone

    def interrupt(self, reason: StopReason) -> None:
        """Stop the handler; losing the lease overrides any earlier reason."""
        if self.reason is None or reason.lease_gone:
            self.reason = reason
        self.job.cancel_token.cancel(reason)
        self.interrupted.set()

    def renewed(self, sent: float, ttl_s: float) -> None:
        """A renewal sent at ``sent`` was confirmed: valid for its ttl from then (never less)."""
        self.valid_until = max(self.valid_until, sent + ttl_s - safety_margin(ttl_s))

    def deadline(self, max_runtime_s: float | None) -> float:
        """When the handler must stop at the latest."""
        return min(self.valid_until, self.started + (max_runtime_s or math.inf))

    def due(self, now: float, max_runtime_s: float | None) -> StopReason | None:
        """Why the handler must stop at ``now``: the lease may have ended, or its time is up."""
        if now >= self.valid_until:
            return StopReason.EXPIRED
        if max_runtime_s is not None and now >= self.started + max_runtime_s:
            return StopReason.MAX_RUNTIME
        return None


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (an object with async __call__)
    )


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.replace("\x00", "")


def _error_text(error: str) -> str:
    """An attempt's error as the service takes it: at most MAX_ERROR_CHARS."""
    return error[:MAX_ERROR_CHARS]


class Worker:
    """Leases leads of one session and runs ``handler`` on each, ``concurrency`` at a time.

    ``await worker.run()`` returns the ``WorkerStats`` when the queue is empty
    (or after ``stop()``). Errors other than an unreachable service (bad
    session, unauthorized) end the run by raising.
    """

    def __init__(
        self,
        client: AsyncClient,
        session: str,
        handler: Handler,
        *,
        owner: str | None = None,
        concurrency: int = 1,
        ttl_s: float = DEFAULT_TTL_S,
        wait_s: float = DEFAULT_WAIT_S,
        max_runtime_s: float | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        forever: bool = False,
        retry_delay: Callable[[int], float] = default_retry_delay,
        cancel_wait_s: float = CANCEL_WAIT_S,
        metrics: Metrics | None = None,
        clock: Clock = time.monotonic,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if not 0 < ttl_s <= MAX_TTL_S:
            raise ValueError(f"ttl_s must be > 0 and ≤ {MAX_TTL_S:g}")
        if not 0 <= wait_s <= MAX_WAIT_S:
            raise ValueError(f"wait_s must be from 0 to {MAX_WAIT_S:g}")
        if max_runtime_s is not None and max_runtime_s <= 0:
            raise ValueError("max_runtime_s must be > 0")
        self.client = client
        self.session = session
        self.handler = handler
        self.owner = owner or default_owner()
        self.concurrency = concurrency
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.max_runtime_s = max_runtime_s
        self.grace_s = max(grace_s, 0.0)
        self.forever = forever
        self.retry_delay = retry_delay
        self.cancel_wait_s = cancel_wait_s
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.stats = WorkerStats(started=clock(), clock=clock)
        self.heartbeat_s = ttl_s / 3
        self._is_async = _is_async(handler)
        self._held: dict[str, Held] = {}  # by lease token: a lead may come back
        self._runners: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._stopping_at: float | None = None  # time.monotonic(); -inf: no grace left

    # -- control -----------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping_at is not None

    def stop(self) -> None:
        """Stop leasing; leads in flight get ``grace_s``, then are released. Twice: no grace."""
        if self._stopping_at is None:
            self._stopping_at = time.monotonic()
            self._stop_event.set()
            log.info(
                "stopping: no new leases; %d in flight get %.1fs", len(self._held), self.grace_s
            )
            return
        log.info("stopping now: releasing %d leads in flight", len(self._held))
        self._stopping_at = -math.inf
        self._interrupt_all(StopReason.SHUTDOWN)

    def _interrupt_all(self, reason: StopReason) -> None:
        for held in list(self._held.values()):
            held.interrupt(reason)

    def _grace_left(self) -> float:
        if self._stopping_at is None:
            return self.grace_s
        return max(0.0, self._stopping_at + self.grace_s - time.monotonic())

    async def run(self, *, handle_signals: bool = False) -> WorkerStats:
        """Work until the queue is empty (or forever, or stopped); SIGTERM/SIGINT call ``stop``."""
        loop = asyncio.get_running_loop()
        signals = (signal.SIGTERM, signal.SIGINT) if handle_signals else ()
        for signum in signals:
            loop.add_signal_handler(signum, self.stop)
        self.stats.started = self.clock()
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
            for signum in signals:
                loop.remove_signal_handler(signum)
        return self.stats

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when the worker is told to stop."""
        if seconds > 0 and not self.stopping:
            try:
                async with asyncio.timeout(seconds):
                    await self._stop_event.wait()
            except TimeoutError:
                pass

    # -- leasing -----------------------------------------------------------

    async def _lease_loop(self) -> None:
        failures = 0
        while not self.stopping:
            free = min(self.concurrency - len(self._runners), MAX_LEASE_BATCH)
            if free <= 0:
                self._slot_freed.clear()
                await _first(self._slot_freed.wait(), self._stop_event.wait())
                continue
            sent = time.monotonic()
            try:
                leases = await self._lease(free)
            except Unavailable as exc:
                failures += 1
                delay = self.client.retry_policy.delay(failures)
                log.warning("lease failed (%s); again in %.1fs", exc.detail, delay)
                await self._sleep(delay)
                continue
            failures = 0
            received = time.monotonic()
            for lease in leases:
                self._start(lease)
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

    def _start(self, lease: Lease) -> None:
        self.stats.leased += 1
        self.metrics.leased()
        received = self.clock()
        valid_until = received + self.ttl_s - safety_margin(self.ttl_s)
        held = Held(Job(lease), valid_until=valid_until, started=received)
        if self.stopping:  # leased while stopping: give it straight back
            held.interrupt(StopReason.SHUTDOWN)
        self._held[lease.token] = held
        self.stats.in_flight = len(self._held)
        task = asyncio.create_task(self._hold(held), name=f"leaseq-lead-{lease.lead.id}")
        self._runners.add(task)
        task.add_done_callback(self._runner_done)

    def _runner_done(self, task: asyncio.Task[None]) -> None:
        self._runners.discard(task)
        self._slot_freed.set()

    async def _drain(self) -> None:
        """Wait for the leads in flight; when stopping, up to the grace period, then release."""
        if not self._runners:
            return
        if self.stopping:
            await asyncio.wait(self._runners, timeout=self._grace_left())
            self._interrupt_all(StopReason.SHUTDOWN)
        while self._runners:
            await asyncio.wait(self._runners)

    # -- heartbeat ---------------------------------------------------------

    async def _heartbeat(self) -> None:
        """Renew every lease in flight in one batch call per tick, at a third of the ttl."""
        while True:
            await asyncio.sleep(self.heartbeat_s)
            try:
                await self._renew_all()
            except Exception:
                log.exception("heartbeat failed")
            self.check_deadlines()

    async def _renew_all(self) -> None:
        held = [h for h in self._held.values() if not h.lost]
        if not held:
            return
        sent = self.clock()
        items = [RenewItem(h.lease.lead.id, h.lease.token, self.ttl_s) for h in held]
        try:
            async with asyncio.timeout(max(self.heartbeat_s, 1.0)):
                answers = await self.client.renew_many(items)
        except (TimeoutError, LeaseqError) as exc:
            why = exc.detail if isinstance(exc, LeaseqError) else "timed out"
            log.warning("heartbeat of %d leases failed: %s", len(items), why)
            return
        for h, answer in zip(held, answers, strict=True):
            if answer.ok:
                h.renewed(sent, self.ttl_s)
            elif not h.settling:
                h.interrupt(StopReason.LOST)

    def check_deadlines(self) -> None:
        """Stop every running handler whose lease may have ended or whose time is up."""
        now = self.clock()
        for held in list(self._held.values()):
            if held.settling or held.reason is not None:
                continue
            reason = held.due(now, self.max_runtime_s)
            if reason is not None:
                held.interrupt(reason)

    # -- one lead ----------------------------------------------------------

    async def _hold(self, held: Held) -> None:
        lead_id = held.lease.lead.id
        try:
            ended = await self._execute(held)
            held.settling = True
            self.metrics.handled(self.clock() - held.started)
            await self._settle(held, ended)
        except Exception:
            log.exception("lead %d: unexpected error in the worker", lead_id)
        finally:
            self._held.pop(held.lease.token, None)
            self.stats.in_flight = len(self._held)

    def _launch(self, job: Job) -> asyncio.Future[Any]:
        """Start the handler: a task if it is async, else a thread of its own."""
        if self._is_async:
            return asyncio.ensure_future(self.handler(job))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()

        def target() -> None:
            try:
                result = context.run(self.handler, job)
            except BaseException as exc:
                _deliver(loop, future, None, exc)
            else:
                _deliver(loop, future, result, None)

        thread = threading.Thread(target=target, name=f"leaseq-lead-{job.id}", daemon=True)
        thread.start()
        future.add_done_callback(_consume)
        return future

    async def _execute(self, held: Held) -> Ended:
        """Run the handler until it ends, the lease is lost, max runtime or shutdown."""
        if held.reason is None:
            work = self._launch(held.job)
            interrupted = asyncio.ensure_future(held.interrupted.wait())
            try:
                while not work.done() and held.reason is None:
                    now = self.clock()
                    reason = held.due(now, self.max_runtime_s)
                    if reason is not None:
                        held.interrupt(reason)
                        continue
                    await asyncio.wait(
                        {work, interrupted},
                        timeout=held.deadline(self.max_runtime_s) - now,
                        return_when=asyncio.FIRST_COMPLETED,
                    )
            finally:
                interrupted.cancel()
            finished_first = work.done()  # before any cancel: a result it chose to return
            if not finished_first:
                await self._stop_handler(held, work)
            if held.lost:
                return Ended(Outcome.LOST)
            if finished_first and not work.cancelled():
                exc = work.exception()
                if exc is None:
                    value = work.result()
                    if isinstance(value, Cached):
                        return Ended(Outcome.CACHED, value.result)
                    return Ended(Outcome.DONE, value)
                if held.reason is None:
                    return Ended(Outcome.ERROR, error=_describe(exc))
        if held.lost:
            return Ended(Outcome.LOST)
        if held.reason is StopReason.MAX_RUNTIME:
            return Ended(Outcome.ERROR, error=f"{StopReason.MAX_RUNTIME} ({self.max_runtime_s:g}s)")
        return Ended(Outcome.SHUTDOWN)

    async def _stop_handler(self, held: Held, work: asyncio.Future[Any]) -> None:
        """Cancel a running handler and give it ``cancel_wait_s`` to stop."""
        log.info("lead %d: cancelling the handler (%s)", held.lease.lead.id, held.reason)
        if self._is_async:
            work.cancel()
        await asyncio.wait({work}, timeout=self.cancel_wait_s)
        if not work.done():
            log.warning(
                "lead %d: the handler did not stop within %.1fs; abandoned",
                held.lease.lead.id,
                self.cancel_wait_s,
            )
            if self._is_async:
                work.add_done_callback(_consume)
        elif not work.cancelled():
            work.exception()  # retrieved: not an "exception never retrieved" warning

    async def _settle(self, held: Held, ended: Ended) -> None:
        """Send what the outcome calls for; never anything for a lost lease."""
        lease = held.lease
        lead_id = lease.lead.id
        if ended.outcome is Outcome.LOST:
            self._lost(held, held.reason or StopReason.LOST)
            return
        if ended.outcome is Outcome.SHUTDOWN:
            if await self._send(held, lambda: self.client.release(lead_id, lease.token, 0.0)):
                self.stats.released += 1
                self.metrics.released("shutdown")
                log.info("lead %d: released (shutdown)", lead_id)
            return
        if ended.outcome in (Outcome.DONE, Outcome.CACHED):
            status: FinalStatus = "cached" if ended.outcome is Outcome.CACHED else "done"
            try:
                json.dumps(ended.result, allow_nan=False)
            except (TypeError, ValueError) as exc:
                ended = Ended(Outcome.ERROR, error=f"the result is not JSON: {_describe(exc)}")
            else:
                try:
                    result = ended.result
                    sent = await self._send(
                        held, lambda: self.client.complete(lead_id, lease.token, status, result)
                    )
                except (InvalidInput, PayloadTooLarge) as exc:
                    ended = Ended(Outcome.ERROR, error=f"the result was refused: {exc.detail}")
                else:
                    if sent:
                        self._finished(status)
                    return
        await self._fail(held, _error_text(ended.error or "failed"))

    async def _fail(self, held: Held, error: str) -> None:
        """Retry later while attempts remain, else complete as failed."""
        lease = held.lease
        lead_id = lease.lead.id
        self.stats.errors += 1
        self.metrics.failed()
        if lease.attempt < lease.lead.max_attempts:
            delay = max(0.0, self.retry_delay(lease.attempt))
            log.warning(
                "lead %d attempt %d failed, retry in %.1fs: %s",
                lead_id,
                lease.attempt,
                delay,
                error,
            )
            if await self._send(held, lambda: self.client.release(lead_id, lease.token, delay)):
                self.stats.released += 1
                self.metrics.released("retry")
            return
        log.warning("lead %d failed after %d attempts: %s", lead_id, lease.attempt, error)
        fail = lambda: self.client.complete(lead_id, lease.token, "failed", None, error)  # noqa: E731
        if await self._send(held, fail):
            self._finished("failed")

    async def _send(self, held: Held, call: Callable[[], Awaitable[Any]]) -> bool:
        """Send a complete or release; retried while the lease is surely valid. False if lost."""
        retry = 0
        while True:
            try:
                await call()
                return True
            except LeaseLost:
                self._lost(held, StopReason.LOST)
                return False
            except Unavailable as exc:
                delay = self.client.retry_policy.delay(retry)
                if self.clock() + delay >= held.valid_until:
                    self._lost(held, f"service unreachable until the lease ran out ({exc.detail})")
                    return False
                await asyncio.sleep(delay)
                retry += 1

    def _finished(self, status: FinalStatus) -> None:
        setattr(self.stats, status, getattr(self.stats, status) + 1)
        self.metrics.completed(status)

    def _lost(self, held: Held, why: str) -> None:
        self.stats.lost += 1
        self.metrics.lost()
        log.warning("lead %d: %s; nothing sent", held.lease.lead.id, why)


def run_worker(
    url: str, session: str, handler: Handler, *, token: str | None = None, **options: Any
) -> WorkerStats:
    """Blocking: work ``session`` at ``url`` until the queue is empty; SIGTERM/SIGINT stop it.

    ``options`` are ``Worker``'s (concurrency, ttl_s, wait_s, max_runtime_s, grace_s …).
    Signals are handled only when called from the main thread.
    """
    in_main_thread = threading.current_thread() is threading.main_thread()

    async def main() -> WorkerStats:
        async with AsyncClient(url, token=token) as client:
            worker = Worker(client, session, handler, **options)
            return await worker.run(handle_signals=in_main_thread)

    return asyncio.run(main())


def _deliver(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    result: Any,
    exc: BaseException | None,
) -> None:
    """Hand a handler thread's answer to the event loop (if it still runs)."""

    def settle() -> None:
        if future.done():
            return
        if exc is None:
            future.set_result(result)
        else:
            future.set_exception(exc)

    with contextlib.suppress(RuntimeError):  # the loop is gone: the worker has ended
        loop.call_soon_threadsafe(settle)


def _consume(future: asyncio.Future[Any]) -> None:
    if not future.cancelled():
        future.exception()


async def _first(*awaitables: Awaitable[Any]) -> None:
    """Wait until the first of several awaitables is done; cancel the others we wrapped."""
    futures = [asyncio.ensure_future(a) for a in awaitables]
    try:
        await asyncio.wait(futures, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for given, future in zip(awaitables, futures, strict=True):
            if future is not given and not future.done():
                future.cancel()
