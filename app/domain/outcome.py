"""Waiting for a lead's outcome: ``GET /leads/{id}?wait_s=n`` held until the lead is terminal.

A waiting request holds no database connection: it registers with the
listener (``app.store.listener.Listener.waiting_for``), writes a watch and
then reads the lead (``app.store.statements.outcomes``: the watch makes a statement
that ends the lead send a NOTIFY at all), and sleeps until the
notification naming it wakes it, or ``poll_interval_s`` passes (a
notification may be lost: behind a pooler without a direct URL, in the instant a
watch is written; a dependent failed by its parent on a Citus cluster sends none),
then reads it again. The first look after the read is ``SETTLE_S`` later, for
a statement that ended the lead while its watch was being written (it read the
watches before the watch committed, so it sent no NOTIFY, and committed after
the read): the looks of the waits that began together go in one read. The
watches of the waits that begin (or end) while one such statement runs go
together in the next (``app.store.group_commit``), so 500 requests that begin
waiting at once cost a few statements, not 500.

The waiter is registered before the first read, so a completion that commits
after that read wakes it; one that committed before is what the read finds.
The lead as it is when the wait ends is the answer, terminal or not. Shutdown
ends the wait at once; so does ``gone()`` turning true (the client hung up).
Beyond ``max_outcome_waiters`` a request whose lead has not ended gets
Unavailable.

Knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import uuid
from collections.abc import Awaitable, Callable, Sequence

from app.domain import validation
from app.domain.queue import Queue, lead_of
from app.store import statements
from app.store.group_commit import Grouper
from app.store.listener import Listener
from app.store.pool import Connection, Row, execute
from leaseq.errors import LeaseqError, NotFound, Unavailable
from leaseq.limits import MAX_WAIT_S
from leaseq.model import FINAL_STATUSES, Lead

Gone = Callable[[], Awaitable[bool]]
# Watches one statement writes or deletes at most; the others go in the next.
MAX_WATCH_GROUP = 1000
# When a watched lead was not terminal at the first read, a second look this long after:
# a statement that ended it but had read the watches before the watch committed (so sent
# no NOTIFY) has committed by then, unless it took longer than that (then the poll).
SETTLE_S = 0.2

# One wait to write: the waiter's id, the lead's, and its seconds.
_Watch = tuple[str, int, float]


class Outcomes:
    """The waits for outcomes of one API process, over its queue and its listener."""

    def __init__(self, queue: Queue, listener: Listener | None) -> None:
        self.queue = queue
        self.listener = listener
        self._watches: Grouper[None, _Watch, Lead | None] = Grouper(
            self._watch, max_size=MAX_WATCH_GROUP
        )
        self._unwatches: Grouper[None, str, None] = Grouper(self._unwatch, max_size=MAX_WATCH_GROUP)
        self._looks: Grouper[None, int, Lead | None] = Grouper(self._look, max_size=MAX_WATCH_GROUP)

    async def outcome(self, lead_id: int, wait_s: float = 0.0, *, gone: Gone | None = None) -> Lead:
        """The lead once it is terminal, or as it is when ``wait_s`` ends. Raises NotFound,
        InvalidInput (a bad ``wait_s``) or Unavailable."""
        validation.lead_id(lead_id)
        wait = validation.seconds("wait_s", wait_s, low=0, high=MAX_WAIT_S)
        listener = self.listener
        if wait <= 0 or listener is None or listener.closed:
            return await self.queue.get(lead_id)
        if listener.outcome_waiters >= listener.max_outcome_waiters:
            lead = await self.queue.get(lead_id)
            if lead.status in FINAL_STATUSES:
                return lead
            raise Unavailable("too many requests waiting for outcomes; try again shortly")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait
        waiter_id = str(uuid.uuid4())
        async with listener.waiting_for(lead_id) as waiter:
            # Without a LISTEN of our own a notification would reach nobody: no watch then.
            watched = listener.listens
            found: Lead | None = None
            if watched:
                try:
                    found = await self._watches.submit(None, (waiter_id, lead_id, wait))
                except Unavailable:
                    if not self.queue.sharded:
                        raise
                    # A watch is a row of every node (a reference table): with one node out
                    # of reach, the wait goes on at the poll, as long as its lead's is not.
                    watched = False
            if not watched:
                found = await self.queue.get(lead_id)
            try:
                if found is None:
                    raise NotFound(f"no lead {lead_id}")
                lead = found
                settling = watched
                while True:
                    remaining = deadline - loop.time()
                    if lead.status in FINAL_STATUSES or remaining <= 0 or listener.closed:
                        return lead
                    poll = listener.poll_interval_s * random.uniform(0.8, 1.2)
                    await waiter.wait(min(remaining, SETTLE_S if settling else poll))
                    if gone is not None and await gone():
                        return lead
                    try:
                        if settling:
                            lead = await self._looks.submit(None, lead_id) or lead
                        else:
                            lead = await self.queue.get(lead_id)
                    except Unavailable:
                        if loop.time() >= deadline:
                            raise
                    settling = False
            finally:
                if watched:
                    with contextlib.suppress(LeaseqError):
                        await self._unwatches.submit(None, waiter_id)

    async def _watch(self, key: None, watches: Sequence[_Watch]) -> list[Lead | None]:
        lead_ids = [watch[1] for watch in watches]
        watch = statements.watch(
            ids=[watch[0] for watch in watches],
            lead_ids=lead_ids,
            waits=[watch[2] for watch in watches],
        )

        if (await self.queue.db.know_topology()).sharded:
            await self.queue.db.rows(watch)  # committed (autocommit) before the reads
            return await self._each_routed(lead_ids)

        async def write_then_read(conn: Connection) -> list[Row]:
            await execute(conn, watch)  # committed (autocommit) before
            return await execute(conn, statements.watched(lead_ids=lead_ids))

        return _in_order(await self.queue.db.run(write_then_read), lead_ids)

    async def _look(self, key: None, lead_ids: Sequence[int]) -> list[Lead | None]:
        """The settling looks of the waits that began together, in one read."""
        if (await self.queue.db.know_topology()).sharded:
            return await self._each_routed(lead_ids)
        return _in_order(
            await self.queue.db.rows(statements.watched(lead_ids=list(lead_ids))), lead_ids
        )

    async def _each_routed(self, lead_ids: Sequence[int]) -> list[Lead | None]:
        """The watched leads on a cluster, one per id (None: no such lead): each read by
        ``Queue.get``, routed to its session's shard once the nodes told where it is (the
        lookups that arrive together share one ask); ``watched``, by ids alone, would reach
        every shard, and fail for every lead while any node is stopped."""

        async def one(lead_id: int) -> Lead | None:
            try:
                return await self.queue.get(lead_id)
            except NotFound:
                return None

        return list(await asyncio.gather(*(one(lead_id) for lead_id in lead_ids)))

    async def _unwatch(self, key: None, ids: Sequence[str]) -> list[None]:
        await self.queue.db.rows(statements.unwatch(ids=list(ids)))
        return [None] * len(ids)


def _in_order(rows: Sequence[Row], lead_ids: Sequence[int]) -> list[Lead | None]:
    """The leads ``statements.watched`` read, one per id of ``lead_ids`` (None: no such lead)."""
    by_id = {row["id"]: lead_of(row) for row in rows}
    return [by_id.get(lead_id) for lead_id in lead_ids]
