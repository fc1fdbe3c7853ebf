"""Settling a lead: what the handler's outcome calls for, sent, and never anything for a lost
or abandoned lease.

- it returned a value → ``complete(done, value)``; ``Cached(value)`` → ``cached``;
- it raised, or ran past ``max_runtime_s`` → ``release`` with a backoff delay
  while attempts remain (``attempt < max_attempts``), else ``complete(failed)``;
- it raised ``Throttled`` (or a command exited with the throttle exit code) →
  ``release`` with ``throttle_s``: its session pauses, the attempt is not used up;
- it raised ``HandlerUnusable`` (its program cannot start) → ``release``, and
  the worker stops leasing and ends with that error;
- it did not stop within its kill grace when told to → nothing is sent: the
  lease is left to expire (it may still run), and the worker says so;
- the worker is stopping → the lead is released for another worker.

Completions go together with those finishing close to them, in one request
that asks for the next leads (``completing``, docs/contract.md#complete-and-lease), so a
busy worker sends one request per batch of leads. A checkpoint no renewal carried yet
rides on one more renewal before the lead is given back, so the next holder
resumes from it. A complete or release is retried while the lease is surely
valid: both are safe to repeat.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from leaseq.errors import (
    InvalidInput,
    LeaseLost,
    LeaseqError,
    PayloadTooLarge,
    Unavailable,
    first_line,
)
from leaseq.limits import MAX_ERROR_CHARS
from leaseq.model import FinalStatus
from leaseq.worker.completing import Completing
from leaseq.worker.core import MIN_CALL_TIMEOUT_S, naming
from leaseq.worker.execution import Ended, Outcome, describe
from leaseq.worker.held import Held
from leaseq.worker.job import HandlerUnusable, StopReason

log = logging.getLogger("leaseq.worker")


def _error_text(error: str) -> str:
    """An attempt's error as the service takes it: at most MAX_ERROR_CHARS."""
    return error[:MAX_ERROR_CHARS]


class Settling(Completing):
    """Sends what each lead's outcome calls for (the module docstring)."""

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
        if ended.outcome is Outcome.THROTTLED:
            await self._throttle(held, ended.throttle_s or 1.0)
            return
        if ended.outcome is Outcome.SHUTDOWN:
            await self._carry_checkpoint(held)
            if await self._send(held, self._shutdown_release(held)):
                self.stats.released += 1
                self.metrics.released("shutdown")
                log.info("lead %d: released (shutdown)", lead_id)
            return
        if ended.outcome in (Outcome.DONE, Outcome.CACHED):
            status: FinalStatus = "cached" if ended.outcome is Outcome.CACHED else "done"
            try:
                json.dumps(ended.result, allow_nan=False)
            except (TypeError, ValueError) as exc:
                ended = Ended(Outcome.ERROR, error=f"the result is not JSON: {describe(exc)}")
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

    def _shutdown_release(self, held: Held) -> Callable[[], Awaitable[Any]]:
        """The release of a lead at a shutdown. One whose handler never started (prefetched)
        says so, and its lease spends no attempt: a stop cannot fail a lead that never ran.
        A service that does not know ``unstarted`` gets the plain release."""
        lease = held.lease
        error = StopReason.SHUTDOWN.value

        async def release() -> None:
            if held.launched or not self.release_unstarted:
                await self.client.release(lease.lead.id, lease.token, 0.0, error=error)
                return
            try:
                await self.client.release(
                    lease.lead.id, lease.token, 0.0, error=error, unstarted=True
                )
            except InvalidInput as exc:
                if exc.field not in ("body.unstarted", "unstarted"):
                    raise
                log.warning("the service counts every release as an attempt (%s)", exc)
                self.release_unstarted = False
                await self.client.release(lease.lead.id, lease.token, 0.0, error=error)

        return release

    async def _throttle(self, held: Held, throttle_s: float) -> None:
        """Give the lead back as a throttle: its session pauses for ``throttle_s``."""
        lease = held.lease
        log.warning("lead %d: throttled, its session pauses for %gs", lease.lead.id, throttle_s)
        await self._carry_checkpoint(held)
        release = lambda: self.client.release(  # noqa: E731
            lease.lead.id, lease.token, 0.0, error="throttled", throttle_s=throttle_s
        )
        if await self._send(held, release):
            self.stats.released += 1
            self.metrics.released("throttle")

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
                    why = naming(self.client.url, exc.detail)
                    self._lost(held, f"service unreachable until the lease ran out ({why})")
                    return False
                await asyncio.sleep(delay)
                retry += 1
