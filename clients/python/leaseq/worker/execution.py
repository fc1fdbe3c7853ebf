"""Running the handler of one lead: until it ends, its lease may end, its time is up or the
worker stops; and what came of it (an ``Ended`` with its ``Outcome``).

It never runs a lead it no longer holds (SPEC invariant 8): a lease whose
answer came late runs only once a renewal confirms it, and the handler is
stopped at the lease's ``stop_at`` unless a renewal came first. An async
handler is cancelled as a task; a sync handler runs in its own thread (with
the caller's context variables) and is told through the ``CancelToken`` of
its ``Job``, which it polls; a command's whole process tree is killed
(``leaseq.worker.command``). A handler that does not stop within its kill
grace is abandoned: its outcome says so, and nothing is sent for it.

Sends nothing: ``settling`` does, from the outcome.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import threading
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from leaseq.model import JSON
from leaseq.worker.core import WorkerCore
from leaseq.worker.held import Held
from leaseq.worker.job import Cached, HandlerUnusable, Job, StopReason

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


@dataclass(frozen=True, slots=True)
class Ended:
    """A handler's outcome, with its result or error."""

    outcome: Outcome
    result: JSON = None
    error: str | None = None


def describe(exc: BaseException) -> str:
    """An exception as the error an attempt records (without NUL: PostgreSQL text has none)."""
    text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    return text.replace("\x00", "")


class Execution(WorkerCore):
    """Runs the handler of each lead held (the module docstring)."""

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
