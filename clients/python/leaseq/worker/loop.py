"""The work loop: lease leads, renew them, run a handler on each, complete or release.

It never runs a lead it no longer holds (SPEC invariant 8), and never gives
one back while its handler may still run. Each lease's time is kept on the
worker's own clock from the instants its requests were sent (``Held``, in
``leaseq.worker.held``): the handler is told to stop a kill grace and a
margin before the lease could have ended, unless a renewal is confirmed
first; renewals go in one batch call for the leases due, a third of the ttl
after the last confirmed one was sent, retried soon after a failure, each
call's timeout what is left before the first of its leases must stop. A
renewal answered lost stops the handler at once, and nothing is sent for it.
An async handler is cancelled as a task; a sync handler runs in its own
thread and is told through the ``CancelToken`` of its ``Job``, which it
polls; a command's whole process tree is killed (``leaseq.worker.command``).
A checkpoint the handler sets (``job.checkpoint``) rides on the lease's next
renewal, and on one more renewal before the lead is given back.

After the handler (its ``Outcome``):

- it returned a value → ``complete(done, value)``; ``Cached(value)`` → ``cached``;
- it raised, or ran past ``max_runtime_s`` → ``release`` with a backoff delay
  while attempts remain (``attempt < max_attempts``), else ``complete(failed)``;
- it raised ``HandlerUnusable`` (its program cannot start) → ``release``, and
  the worker stops leasing and ends with that error;
- it did not stop within its kill grace when told to → nothing is sent: the
  lease is left to expire (it may still run), and the worker says so;
- the worker is stopping (``stop()``, SIGTERM, SIGINT) → in-flight leads get
  ``grace_s`` to finish, then are stopped and released for another worker.

The loop stops when a lease comes back empty after its wait with nothing in
flight, unless ``forever``. When the service cannot be reached, every lease
retry says so, with the service's URL, and after ``give_up_s`` of failures
the run ends with ``Unavailable``, unless ``forever``.

Tests inject ``clock`` (monotonic seconds). Speaks to the service through
``leaseq.client`` only.
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
import re
import signal
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any

from leaseq.client import NO_RETRY, AsyncClient, new_idempotency_key
from leaseq.errors import (
    InvalidInput,
    LeaseLost,
    LeaseqError,
    PayloadTooLarge,
    Unavailable,
    first_line,
)
from leaseq.limits import (
    MAX_ERROR_CHARS,
    MAX_ITEM_BATCH,
    MAX_LEASE_BATCH,
    MAX_TTL_S,
    MAX_WAIT_S,
    MIN_TTL_S,
)
from leaseq.model import JSON, FinalStatus, Lease, NextLease, RenewItem
from leaseq.worker.held import Held, check_kill_grace, kill_grace
from leaseq.worker.job import Cached, Handler, HandlerUnusable, Job, StopReason
from leaseq.worker.metrics import Metrics

log = logging.getLogger("leaseq.worker")

Clock = Callable[[], float]

DEFAULT_WAIT_S = 2.0
DEFAULT_GRACE_S = 10.0
DEFAULT_GIVE_UP_S = 60.0
MAX_SECONDS = 366 * 24 * 3600.0  # any duration beyond a year is a typo
IDLE_POLL_S = 1.0  # an empty lease is not repeated sooner than this
RETRY_BASE_S = 1.0
MAX_RETRY_DELAY_S = 300.0
MIN_CALL_TIMEOUT_S = 0.05
LOG_EVERY_S = 5.0  # a failing heartbeat says so at most this often
_CHECKPOINT_FIELD = re.compile(r"items\[(\d+)\]\.checkpoint")


def default_owner() -> str:
    """``hostname-pid``: the name a worker leases under unless told otherwise."""
    return f"{os.uname().nodename}-{os.getpid()}"


def default_retry_delay(attempt: int, base_s: float = RETRY_BASE_S) -> float:
    """Seconds before failed attempt n is retried: base · 2^(n-1), at most 300, jittered."""
    delay = min(MAX_RETRY_DELAY_S, base_s * 2.0 ** max(attempt - 1, 0))
    return delay * random.uniform(0.75, 1.0)


def check_seconds(name: str, value: float | None, *, low: float, high: float) -> None:
    """Refuse a duration outside [low, high] (NaN and infinities too). Raises ValueError."""
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be from {_seconds(low)} to {_seconds(high)}")


def _seconds(value: float) -> str:
    days, rest = divmod(value, 86400)
    return f"{days:g} days" if days and not rest else f"{value:g}s"


@dataclass(slots=True)
class WorkerStats:
    """What one worker did so far. ``started`` is when it started (UTC, wall clock)."""

    leased: int = 0
    done: int = 0
    cached: int = 0
    failed: int = 0  # completed as failed (attempts used up)
    errors: int = 0  # handler attempts that failed: exception, exit status, max runtime
    released: int = 0  # for a retry after an error, at shutdown, or unusable
    lost: int = 0  # leases lost while held: the handler was stopped, nothing sent
    abandoned: int = 0  # handlers that did not stop when told: their leases left to expire
    in_flight: int = 0
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    busy_s: float = 0.0  # time with at least one lead in flight (clock seconds)
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)
    busy_since: float | None = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> int:
        return self.done + self.cached + self.failed

    def holding(self, in_flight: int) -> None:
        """The leads in flight are now ``in_flight``; busy time runs while there are any."""
        now = self.clock()
        if in_flight and self.busy_since is None:
            self.busy_since = now
        elif not in_flight and self.busy_since is not None:
            self.busy_s += now - self.busy_since
            self.busy_since = None
        self.in_flight = in_flight

    def busy(self) -> float:
        """Seconds with leads in flight so far: waiting for work does not count."""
        running = 0.0 if self.busy_since is None else self.clock() - self.busy_since
        return self.busy_s + running

    def rate(self) -> float:
        """Leads finished per second of busy time."""
        busy = self.busy()
        return self.finished / busy if busy > 0 else 0.0


class Outcome(StrEnum):
    """How a handler's run ended, and so what the worker sends."""

    DONE = "done"  # complete as done
    CACHED = "cached"  # complete as cached
    ERROR = "error"  # release for a retry, or complete as failed on the last attempt
    LOST = "lost"  # the lease is gone: send nothing
    SHUTDOWN = "shutdown"  # release for another worker
    ABANDONED = "abandoned"  # the handler would not stop: send nothing, let the lease expire
    UNUSABLE = "unusable"  # the handler can run nothing: release, and stop the worker


@dataclass(frozen=True, slots=True)
class Ended:
    """A handler's outcome, with its result or error."""

    outcome: Outcome
    result: JSON = None
    error: str | None = None


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
    """Leases leads and runs ``handler`` on each, ``concurrency`` at a time.

    ``session``: one session's name; several, to lease from whichever of them is
    furthest below its fair share by weight; None, from any session.

    ``await worker.run()`` returns the ``WorkerStats`` when the queue is empty
    (or after ``stop()``). Errors other than an unreachable service (bad
    session, unauthorized) end the run by raising; so does a service out of
    reach for ``give_up_s`` (``Unavailable``), and a handler that can run
    nothing (``HandlerUnusable``).

    ``ttl_s`` None takes the service's default lease time (``LEASEQ_LEASE_TTL_S``).
    ``kill_grace_s`` is how long a handler told to stop has before it is killed
    (a command) or abandoned (a function); None: 2 s, less for a short ttl.
    ``lease_on_complete``: a completion asks for the next lead in the same request
    (SPEC ``next``), so a busy worker sends one request per lead.
    Raises ValueError for an option out of range.
    """

    def __init__(
        self,
        client: AsyncClient,
        session: str | Sequence[str] | None,
        handler: Handler,
        *,
        owner: str | None = None,
        concurrency: int = 1,
        ttl_s: float | None = None,
        wait_s: float = DEFAULT_WAIT_S,
        max_runtime_s: float | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        kill_grace_s: float | None = None,
        forever: bool = False,
        give_up_s: float | None = DEFAULT_GIVE_UP_S,
        retry_delay: Callable[[int], float] = default_retry_delay,
        metrics: Metrics | None = None,
        clock: Clock = time.monotonic,
        lease_on_complete: bool = True,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        check_seconds("ttl_s", ttl_s, low=MIN_TTL_S, high=MAX_TTL_S)
        check_seconds("wait_s", wait_s, low=0, high=MAX_WAIT_S)
        check_seconds("max_runtime_s", max_runtime_s, low=0.001, high=MAX_SECONDS)
        check_seconds("grace_s", grace_s, low=0, high=MAX_SECONDS)
        check_seconds("kill_grace_s", kill_grace_s, low=0, high=MAX_SECONDS)
        check_seconds("give_up_s", give_up_s, low=0.001, high=MAX_SECONDS)
        if ttl_s is not None and kill_grace_s is not None:
            check_kill_grace(ttl_s, kill_grace_s)
        if not isinstance(session, str | None) and not session:
            raise ValueError("give a session, several, or None for any session")
        self.client = client
        self.session = session if isinstance(session, str | None) else tuple(session)
        self.handler = handler
        self.owner = owner or default_owner()
        self.concurrency = concurrency
        self.ttl_s = ttl_s
        self.wait_s = wait_s
        self.max_runtime_s = max_runtime_s
        self.grace_s = grace_s
        self.kill_grace_s = kill_grace_s
        self.forever = forever
        self.give_up_s = None if forever else give_up_s
        self.retry_delay = retry_delay
        self.lease_on_complete = lease_on_complete
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.stats = WorkerStats(clock=clock)
        self._is_async = _is_async(handler)
        self._held: dict[str, Held] = {}  # by lease token: a lead may come back
        self._runners: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._schedule = asyncio.Event()  # wakes the heartbeat: a new lease, or a new clock
        self._stopping_at: float | None = None  # time.monotonic(); -inf: no grace left
        self._fatal: BaseException | None = None  # ends the run once the leads in flight end
        self._clamped = False

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

    def _end(self, error: BaseException) -> None:
        """End the run with ``error``: no grace, and no retries of what is still sent."""
        self._fatal = error
        self._stopping_at = -math.inf
        self._stop_event.set()
        self._interrupt_all(StopReason.SHUTDOWN)

    def _interrupt_all(self, reason: StopReason) -> None:
        for held in list(self._held.values()):
            held.interrupt(reason)

    def _grace_left(self) -> float:
        if self._stopping_at is None:
            return self.grace_s
        return max(0.0, self._stopping_at + self.grace_s - time.monotonic())

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
            for signum in signals:
                loop.remove_signal_handler(signum)
            self.stats.holding(0)
        if self._fatal is not None:
            raise self._fatal
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
        failing_since: float | None = None
        failures = 0
        while not self.stopping:
            free = min(self.concurrency - len(self._runners), MAX_LEASE_BATCH)
            if free <= 0:
                self._slot_freed.clear()
                await _first(self._slot_freed.wait(), self._stop_event.wait())
                continue
            sent = self.clock()
            try:
                leases = await self._lease(free)
            except Unavailable as exc:
                failing_since = sent if failing_since is None else failing_since
                failures += 1
                why = _naming(self.client.url, exc.detail)
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
        self._schedule.set()
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
        """Renew each lease on its schedule, those due together in one batch call."""
        failing_since: float | None = None
        last_said = -math.inf
        while True:
            now = self.clock()
            live = [h for h in self._held.values() if not h.lost and not h.abandoned]
            next_at = min((h.renew_at for h in live), default=math.inf)
            if next_at > now:
                await self._wait_schedule(next_at - now)
                continue
            # Those due within a sixth of their ttl go along: early renewals cost nothing.
            batch = [h for h in live if h.renew_at <= now + h.ttl_s / 6]
            why = await self._renew(batch)
            if why is None:
                failing_since = None
            else:
                now = self.clock()
                failing_since = now if failing_since is None else failing_since
                if now - last_said >= LOG_EVERY_S:
                    last_said = now
                    log.warning(
                        "renewal of %d leases failed for %.1fs (%s); retrying while time remains",
                        len(batch),
                        now - failing_since,
                        _naming(self.client.url, why),
                    )
            self.check_deadlines()

    async def _wait_schedule(self, seconds: float) -> None:
        """Sleep ``seconds``, or until a new lease or ``check_deadlines`` changes the schedule."""
        self._schedule.clear()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(seconds):
                await self._schedule.wait()

    async def _renew(self, batch: list[Held]) -> str | None:
        """Renew ``batch`` in one call, timed out before the first of them must stop.

        None when it was answered; else why not (each lease then retries soon).
        """
        sent = self.clock()
        remaining = min(h.needed_by() for h in batch) - sent
        timeout = min(max(remaining, MIN_CALL_TIMEOUT_S), self.client.timeout_s)
        # Each lease's newest checkpoint not carried yet goes along (and its version).
        carried = [h.job.checkpoints.unsent() for h in batch]
        items = [
            RenewItem(h.lease.lead.id, h.lease.token, h.ttl_s, None if c is None else c[1])
            for h, c in zip(batch, carried, strict=True)
        ]
        try:
            async with asyncio.timeout(timeout):
                answers = await self.client.renew_many(items, policy=NO_RETRY, timeout_s=timeout)
        except Exception as exc:  # whatever it was, the heartbeat goes on: retry soon
            now = self.clock()
            self._drop_refused_checkpoints(exc, batch, carried)
            for h in batch:
                h.renew_failed(now)
            if isinstance(exc, TimeoutError):
                return f"no answer in {timeout:.2f}s"
            if not isinstance(exc, LeaseqError):
                log.exception("renewal failed unexpectedly")
            return first_line(exc)
        for h, answer, checkpoint in zip(batch, answers, carried, strict=True):
            if answer.ok:
                h.renewed(sent, answer.ttl_s or h.ttl_s)
                if checkpoint is not None:
                    h.job.checkpoints.sent(checkpoint[0])
            elif h.settling:
                h.renew_at = math.inf  # its complete or release will hear it is lost
            else:
                h.interrupt(StopReason.LOST)
        return None

    def _drop_refused_checkpoints(
        self, exc: Exception, batch: list[Held], carried: list[tuple[int, JSON] | None]
    ) -> None:
        """A checkpoint the service refused (422: too large, too deep) would fail every renewal
        it rides on: it is dropped, and the leases renewed without it."""
        if not isinstance(exc, InvalidInput):
            return
        found = _CHECKPOINT_FIELD.fullmatch(exc.field)
        if found is None:
            return
        named = int(found[1])  # its place in its call of at most MAX_ITEM_BATCH items
        exact = len(batch) <= MAX_ITEM_BATCH
        for i, (h, checkpoint) in enumerate(zip(batch, carried, strict=True)):
            if checkpoint is not None and (i == named or not exact):
                h.job.checkpoints.sent(checkpoint[0])
                log.error("lead %d: its checkpoint was refused (%s); dropped", h.lease.lead.id, exc)

    def check_deadlines(self) -> None:
        """Stop every running handler whose lease may end soon or whose time is up."""
        now = self.clock()
        for held in list(self._held.values()):
            if held.settling or held.reason is not None:
                continue
            reason = held.due(now, self.max_runtime_s)
            if reason is not None:
                held.interrupt(reason)
        self._schedule.set()

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
            self.stats.holding(len(self._held))

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

    async def _confirmed(self, held: Held) -> bool:
        """Wait until the lease is confirmed (it is at once, but after a late answer)."""
        waiting = asyncio.ensure_future(held.confirmed.wait())
        interrupted = asyncio.ensure_future(held.interrupted.wait())
        try:
            while not held.confirmed.is_set() and held.reason is None:
                now = self.clock()
                if now >= held.unconfirmed_until:
                    held.interrupt(StopReason.EXPIRED)
                    break
                await asyncio.wait(
                    {waiting, interrupted},
                    timeout=held.unconfirmed_until - now,
                    return_when=asyncio.FIRST_COMPLETED,
                )
        finally:
            waiting.cancel()
            interrupted.cancel()
        return held.confirmed.is_set()

    async def _execute(self, held: Held) -> Ended:
        """Run the handler until it ends, the lease may end, max runtime or shutdown."""
        if await self._confirmed(held) and held.reason is None:
            held.started = self.clock()
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
            if held.abandoned:
                return Ended(Outcome.ABANDONED)
            if held.lost:
                return Ended(Outcome.LOST)
            if finished_first and not work.cancelled():
                exc = work.exception()
                if isinstance(exc, HandlerUnusable):
                    return Ended(Outcome.UNUSABLE, error=str(exc))
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
        """Stop a running handler; it has its kill grace (and the margin) to end."""
        lead_id = held.lease.lead.id
        log.info("lead %d: stopping the handler (%s)", lead_id, held.reason)
        if self._is_async:
            work.cancel()
        patience = held.job.kill_grace_s + held.margin
        await asyncio.wait({work}, timeout=patience)
        if work.done():
            if not work.cancelled():
                work.exception()  # retrieved: not an "exception never retrieved" warning
            return
        held.abandoned = True
        work.add_done_callback(_consume)
        log.error(
            "lead %d: the handler did not stop within %.1fs (%s); it may still be running, so "
            "its lease is not released: it is left to expire",
            lead_id,
            patience,
            held.reason,
        )

    async def _settle(self, held: Held, ended: Ended) -> None:
        """Send what the outcome calls for; never anything for a lost or abandoned lease."""
        lease = held.lease
        lead_id = lease.lead.id
        if ended.outcome is Outcome.ABANDONED:
            self.stats.abandoned += 1
            self.metrics.abandoned()
            return
        if ended.outcome is Outcome.LOST:
            self._lost(held, held.reason or StopReason.LOST)
            return
        if ended.outcome is Outcome.UNUSABLE:
            await self._unusable(held, ended.error or "the handler cannot run")
            return
        if ended.outcome is Outcome.SHUTDOWN:
            await self._carry_checkpoint(held)
            release = lambda: self.client.release(  # noqa: E731
                lead_id, lease.token, 0.0, error=StopReason.SHUTDOWN.value
            )
            if await self._send(held, release):
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
                    sent = await self._complete(held, status, ended.result)
                except (InvalidInput, PayloadTooLarge) as exc:
                    ended = Ended(Outcome.ERROR, error=f"the result was refused: {exc.detail}")
                else:
                    if sent:
                        self._finished(status)
                    return
        await self._fail(held, _error_text(ended.error or "failed"))

    async def _unusable(self, held: Held, error: str) -> None:
        """Give the lead back and stop the worker: every lead would fail the same way."""
        lease = held.lease
        log.error("lead %d: %s; releasing it and stopping", lease.lead.id, error)
        await self._carry_checkpoint(held)
        text = _error_text(error)
        release = lambda: self.client.release(lease.lead.id, lease.token, 0.0, error=text)  # noqa: E731
        if await self._send(held, release):
            self.stats.released += 1
        if self._fatal is None:
            self._fatal = HandlerUnusable(error)
            self.stop()

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
            await self._carry_checkpoint(held)
            release = lambda: self.client.release(lead_id, lease.token, delay, error=error)  # noqa: E731
            if await self._send(held, release):
                self.stats.released += 1
                self.metrics.released("retry")
            return
        log.warning("lead %d failed after %d attempts: %s", lead_id, lease.attempt, error)
        if await self._complete(held, "failed", None, error):
            self._finished("failed")

    async def _complete(
        self, held: Held, status: FinalStatus, result: JSON, error: str | None = None
    ) -> bool:
        """Send the completion; False if the lease was lost. Unless the worker is stopping, the
        same request leases a lead for the slot this one frees (``next``), which starts at once."""
        lease = held.lease
        lead_id, token = lease.lead.id, lease.token
        if not self.lease_on_complete or self.stopping:
            return await self._send(
                held, lambda: self.client.complete(lead_id, token, status, result, error)
            )
        ask = NextLease(self.session, self.owner, 1, self.ttl_s)
        key = new_idempotency_key()  # the same for every retry: they get the same lease
        sent = self.clock()  # the first send: a lease taken then counts from it
        taken: list[Lease] = []

        async def complete_and_lease() -> None:
            nonlocal taken
            _, taken = await self.client.complete_and_lease(
                lead_id, token, status, result, error, next=ask, idempotency_key=key
            )

        try:
            completed = await self._send(held, complete_and_lease)
        except InvalidInput as exc:
            if exc.field not in ("body.next", "next"):  # not "the service knows no next"
                raise
            log.warning("the service leases nothing with a completion (%s); asking apart", exc)
            self.lease_on_complete = False
            return await self._complete(held, status, result, error)
        received = self.clock()
        for new in taken:
            self._start(new, sent=sent, received=received)
        return completed

    async def _carry_checkpoint(self, held: Held) -> None:
        """Before a lead is given back, a checkpoint no renewal carried yet goes with one, so the
        next holder resumes from it. A failure is only logged: the release says the rest."""
        unsent = held.job.checkpoints.unsent()
        if unsent is None:
            return
        version, value = unsent
        lease = held.lease
        remaining = held.valid_until - self.clock()
        try:
            async with asyncio.timeout(max(remaining, MIN_CALL_TIMEOUT_S)):
                await self.client.renew(lease.lead.id, lease.token, held.ttl_s, checkpoint=value)
        except (LeaseqError, TimeoutError) as exc:
            why = first_line(exc) if str(exc) else type(exc).__name__
            log.warning("lead %d: its last checkpoint was not stored: %s", lease.lead.id, why)
            return
        held.job.checkpoints.sent(version)

    async def _send(self, held: Held, call: Callable[[], Awaitable[Any]]) -> bool:
        """Send a complete or release; retried while the lease is surely valid. False if lost.

        Both are safe to repeat: a completion sent again is answered as the first,
        a release sent again finds the lease given back (lease_lost, no change).
        """
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
                unreachable = isinstance(self._fatal, Unavailable)  # the run gave up on it
                if unreachable or self.clock() + delay >= held.valid_until:
                    why = _naming(self.client.url, exc.detail)
                    self._lost(held, f"service unreachable until the lease ran out ({why})")
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


def _naming(url: str, detail: str) -> str:
    """A failure's detail, with the service's URL unless it names it already."""
    return detail if url in detail else f"{url}: {detail}"


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
