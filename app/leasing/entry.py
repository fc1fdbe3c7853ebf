"""``Leasing.lease``: the one way in to a lease, for every door.

``POST /lease``, a completion's ``next`` (``/complete``, ``/complete/batch``)
and Python callers all come here with a checked ``LeaseRequest``. A single
completion with ``next`` of one session comes as ``complete_and_lease``: one
statement completes and leases when the session has no limits. A request
naming one session is that session's lease (``app.leasing.session``); one
naming several, or none (any), is the fleet's choice among them
(``app.leasing.fleet``); with ``wait_s`` either is held by the long poll
(``app.leasing.long_poll``) until work arrives.

Knows nothing of HTTP.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from datetime import datetime

from app.domain.queue import Queue
from app.leasing import long_poll
from app.leasing.fleet import Fleet
from app.leasing.request import LeaseRequest
from app.leasing.session import SessionLeases
from app.store.listener import Listener
from leaseq.errors import Unauthorized
from leaseq.model import CompleteItem, Lead, Lease

TokenLive = Callable[[str], Awaitable[bool]]


class Leasing:
    """This process's leasing over ``queue``: one session's leases, the fleet, the long poll.

    ``listen`` hands it the process's listener; until then a request does not wait.
    """

    def __init__(
        self,
        queue: Queue,
        *,
        clock: Callable[[], float] = time.monotonic,
        fair_by: str = "count",
    ) -> None:
        self.queue = queue
        self.sessions = SessionLeases(queue)
        self.fleet = Fleet(self.sessions, clock=clock, fair_by=fair_by)
        self.listener: Listener | None = None
        # Whether a scoped token is still live (``Tokens.live``), asked by a long poll whose
        # wake-up took nothing; None (no tokens): never asked.
        self.token_live: TokenLive | None = None

    def listen(self, listener: Listener) -> None:
        """Wait on ``listener``'s wake-ups; it tells the fleet of every session with work."""
        self.listener = listener
        listener.on_work = self.fleet.work_arrived

    async def lease(
        self,
        request: LeaseRequest,
        *,
        gone: Callable[[], Awaitable[bool]] | None = None,
        now: datetime | None = None,
    ) -> list[Lease]:
        """The leases ``request`` takes; [] when none is available (by the end of its wait).

        ``gone()`` says the caller hung up (asked after an attempt that took something,
        waiting or not, and at each wake-up of a long poll); ``now`` replaces the
        database clock (tests). Raises Unavailable in an outage or beyond ``max_waiters``.
        """
        one = request.session
        if one is None:

            async def take() -> list[Lease]:
                return await self.fleet.lease(request, now)
        else:

            async def take() -> list[Lease]:
                return (await self.sessions.lease(one, request, now)).leases

        return await long_poll.held(
            take, request, self.queue, self.listener, gone, self._revoked(request)
        )

    def _revoked(self, request: LeaseRequest) -> Callable[[], Awaitable[None]] | None:
        """What a long poll of a scoped token runs at a wake-up that took nothing: raise
        Unauthorized (401) once the token is revoked or expired. Its lease statements took
        nothing for it already (they read the token themselves); this says why."""
        key, live = request.api_token, self.token_live
        if key is None or live is None:
            return None

        async def check() -> None:
            if not await live(key):
                raise Unauthorized("the token was revoked or expired while the request waited")

        return check

    async def complete_and_lease(
        self,
        item: CompleteItem,
        request: LeaseRequest,
        *,
        gone: Callable[[], Awaitable[bool]] | None = None,
        now: datetime | None = None,
    ) -> tuple[Lead, list[Lease]]:
        """Complete ``item``, then take the leases ``request`` asks for (a completion's
        ``next``): the lead completed, and the leases.

        One statement for a request of one session without limits
        (``SessionLeases.complete_and_lease``); otherwise, or when that statement changed
        nothing, the completion (``Queue.complete``) and then ``lease``, a keyed request's
        key checked first (``refuse_reused_key``). A lease that took nothing and may wait
        goes on waiting in ``lease``. Raises LeaseLost (and leases nothing), InvalidInput
        (and completes nothing)."""
        one = request.session
        if one is not None:
            [result] = self.queue.checked_completions([item], batch=False)
            done = await self.sessions.complete_and_lease(one, request, item, result, now)
            if done is not None:
                lead, leased = done
                if leased is not None and leased.leases and gone is not None and await gone():
                    await long_poll.given_back(self.queue, leased.leases)  # nobody to take them
                    return lead, []
                if leased is not None and (leased.leases or request.wait_s == 0):
                    return lead, leased.leases
                return lead, await self.lease(request, gone=gone, now=now)
        await self.refuse_reused_key(request)
        lead = await self.queue.complete(
            item.lead_id, item.token, item.status, item.result, item.error, now=now
        )
        return lead, await self.lease(request, gone=gone, now=now)

    async def refuse_reused_key(self, request: LeaseRequest) -> None:
        """Raise InvalidInput when ``request``'s key was used for another request: a
        completion with ``next`` checks it before it completes in two steps, so its 422
        changes nothing (``SessionLeases.refuse_reused_key``)."""
        await self.sessions.refuse_reused_key(request)

    async def lease_next(
        self,
        session: str,
        owner: str,
        *,
        max: int = 1,
        ttl_s: float | None = None,
        idempotency_key: str | None = None,
        now: datetime | None = None,
    ) -> list[Lease]:
        """``lease`` of one session, not waiting, for a Python caller (the CLI, benchmarks,
        tests): up to ``max`` leads, highest priority then oldest. Raises InvalidInput."""
        request = LeaseRequest.checked(
            owner, session=session, max=max, ttl_s=ttl_s, idempotency_key=idempotency_key
        )
        return await self.lease(request, now=now)
