"""Running the handler of one lead: until it ends, its lease may end, its time is up or the
worker stops; and what came of it (an ``Ended`` with its ``Outcome``).

It never runs a lead it no longer holds (docs/contract.md#invariant-8): a lease whose
answer came late runs only once a renewal confirms it, and the handler is
stopped at the lease's ``stop_at`` unless a renewal came first. An async
handler is cancelled as a task; a sync handler runs on a thread of the
worker's (``HandlerThreads``: one per lead running, reused; with the caller's
context variables) and is told through the ``CancelToken`` of its ``Job``,
which it polls; a command's whole process tree is killed
(``leaseq.worker.command``). Either runs in the span of its lead's trace context, where
OpenTelemetry is installed (``leaseq.worker.tracing``). A handler that does not stop within its kill
grace is abandoned: its outcome says so, and nothing is sent for it.

Sends nothing: ``settling`` does, from the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from leaseq.model import JSON
from leaseq.worker.core import WorkerCore
from leaseq.worker.held import Held
from leaseq.worker.job import Cached, HandlerUnusable, Job, StopReason, Throttled
from leaseq.worker.tracing import handler_span

log = logging.getLogger("leaseq.worker")


class Outcome(StrEnum):
    """How a handler's run ended, and so what the worker sends."""

    DONE = "done"  # complete as done
    CACHED = "cached"  # complete as cached
    ERROR = "error"  # release for a retry, or complete as failed on the last attempt
    LOST = "lost"  # the lease is gone: send nothing
    SHUTDOWN = "shutdown"  # release for another worker
    ABANDONED = "abandoned"  # the handler would not stop: send nothing, let the lease expire
    UNUSABLE = "unusable"  # the handler can run nothing: release, and stop the worker
    THROTTLED = "throttled"  # release with throttle_s: the session pauses, no attempt used


@dataclass(frozen=True, slots=True)
class Ended:
    """A handler's outcome, with its result or error."""

    outcome: Outcome
    result: JSON = None
    error: str | None = None
    throttle_s: float | None = None


def describe(exc: BaseException) -> str:
    """An exception as the error an attempt records (without NUL: PostgreSQL text has none)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.replace("\x00", "")


class Execution(WorkerCore):
    """Runs the handler of each lead held (the module docstring)."""

    def _launch(self, job: Job) -> asyncio.Future[Any]:
        """Start the handler: a task if it is async, else on a thread of the worker's."""
        if self._is_async:
            return asyncio.ensure_future(self._traced(job))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        context = contextvars.copy_context()

        def traced() -> Any:
            with handler_span(job):
                return self.handler(job)

        def target() -> Callable[[], None]:
            try:
                result = context.run(traced)
            except BaseException as exc:
                error = exc  # the name ``exc`` is gone once the except clause ends
                return lambda: _deliver(loop, future, None, error)
            return lambda: _deliver(loop, future, result, None)

        if self._threads is None:
            self._threads = HandlerThreads()
        self._threads.run(target)
        future.add_done_callback(_consume)
        return future

    async def _traced(self, job: Job) -> Any:
        """An async handler's run, in the span of its lead's trace context (``tracing``)."""
        with handler_span(job):
            return await self.handler(job)

    async def _until(self, held: Held, deadline: float, work: asyncio.Future[Any] | None) -> None:
        """Sleep until ``deadline`` (the worker's clock), the lease is interrupted or confirmed,
        or ``work`` is done: one future and one timer, whatever wakes it."""
        loop = asyncio.get_running_loop()
        woken: asyncio.Future[None] = loop.create_future()

        def wake(_: object = None) -> None:
            if not woken.done():
                woken.set_result(None)

        held.wake = wake
        timer = loop.call_later(max(0.0, deadline - self.clock()), wake)
        if work is not None:
            work.add_done_callback(wake)
        try:
            await woken
        finally:
            timer.cancel()
            held.wake = None
            if work is not None:
                work.remove_done_callback(wake)

    async def _confirmed(self, held: Held) -> bool:
        """Wait until the lease is confirmed (it is at once, but after a late answer)."""
        while not held.confirmed.is_set() and held.reason is None:
            if self.clock() >= held.unconfirmed_until:
                held.interrupt(StopReason.EXPIRED)
                break
            await self._until(held, held.unconfirmed_until, None)
        return held.confirmed.is_set()

    async def _take_slot(self, held: Held) -> bool:
        """Wait for a handler slot, in the order the leads were confirmed; False when the lead
        must not run (interrupted, or its lease may end before a renewal is confirmed).

        A lead prefetched waits here, held and renewed like any other lead, so that
        it starts the moment a handler ends, not a round trip later.
        """
        while held.reason is None:
            if self._running < self.concurrency and (not self._waiting or self._waiting[0] is held):
                if held.queued:
                    self._waiting.popleft()
                    held.queued = False
                held.slot = True
                self._running += 1
                self._grant()  # another slot may be free for the next in line
                return True
            if not held.queued:
                held.queued = True
                self._waiting.append(held)
            await self._until(held, held.stop_at, None)
            reason = held.due(self.clock(), None)
            if reason is not None:
                held.interrupt(reason)
        if held.queued:
            held.queued = False
            self._waiting.remove(held)
            self._grant()
        return False

    def _free_slot(self, held: Held) -> None:
        """``held``'s handler is over: its slot goes to the first lead waiting."""
        if held.slot:
            held.slot = False
            self._running -= 1
            self._grant()

    def _grant(self) -> None:
        """Wake the first lead waiting when a handler slot is free (it takes the slot)."""
        if self._running < self.concurrency and self._waiting:
            first = self._waiting[0]
            if first.wake is not None:
                first.wake()

    async def _execute(self, held: Held) -> Ended:
        """Run the handler until it ends, the lease may end, max runtime or shutdown."""
        confirmed = held.confirmed.is_set() or await self._confirmed(held)
        if confirmed and held.reason is None and await self._take_slot(held):
            held.started = self.clock()
            held.launched = True
            work = self._launch(held.job)
            while not work.done() and held.reason is None:
                reason = held.due(self.clock(), self.max_runtime_s)
                if reason is not None:
                    held.interrupt(reason)
                    continue
                await self._until(held, held.deadline(self.max_runtime_s), work)
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
                if isinstance(exc, Throttled):
                    return Ended(Outcome.THROTTLED, error=str(exc), throttle_s=exc.retry_after)
                if exc is None:
                    value = work.result()
                    if isinstance(value, Cached):
                        return Ended(Outcome.CACHED, value.result)
                    return Ended(Outcome.DONE, value)
                if held.reason is None:
                    return Ended(Outcome.ERROR, error=describe(exc))
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


Work = Callable[[], Callable[[], None]]  # runs a handler; gives what hands its answer over


class HandlerThreads:
    """The threads sync handlers run on: one per lead running, kept for the next lead.

    As many as leads run at once (a handler abandoned because it would not stop
    keeps its thread; the next lead gets another), never a new one per lead.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Work | None]] = []

    def run(self, target: Work) -> None:
        """Run ``target`` on an idle thread (or a new one); what it returns is called once the
        thread is idle again, so the next lead finds it free."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(
                target=self._serve, args=(inbox,), name="leaseq-handler", daemon=True
            ).start()
        inbox.put(target)

    def _serve(self, inbox: queue.SimpleQueue[Work | None]) -> None:
        while (target := inbox.get()) is not None:
            then = target()
            with self._lock:
                self._idle.append(inbox)
            then()

    def shutdown(self) -> None:
        """End the idle threads; a busy one ends after its handler."""
        with self._lock:
            idle, self._idle = self._idle, []
        for inbox in idle:
            inbox.put(None)


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
