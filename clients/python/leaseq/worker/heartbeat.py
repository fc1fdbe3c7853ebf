"""The heartbeat: every lease in flight renewed on its schedule, those due together in one call.

Each lease's time is kept on the worker's own clock from the instants its
requests were sent (``Held``, in ``leaseq.worker.held``): renewals go in one
``/renew/batch`` call for the leases due, a third of the ttl after the last
confirmed one was sent, retried soon after a failure, each call's timeout
what is left before the first of its leases must stop, never retried by the
client itself (a retry is the next tick). A renewal answered lost stops the
handler at once. A checkpoint the handler set (``job.checkpoint``) rides on
its lease's next renewal. ``check_deadlines`` stops each handler whose lease
may end before a renewal can be confirmed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import re

from leaseq._wire import NO_RETRY
from leaseq.errors import InvalidInput, LeaseqError, first_line
from leaseq.limits import MAX_ITEM_BATCH
from leaseq.model import JSON, RenewItem
from leaseq.worker.core import MIN_CALL_TIMEOUT_S, WorkerCore, naming
from leaseq.worker.held import Held
from leaseq.worker.job import StopReason

log = logging.getLogger("leaseq.worker")

LOG_EVERY_S = 5.0  # a failing heartbeat says so at most this often
_CHECKPOINT_FIELD = re.compile(r"items\[(\d+)\]\.checkpoint")


class Heartbeat(WorkerCore):
    """Renews the leases in flight (the module docstring)."""

    async def _heartbeat(self) -> None:
        """Renew each lease on its schedule, those due together in one batch call."""
        failing_since: float | None = None
        last_said = -math.inf
        while True:
            now = self.clock()
            live = [h for h in self._held.values() if not h.lost and not h.abandoned]
            next_at = min((h.renew_at for h in live), default=math.inf)
            if next_at > now:
                self._heartbeat_at = next_at
                await self._wait_schedule(next_at - now)
                self._heartbeat_at = -math.inf  # awake: it looks at every lease before it sleeps
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
                        naming(self.client.url, why),
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
