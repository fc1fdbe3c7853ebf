"""Leasing across sessions: which session the next lease goes to, fair by weight.

A lease across sessions (``POST /lease`` with ``sessions``, or with neither
``session`` nor ``sessions``: any session) names no one session;
``Fleet.lease`` chooses one and leases it through one session's lease
(``app.leasing.session``): one statement, routed to that session alone, which
honours the session's cap and rate (docs/scaling.md).

The choice is virtual time per session, as Temporal's fairness keys and
SQS's fair queues schedule (start-time fair queuing): each session has a
clock; a lease of n leads advances it by n / weight; among the sessions with
work, the one whose clock is lowest goes next. A session that comes back with
work after a time without any starts at the clock of the session served last,
not at its own old value, so idle time is no credit: it gets its share from
then on, not a burst that starves the others. Two sessions with work and
equal weights get equal parts whatever their backlogs; weights 3 and 1, three
to one. A lease of ``max`` leads takes them from one session; its clock is
advanced by ``max / weight`` while the statement runs (so concurrent requests
spread out), and given back for what it did not get.

Which sessions have work is this process's view: read from the database
(``Queue.available``: the sessions with a lead that could be leased now; and
the weights of ``Queue.settings_all``) every ``REFRESH_S`` in the background
while leases go on, and at once when no session it knows of has work (at
most every ``EMPTY_REFRESH_S``).
Between reads a NOTIFY of work in a session adds it (``work_arrived``), and a
lease that takes less than it asked takes the session out. A session whose cap
or rate held a lease back is skipped until it may have room (its next token;
``CAPPED_RETRY_S`` for a cap), never waited on. A session whose lease statement
fails on its own rows (``StatementFailed``: a database error that is not an
outage) is skipped too, logged once per failure, and tried again after
``FAILED_RETRY_S``: one session's rows never fail a lease of the others. An
outage (``Unavailable``) is every session's, and goes to the caller.

**By time** (``fair_by="time"``, ``LEASEQ_FAIR_BY=time``: docs/beyond.md#fair-share-by-time)
a lease costs its session not 1 but the seconds its session's leases last, so the clocks
share the workers' time by weight instead of the number of leases (deficit round robin
over lease-seconds). The seconds are measured on the database clock, from each lease's
``leased`` event to the event that ended it, read from the ledger with the view
(``statements.lease_seconds``: the ends written since the last read) and kept per session
as a moving mean (``TIME_WEIGHT`` to the newest read). A session not measured yet costs
the mean of those that are (1 s when none is). Without the ledger nothing is measured, and
every lease costs the same: shares by count.

A scoped token's lease (``LeaseRequest.scope``) picks only among the
sessions its patterns cover, and one session's lease refuses any other
(``app.leasing.session``): the statement only ever names one of them.

All of this is per API process, and only steers: fairness, never
correctness. Every lease is the queue's guarded statement; a session the view
missed is found at its next read. Several processes each share their own
leases out by weight, so together they do too.

Knows nothing of HTTP.
"""

from __future__ import annotations

import asyncio
import logging
import math
import time
from collections.abc import Callable
from datetime import datetime

from app.domain.access import in_scope
from app.leasing.request import LeaseRequest
from app.leasing.session import Leased, SessionLeases
from app.store import statements
from app.store.pool import StatementFailed
from leaseq.errors import first_line
from leaseq.model import Lease, SessionSettings

log = logging.getLogger("leaseq.fleet")

REFRESH_S = 1.0
EMPTY_REFRESH_S = 0.1
CAPPED_RETRY_S = 0.05
FAILED_RETRY_S = 1.0  # a session whose lease statement failed is skipped this long
TRIES = 3  # sessions tried by one request before the view is read again
DEFAULT_WEIGHT = SessionSettings().weight
FAIR_BY = ("count", "time")
TIME_WEIGHT = 0.5  # a new measure of a session's lease seconds counts this much in its mean
UNMEASURED_S = 1.0  # what a lease costs when no session's leases were measured yet
MIN_LEASE_S = 0.001  # a lease costs at least this (a clock must move)
MEASURE_SPAN = 100_000  # ledger ids one read measures at most (the newest ones)


class Fleet:
    """This process's share-out of leases across sessions (see the module docstring)."""

    def __init__(
        self,
        sessions: SessionLeases,
        *,
        clock: Callable[[], float] = time.monotonic,
        fair_by: str = "count",
    ) -> None:
        if fair_by not in FAIR_BY:
            raise ValueError(f"fair_by: {fair_by!r} is not one of {FAIR_BY}")
        self.fair_by = fair_by
        self._lease_s: dict[str, float] = {}  # by time: each session's mean lease seconds
        self._measured_to: int | None = None  # the ledger id measured up to
        self.sessions = sessions
        self.queue = sessions.queue
        self._clock = clock
        self._virtual = 0.0  # the clock of the session served last
        self._clocks: dict[str, float] = {}
        self._working: set[str] = set()  # the sessions believed to have a lead available now
        self._weights: dict[str, float] = {}  # those not of the default weight
        self._settings: dict[str, SessionSettings] = {}  # every session's, as last read
        self._held_until: dict[str, float] = {}  # held back by a cap, a rate or a failure
        self._failed: dict[str, BaseException] = {}  # the last failure logged, per session
        self._read_at = -math.inf
        self._reading: asyncio.Future[None] | None = None
        self._arrived: set[str] = set()  # work notified while a read runs

    # -- the view ------------------------------------------------------------

    def work_arrived(self, session: str) -> None:
        """A NOTIFY said leads became available in ``session``."""
        self._join(session)
        self._arrived.add(session)

    def _join(self, session: str) -> None:
        """A session has work: back in the running at no less than the clock served last."""
        if session not in self._working:
            self._working.add(session)
            self._clocks[session] = max(self._clocks.get(session, self._virtual), self._virtual)

    async def read(self) -> None:
        """Read which sessions have work, and the weights; concurrent callers share one read."""
        await asyncio.shield(self._start_reading())

    def _start_reading(self) -> asyncio.Future[None]:
        if self._reading is None or self._reading.done():
            self._reading = asyncio.ensure_future(self._read())
            self._reading.add_done_callback(_retrieved)
        return self._reading

    async def close(self) -> None:
        """Stop a read of the view in the background (shutdown)."""
        if self._reading is not None and not self._reading.done():
            self._reading.cancel()
            await asyncio.gather(self._reading, return_exceptions=True)

    async def _refresh(self) -> None:
        """Keep the view at most REFRESH_S old: read in the background while this process
        knows of sessions with work (no lease waits for it), at once when it knows of none."""
        age = self._clock() - self._read_at
        if not self._working and age >= EMPTY_REFRESH_S:
            await self.read()
        elif age >= REFRESH_S:
            self._start_reading()

    async def _read(self) -> None:
        started = self._clock()
        self._arrived = set()
        available = await self.queue.available()
        settings = await self.queue.settings_all()
        self._weights = {
            name: s.weight for name, s in settings.items() if s.weight != DEFAULT_WEIGHT
        }
        # A session whose settings changed is held back no longer: its new rate or cap (or
        # the operator's repair) may let it lease now, however long its old rate said to wait.
        changed = {
            name
            for name in settings.keys() | self._settings.keys()
            if settings.get(name) != self._settings.get(name)
        }
        self._settings = settings
        if self.fair_by == "time":
            await self._measure()
        fresh = set(available) | self._arrived
        self._working &= fresh
        for session in fresh:
            self._join(session)
        # A session without work comes back at the clock served last: no need to keep its own
        # unless it is ahead of that.
        self._clocks = {
            name: at
            for name, at in self._clocks.items()
            if name in self._working or at > self._virtual
        }
        self._held_until = {
            name: t for name, t in self._held_until.items() if t > started and name not in changed
        }
        self._failed = {name: e for name, e in self._failed.items() if name in self._held_until}
        self._read_at = started

    async def _measure(self) -> None:
        """Fold the lease seconds of the leases that ended since the last read into each
        session's mean (the first read only notes where the ledger is)."""
        [head] = await self.queue.db.rows(statements.ledger_head())
        until = int(head["id"])
        if self._measured_to is not None and until > self._measured_to:
            after = max(self._measured_to, until - MEASURE_SPAN)
            ended = await self.queue.db.rows(
                statements.lease_seconds(after_id=after, head_id=until)
            )
            for row in ended:
                mean = float(row["seconds"]) / int(row["ended"])
                known = self._lease_s.get(row["session"])
                self._lease_s[row["session"]] = (
                    mean if known is None else known + TIME_WEIGHT * (mean - known)
                )
        self._measured_to = until

    def cost(self, session: str) -> float:
        """What one lease costs ``session``'s clock before its weight: 1 by count; by time,
        the seconds its leases last (the mean of the measured sessions', unmeasured)."""
        if self.fair_by != "time":
            return 1.0
        seconds = self._lease_s.get(session)
        if seconds is None:
            known = self._lease_s.values()
            seconds = sum(known) / len(known) if known else UNMEASURED_S
        return max(seconds, MIN_LEASE_S)

    # -- choosing and leasing ---------------------------------------------------

    def _pick(
        self,
        wanted: frozenset[str] | None,
        tried: set[str],
        now: float,
        scope: tuple[str, ...] | None = None,
    ) -> str | None:
        """The session with work, of those wanted (and within ``scope``, a scoped token's
        patterns) and not tried yet, whose clock is lowest."""
        pool = self._working if wanted is None else wanted & self._working
        best: str | None = None
        lowest = math.inf
        for session in pool:
            if session in tried or self._held_until.get(session, -math.inf) > now:
                continue
            if not in_scope(scope, session):
                continue
            at = self._clocks[session]
            if at < lowest:
                best, lowest = session, at
        return best

    async def lease(self, request: LeaseRequest, now: datetime | None = None) -> list[Lease]:
        """Lease up to ``request.max`` leads of one of ``request.sessions`` (None: any session),
        the one furthest below its fair share; [] when none has any available now.

        Raises Unavailable in an outage; a session whose statement fails otherwise is
        skipped (``_skip``). With an idempotency key, a retry gets the leases the first try
        took, whichever session it chooses first (the key stands for the sessions asked).
        """
        wanted = request.sessions
        await self._refresh()
        for again in (False, True):  # the view as it is; if nothing came of it, read anew
            if again:
                if self._clock() - self._read_at < EMPTY_REFRESH_S:
                    break
                await self.read()
            tried: set[str] = set()
            while len(tried) < TRIES:
                session = self._pick(wanted, tried, self._clock(), request.scope)
                if session is None:
                    break
                tried.add(session)
                try:
                    leased = await self._lease_one(session, request, now)
                except StatementFailed as exc:
                    self._skip(session, exc)
                    continue
                if leased.leases:
                    return leased.leases
        # A retry whose first try's leads are held (their sessions may show no work now, so
        # none was chosen) still gets them back.
        return await self.sessions.remembered(request, now)

    def _skip(self, session: str, exc: BaseException) -> None:
        """``session``'s lease statement failed on its own rows: skip it for FAILED_RETRY_S,
        and log the failure once (the callers of one grouped statement share its error)."""
        self._held_until[session] = self._clock() + FAILED_RETRY_S
        if self._failed.get(session) is not exc:
            self._failed[session] = exc
            log.error(
                "session %s skipped by a lease across sessions: its lease failed: %s: %s",
                session,
                type(exc).__name__,
                first_line(exc),
            )

    def _give_back(self, session: str, share: float) -> None:
        """Take back a reservation a lease did not use (unless a read forgot the session)."""
        if session in self._clocks:
            self._clocks[session] -= share

    async def _lease_one(self, session: str, request: LeaseRequest, now: datetime | None) -> Leased:
        """Lease ``session``: its clock advanced by what it took, its work and limits noted."""
        asked = request.max
        each = self.cost(session) / self._weights.get(session, DEFAULT_WEIGHT)
        start = self._clocks[session]
        self._virtual = max(self._virtual, start)
        self._clocks[session] = start + asked * each  # reserved while the statement runs
        try:
            leased = await self.sessions.lease(session, request, now)
        except BaseException:
            self._give_back(session, asked * each)
            raise
        taken = len(leased.leases)
        self._give_back(session, (asked - taken) * each)
        held_back = leased.next_token_s or (CAPPED_RETRY_S if leased.capped else None)
        if held_back is not None:
            self._held_until[session] = self._clock() + held_back
        elif taken < asked:  # it had no more
            self._working.discard(session)
        return leased


def _retrieved(reading: asyncio.Future[None]) -> None:
    """A read that failed in the background is tried again by the next lease; its error (an
    outage: Unavailable) is the next caller's to see, not a warning of an unread exception."""
    if not reading.cancelled():
        reading.exception()
