"""The long poll: a lease request with ``wait_s`` held until work arrives or the wait ends.

A waiting request holds no database connection: it registers with the
listener (``app.store.listener``) on the sessions it may lease from, sleeps
until a NOTIFY of work there wakes it (or ``poll_interval_s``: notifications
are a hint, never needed), then leases again.

The first attempt's errors propagate (an outage). A re-try after a wake-up
that finds the database unavailable keeps waiting; only the last one, at the
deadline, reports it. Shutdown ends the wait with []. When ``gone()`` turns
true (the client hung up) the wait ends too, and leases taken meanwhile are
released at once rather than left to expire, keyed or not: a client that hung
up while it waited (a worker stopping, its pending lease cancelled) would not
come back for them, and its key's retry, if any, gets the leases still valid
(none) and leases anew. Beyond ``max_waiters`` a request that would have to
wait gets Unavailable.

Knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable

from app.domain.queue import Queue
from app.leasing.request import LeaseRequest
from app.store.listener import Listener
from leaseq.errors import LeaseqError, Unavailable
from leaseq.model import Lease

Take = Callable[[], Awaitable[list[Lease]]]
Gone = Callable[[], Awaitable[bool]]


async def held(
    take: Take,
    request: LeaseRequest,
    queue: Queue,
    listener: Listener | None,
    gone: Gone | None,
    revoked: Callable[[], Awaitable[None]] | None = None,
) -> list[Lease]:
    """``take()`` (one lease attempt for ``request``), again at each wake-up until it takes
    something or ``request.wait_s`` ends; without a ``listener``, once. ``revoked()`` runs
    after a wake-up that took nothing, and raises when the request's token ended."""

    async def attempt() -> list[Lease]:
        leases = await take()
        if leases and gone is not None and await gone():
            await given_back(queue, leases)
            return []
        return leases

    if request.wait_s <= 0 or listener is None:
        return await attempt()
    if listener.waiters >= listener.max_waiters:
        leases = await attempt()
        if leases:
            return leases
    loop = asyncio.get_running_loop()
    deadline = loop.time() + request.wait_s
    async with listener.waiting(request.waits_on) as waiter:
        first = True
        while True:
            try:
                leases = await attempt()
            except Unavailable:
                if first or loop.time() >= deadline:
                    raise
                leases = []
            if not first and not leases and revoked is not None:
                await revoked()
            first = False
            remaining = deadline - loop.time()
            if leases or remaining <= 0 or listener.closed:
                return leases
            poll = listener.poll_interval_s * random.uniform(0.8, 1.2)
            await waiter.wait(min(remaining, poll))
            if listener.closed or (gone is not None and await gone()):
                return []


async def given_back(queue: Queue, leases: list[Lease]) -> None:
    """Release leases nobody will receive (their client hung up), at once."""
    for lease in leases:
        with contextlib.suppress(LeaseqError):
            await queue.release(lease.lead.id, lease.token, unstarted=True)
