"""The work loop: lease leads, heartbeat them, run a handler on each, complete or release.

It never runs a lead it no longer holds. Every lease in flight is renewed in
one batch call per tick, at a third of the ttl; when a renew answers lost, or
no renew has been confirmed in time to be sure the lease is still valid (the
service unreachable), the lead's handler is cancelled and its result is never
sent. An async handler is cancelled as a task; a sync handler runs in its own
thread and is told through the ``CancelToken`` of its ``Job``, which it polls.

After the handler:

- it returned a value → ``complete(done, value)``; ``Cached(value)`` → ``cached``;
- it raised, or ran past ``max_runtime_s`` → ``release`` with a backoff delay
  while attempts remain (``attempt < max_attempts``), else ``complete(failed)``;
- the worker is stopping (``stop()``, SIGTERM, SIGINT) → in-flight leads get
  ``grace_s`` to finish, then are cancelled and released for another worker.

The loop stops when a lease comes back empty after its wait with nothing in
flight, unless ``forever``. ``Command`` runs a program per lead (the handler of
``leaseq worker -- command``).

Speaks to the service through ``app.client`` only; knows nothing of the database.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import importlib
import inspect
import json
import logging
import math
import os
import random
import signal
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from app import worker_metrics as metrics
from app.client import AsyncClient, PayloadTooLarge
from app.config import MAX_LEASE_BATCH, MAX_TTL_S, MAX_WAIT_S
from app.errors import InvalidInput, LeaseLost, LeaseqError, Unavailable
from app.model import JSON, FinalStatus, Lead, Lease, RenewItem

log = logging.getLogger("leaseq.worker")

DEFAULT_TTL_S = 60.0
DEFAULT_WAIT_S = 10.0
DEFAULT_GRACE_S = 10.0
CANCEL_WAIT_S = 5.0  # how long a cancelled handler gets to stop before it is abandoned
IDLE_POLL_S = 1.0  # an empty lease is not repeated sooner than this
RETRY_BASE_S = 1.0
MAX_RETRY_DELAY_S = 300.0
MAX_ERROR_CHARS = 8000

# Why a handler was stopped. The first two mean the lease is gone: nothing is sent.
LOST = "lease lost"
EXPIRED = "lease not renewed in time"
MAX_RUNTIME = "max runtime exceeded"
SHUTDOWN = "worker shutting down"


def default_owner() -> str:
    """``hostname-pid``: the name a worker leases under unless told otherwise."""
    return f"{os.uname().nodename}-{os.getpid()}"


def default_retry_delay(attempt: int, base_s: float = RETRY_BASE_S) -> float:
    """Seconds before failed attempt n is retried: base · 2^(n-1), at most 300, jittered."""
    delay = min(MAX_RETRY_DELAY_S, base_s * 2.0 ** max(attempt - 1, 0))
    return delay * random.uniform(0.75, 1.0)


@dataclass(frozen=True, slots=True)
class Cached:
    """Return ``Cached(result)`` from a handler to finish the lead as ``cached``."""

    result: JSON = None


class HandlerCancelled(Exception):
    """The handler was told to stop: lease lost, maximum runtime, or the worker stopping."""


class CancelToken:
    """Set when a handler must stop. Safe to read from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: str | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: str) -> None:
        if self.reason is None:
            self.reason = reason
        self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking early when cancelled; True if cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``HandlerCancelled`` once the handler must stop."""
        if self._event.is_set():
            raise HandlerCancelled(self.reason or "cancelled")


@dataclass(frozen=True, slots=True)
class Job:
    """What a handler gets: the lease (lead, attempt) and the token that says stop."""

    lease: Lease
    cancel_token: CancelToken = field(default_factory=CancelToken)

    @property
    def lead(self) -> Lead:
        return self.lease.lead

    @property
    def id(self) -> int:
        return self.lease.lead.id

    @property
    def session(self) -> str:
        return self.lease.lead.session

    @property
    def payload(self) -> dict[str, JSON]:
        return self.lease.lead.payload

    @property
    def attempt(self) -> int:
        return self.lease.attempt

    @property
    def cancelled(self) -> bool:
        return self.cancel_token.cancelled


Handler = Callable[[Job], Any]


@dataclass(slots=True)
class WorkerStats:
    """What one worker did so far."""

    leased: int = 0
    done: int = 0
    cached: int = 0
    failed: int = 0  # completed as failed (attempts used up)
    errors: int = 0  # handler attempts that failed: exception, exit status, max runtime
    released: int = 0  # for a retry after an error, or at shutdown
    lost: int = 0  # leases lost while held: the handler was cancelled, nothing sent
    in_flight: int = 0
    started: float = field(default_factory=time.monotonic)

    @property
    def finished(self) -> int:
        return self.done + self.cached + self.failed

    def rate(self) -> float:
        """Leads finished per second since the start."""
        elapsed = time.monotonic() - self.started
        return self.finished / elapsed if elapsed > 0 else 0.0


@dataclass(eq=False, slots=True)
class _Held:
    """A lease in flight in this worker."""

    job: Job
    valid_until: float  # monotonic instant before which the lease is surely still valid
    started: float
    interrupted: asyncio.Event = field(default_factory=asyncio.Event)
    reason: str | None = None
    settling: bool = False  # the handler is over; complete or release is being sent

    @property
    def lease(self) -> Lease:
        return self.job.lease

    @property
    def lost(self) -> bool:
        return self.reason in (LOST, EXPIRED)

    def interrupt(self, reason: str) -> None:
        """Stop the handler; losing the lease overrides any earlier reason."""
        if self.reason is None or reason in (LOST, EXPIRED):
            self.reason = reason
        self.job.cancel_token.cancel(reason)
        self.interrupted.set()


@dataclass(frozen=True, slots=True)
class _Outcome:
    kind: str  # done | cached | error | lost | shutdown
    result: JSON = None
    error: str | None = None


def _is_async(handler: Handler) -> bool:
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (an object with async __call__)
    )


def _describe(exc: BaseException) -> str:
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.replace("\x00", "")[:MAX_ERROR_CHARS]


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
        self.stats = WorkerStats()
        self.heartbeat_s = ttl_s / 3
        # A renew is sent before the database stamps its expiry, so "sent + ttl"
        # is never later than the real expiry; the margin covers the cancel itself.
        self._margin = min(1.0, ttl_s * 0.1)
        self._is_async = _is_async(handler)
        self._held: dict[str, _Held] = {}  # by lease token: a lead may come back
        self._runners: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self._stop_event = asyncio.Event()
        self._stopping_at: float | None = None

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
        for held in list(self._held.values()):
            held.interrupt(SHUTDOWN)

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
        self.stats.started = time.monotonic()
        heartbeat = asyncio.create_task(self._heartbeat(), name="leaseq-heartbeat")
        try:
            await self._lease_loop()
            await self._drain()
        finally:
            if self._runners:  # the lease loop raised: give back what is held, at once
                self._stopping_at = -math.inf
                for held in list(self._held.values()):
                    held.interrupt(SHUTDOWN)
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
                self._start(lease, received)
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

    def _start(self, lease: Lease, received: float) -> None:
        self.stats.leased += 1
        metrics.LEASED.inc()
        job = Job(lease)
        held = _Held(job, valid_until=received + self.ttl_s - self._margin, started=received)
        if self.stopping:  # leased while stopping: give it straight back
            held.interrupt(SHUTDOWN)
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
            for held in list(self._held.values()):
                held.interrupt(SHUTDOWN)
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

    async def _renew_all(self) -> None:
        held = [h for h in self._held.values() if not h.lost]
        if not held:
            return
        sent = time.monotonic()
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
                h.valid_until = max(h.valid_until, sent + self.ttl_s - self._margin)
            elif not h.settling:
                h.interrupt(LOST)

    # -- one lead ----------------------------------------------------------

    async def _hold(self, held: _Held) -> None:
        lead_id = held.lease.lead.id
        try:
            outcome = await self._execute(held)
            held.settling = True
            metrics.HANDLER_SECONDS.observe(time.monotonic() - held.started)
            await self._settle(held, outcome)
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

    async def _execute(self, held: _Held) -> _Outcome:
        """Run the handler until it ends, the lease is lost, max runtime or shutdown."""
        if held.reason is None:
            work = self._launch(held.job)
            deadline = held.started + (self.max_runtime_s or math.inf)
            interrupted = asyncio.ensure_future(held.interrupted.wait())
            try:
                while not work.done() and held.reason is None:
                    now = time.monotonic()
                    if now >= held.valid_until:
                        held.interrupt(EXPIRED)
                    elif now >= deadline:
                        held.interrupt(MAX_RUNTIME)
                    else:
                        timeout = min(held.valid_until, deadline) - now
                        await asyncio.wait(
                            {work, interrupted},
                            timeout=timeout,
                            return_when=asyncio.FIRST_COMPLETED,
                        )
            finally:
                interrupted.cancel()
            finished_first = work.done()  # before any cancel: a result it chose to return
            if not finished_first:
                await self._stop_handler(held, work)
            if held.lost:
                return _Outcome("lost")
            if finished_first and not work.cancelled():
                exc = work.exception()
                if exc is None:
                    value = work.result()
                    if isinstance(value, Cached):
                        return _Outcome("cached", value.result)
                    return _Outcome("done", value)
                if held.reason is None:
                    return _Outcome("error", error=_describe(exc))
        if held.lost:
            return _Outcome("lost")
        if held.reason == MAX_RUNTIME:
            return _Outcome("error", error=f"{MAX_RUNTIME} ({self.max_runtime_s:g}s)")
        return _Outcome("shutdown")

    async def _stop_handler(self, held: _Held, work: asyncio.Future[Any]) -> None:
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

    async def _settle(self, held: _Held, outcome: _Outcome) -> None:
        """Send what the outcome calls for; never anything for a lost lease."""
        lease = held.lease
        lead_id = lease.lead.id
        if outcome.kind == "lost":
            self._lost(held, held.reason or LOST)
            return
        if outcome.kind == "shutdown":
            if await self._send(held, lambda: self.client.release(lead_id, lease.token, 0.0)):
                self.stats.released += 1
                metrics.RELEASED.labels("shutdown").inc()
                log.info("lead %d: released (shutdown)", lead_id)
            return
        if outcome.kind in ("done", "cached"):
            status: FinalStatus = "cached" if outcome.kind == "cached" else "done"
            try:
                json.dumps(outcome.result, allow_nan=False)
            except (TypeError, ValueError) as exc:
                outcome = _Outcome("error", error=f"the result is not JSON: {_describe(exc)}")
            else:
                try:
                    result = outcome.result
                    sent = await self._send(
                        held, lambda: self.client.complete(lead_id, lease.token, status, result)
                    )
                except (InvalidInput, PayloadTooLarge) as exc:
                    outcome = _Outcome("error", error=f"the result was refused: {exc.detail}")
                else:
                    if sent:
                        self._finished(status)
                    return
        await self._fail(held, outcome.error or "failed")

    async def _fail(self, held: _Held, error: str) -> None:
        """Retry later while attempts remain, else complete as failed."""
        lease = held.lease
        lead_id = lease.lead.id
        self.stats.errors += 1
        metrics.FAILED.inc()
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
                metrics.RELEASED.labels("retry").inc()
            return
        log.warning("lead %d failed after %d attempts: %s", lead_id, lease.attempt, error)
        fail = lambda: self.client.complete(lead_id, lease.token, "failed", None, error)  # noqa: E731
        if await self._send(held, fail):
            self._finished("failed")

    async def _send(self, held: _Held, call: Callable[[], Awaitable[Any]]) -> bool:
        """Send a complete or release; retried while the lease is surely valid. False if lost."""
        retry = 0
        while True:
            try:
                await call()
                return True
            except LeaseLost:
                self._lost(held, LOST)
                return False
            except Unavailable as exc:
                delay = self.client.retry_policy.delay(retry)
                if time.monotonic() + delay >= held.valid_until:
                    self._lost(held, f"service unreachable until the lease ran out ({exc.detail})")
                    return False
                await asyncio.sleep(delay)
                retry += 1

    def _finished(self, status: FinalStatus) -> None:
        setattr(self.stats, status, getattr(self.stats, status) + 1)
        metrics.COMPLETED.labels(status).inc()

    def _lost(self, held: _Held, why: str) -> None:
        self.stats.lost += 1
        metrics.LOST.inc()
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


# -- handlers ----------------------------------------------------------------


class CommandFailed(Exception):
    """The command exited with a non-zero status."""


class Command:
    """A handler that runs ``argv`` once per lead.

    The payload goes as JSON on stdin; ``LEASEQ_LEAD_ID``, ``LEASEQ_ATTEMPT``
    and ``LEASEQ_SESSION`` are in its environment. Exit 0 → done, with stdout
    parsed as JSON (or ``{"output": text}``; nothing → null). Non-zero → the
    failure path, with the tail of stderr as the error. Cancelled (lease lost,
    max runtime, shutdown) → its process group gets SIGTERM, then SIGKILL
    after ``kill_timeout_s``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        kill_timeout_s: float = 2.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not argv:
            raise ValueError("a command is needed")
        self.argv = list(argv)
        self.kill_timeout_s = kill_timeout_s
        self.env = dict(os.environ if env is None else env)

    async def __call__(self, job: Job) -> JSON:
        env = {
            **self.env,
            "LEASEQ_LEAD_ID": str(job.id),
            "LEASEQ_ATTEMPT": str(job.attempt),
            "LEASEQ_SESSION": job.session,
        }
        process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, killed as one
        )
        try:
            stdout, stderr = await process.communicate(json.dumps(job.payload).encode())
        except BaseException:
            await self._kill(process)
            raise
        if process.returncode != 0:
            status = process.returncode
            how = (
                f"killed by signal {-status}"
                if status is not None and status < 0
                else f"exit status {status}"
            )
            tail = stderr.decode(errors="replace").strip()[-2000:]
            raise CommandFailed(f"{how}: {tail}" if tail else how)
        if stderr:
            log.debug("lead %d stderr: %s", job.id, stderr.decode(errors="replace")[-2000:])
        return parse_output(stdout)

    async def _kill(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM to the process group, SIGKILL if it is still there after ``kill_timeout_s``."""
        for signum, patience in ((signal.SIGTERM, self.kill_timeout_s), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signum)
            try:
                async with asyncio.timeout(patience):
                    await process.wait()
            except TimeoutError:
                continue
            if signum == signal.SIGTERM:  # the leader is gone; make sure its group is too
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            return


def parse_output(stdout: bytes) -> JSON:
    """A command's stdout as a result: JSON if it parses, else ``{"output": text}``; empty: None."""
    text = stdout.decode(errors="replace").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"output": text}


def load_handler(spec: str) -> Handler:
    """The callable named by ``module:function`` (the current folder is importable)."""
    module_name, sep, name = spec.partition(":")
    if not sep or not module_name or not name:
        raise ValueError(f"expected module:function, got {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    target: Any = importlib.import_module(module_name)
    for part in name.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise ValueError(f"{spec} is not callable")
    handler: Handler = target
    return handler
