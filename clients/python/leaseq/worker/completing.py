"""Completing: completions that come close together go in one ``/complete/batch``, which leases
the next leads for the slots it frees (``next``) under one ``Idempotency-Key`` its retries repeat.

One request is in flight at a time; the completions that arrive meanwhile
wait for the next, so a batch grows with the load (up to ``MAX_ITEM_BATCH``)
and a lone completion goes at once: no timer holds one back. A lone one goes
as ``/complete`` with ``next``, which the service answers with one statement
where a batch of one costs it two. A lead's slot
is free again only once its completion is answered: ``next`` asks for the
slots the batch frees and no lease call in flight has reserved, so the worker
never holds more than its capacity. The leases it brings are timed from the
request's first send. Each item's answer goes to its own lead: a lease found
lost is that lead's loss alone, and the others of the batch are completed.

A batch refused whole (422, 413: one item's result, say) changed nothing, so
each of its items is sent again alone, and the one refused hears why. While
the service cannot be reached the batch is retried, its body and key the same,
as long as one of its leases is surely valid; then each of its leads is
counted lost, as a lone completion's would be.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from typing import Literal

from leaseq._wire import new_idempotency_key
from leaseq.errors import InvalidInput, LeaseLost, LeaseqError, PayloadTooLarge, Unavailable
from leaseq.limits import MAX_ITEM_BATCH, MAX_LEASE_BATCH
from leaseq.model import JSON, CompleteItem, FinalStatus, ItemResult, Lease, NextLease
from leaseq.worker.core import WorkerCore, naming
from leaseq.worker.held import Held

log = logging.getLogger("leaseq.worker")

MAX_IN_FLIGHT = 1  # completion requests at once: the rest wait, and go together
SPLIT: Literal["split"] = "split"  # a batch refused whole: each of its items goes again alone

Answered = tuple[list[ItemResult], list[Lease], float]


@dataclass(eq=False, slots=True)
class Completion:
    """One lead's completion, waiting for its answer: True done, False lost."""

    held: Held
    item: CompleteItem
    answer: asyncio.Future[bool] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )


class Completing(WorkerCore):
    """Sends the completions of the leads, a batch at a time (the module docstring)."""

    async def _complete(
        self, held: Held, status: FinalStatus, result: JSON, error: str | None = None
    ) -> bool:
        """Complete the lead with the others finishing now; False if its lease was lost.

        Raises InvalidInput or PayloadTooLarge when the service refused this
        completion itself (nothing changed: the lead is still held).
        """
        lease = held.lease
        completion = Completion(
            held, CompleteItem(lease.lead.id, lease.token, status, result, error)
        )
        self._pending.append(completion)
        if self._completing < MAX_IN_FLIGHT:
            self._completing += 1
            task = asyncio.create_task(self._completer(), name="leaseq-complete")
            self._completers.add(task)
            task.add_done_callback(self._completers.discard)
        return await completion.answer

    async def _completer(self) -> None:
        """Send what is pending, a batch at a time, until nothing is."""
        try:
            while self._pending:
                batch = self._pending[:MAX_ITEM_BATCH]
                del self._pending[: len(batch)]
                try:
                    await self._send_batch(batch)
                except Exception as exc:  # each waiting lead hears it, as a lone call would
                    for c in batch:
                        if not c.answer.done():
                            c.answer.set_exception(exc)
        finally:
            self._completing -= 1

    def _free_for_next(self) -> int:
        """How many leads the batch's ``next`` asks for: the slots neither held nor reserved,
        counting as free those of the completions in flight (this batch's among them)."""
        if not self.lease_on_complete or self.stopping:
            return 0
        free = self.capacity - len(self._held) - self._reserved + self._sending
        return max(0, min(free, MAX_LEASE_BATCH))

    async def _send_batch(self, batch: list[Completion]) -> None:
        """Send one batch, retried under its key while a lease of it is surely valid, and give
        each completion its answer."""
        self._sending += len(batch)
        free = self._free_for_next()
        self._reserved += free
        try:
            answered = await self._exchange(batch, free)
        finally:
            self._sending -= len(batch)
            self._reserved -= free
        if answered == SPLIT:  # refused whole, nothing changed (one item's result, say)
            await asyncio.gather(*(self._send_batch([c]) for c in batch))
            return
        if answered is None:
            return
        results, taken, sent = answered
        received = self.clock()
        for c, answer in zip(batch, results, strict=True):
            if not answer.ok:
                self._lost(c.held, f"its completion found the lease lost ({answer.code})")
            # No longer held from now on, not once its task ends: the next completion's
            # ``next`` and the lease loop count its slot free at once (with those taken).
            self._held.pop(c.held.lease.token, None)
            c.answer.set_result(answer.ok)
        for new in taken:
            self._start(new, sent=sent, received=received)
        self._slot_freed.set()

    async def _exchange(
        self, batch: list[Completion], free: int
    ) -> Answered | Literal["split"] | None:
        """The batch's request and its retries: the answers, the leases taken and the first
        send; SPLIT when each item must go alone; None when each completion was answered
        otherwise (refused, or lost)."""
        items = [c.item for c in batch]
        key = new_idempotency_key()  # the same for every retry: they get the same leases
        sent = self.clock()
        retry = 0
        while True:
            try:
                ask = NextLease(self.session, self.owner, free, self.ttl_s) if free else None
                results, taken = await self._request(items, ask, key)
            except (InvalidInput, PayloadTooLarge) as exc:
                if free and isinstance(exc, InvalidInput) and exc.field in ("body.next", "next"):
                    log.warning("the service leases nothing with a completion (%s)", exc)
                    self.lease_on_complete = False
                    free = 0  # the caller's reservation ends with the call
                    continue
                if len(batch) > 1:
                    return SPLIT
                batch[0].answer.set_exception(exc)
                return None
            except LeaseLost as exc:  # not an answer a batch gives; each lead is lost
                for c in batch:
                    self._lost(c.held, f"its completion was refused ({exc})")
                    c.answer.set_result(False)
                return None
            except Unavailable as exc:
                delay = self.client.retry_policy.delay(retry)
                unreachable = isinstance(self._fatal, Unavailable)  # the run gave up on it
                latest = max(c.held.valid_until for c in batch)
                if unreachable or self.clock() + delay >= latest:
                    why = naming(self.client.url, exc.detail)
                    for c in batch:
                        self._lost(c.held, f"service unreachable until the lease ran out ({why})")
                        c.answer.set_result(False)
                    return None
                await asyncio.sleep(delay)
                retry += 1
                continue
            if len(results) != len(batch):
                raise LeaseqError(
                    f"{self.client.url}: the batch answered {len(results)} results "
                    f"for {len(batch)} completions"
                )
            return results, taken, sent

    async def _request(
        self, items: list[CompleteItem], ask: NextLease | None, key: str
    ) -> tuple[list[ItemResult], list[Lease]]:
        """One request: a lone completion as ``/complete`` (the service completes and leases
        it in one statement, where a batch takes two), several as ``/complete/batch``."""
        if len(items) > 1:
            if ask is None:
                return await self.client.complete_many(items), []
            return await self.client.complete_many_and_lease(items, next=ask, idempotency_key=key)
        [item] = items
        try:
            if ask is None:
                await self.client.complete(
                    item.lead_id, item.token, item.status, item.result, item.error
                )
                return [ItemResult(item.lead_id, True)], []
            _, taken = await self.client.complete_and_lease(
                item.lead_id,
                item.token,
                item.status,
                item.result,
                item.error,
                next=ask,
                idempotency_key=key,
            )
        except LeaseLost as exc:
            return [ItemResult(item.lead_id, False, code=exc.code)], []
        return [ItemResult(item.lead_id, True)], taken

    def _finished(self, status: FinalStatus) -> None:
        setattr(self.stats, status, getattr(self.stats, status) + 1)
        self.metrics.completed(status)

    def _lost(self, held: Held, why: str) -> None:
        self.stats.lost += 1
        self.metrics.lost()
        log.warning("lead %d: %s; nothing sent", held.lease.lead.id, why)
