"""A lease in flight in a worker, and its time: until when it is surely valid, renewals, the stop.

All of it on the worker's own monotonic clock, from the instants the worker
*sent* its requests and the ``ttl_s`` the service granted; the service's
``expires_at`` (its database's clock) is never compared with it:

* a lease (or renewal) sent at S with ttl T is surely valid until S + T: the
  service started it after S (``valid_until``);
* the handler is told to stop at ``stop_at`` = valid_until - (kill grace +
  margin): a command's process tree gets SIGTERM then and SIGKILL a kill
  grace later, so the last of it is gone a margin before the lease can have
  ended;
* renewals follow a fixed schedule: a third of the ttl after the send time
  of the last confirmed one (``renew_at``), however long its answer took;
  after a failure, again after a short backoff (``renew_failed``);
* a lease whose answer came later than its first renewal is due (a long poll
  that waited, a slow service) may be older than the send time can tell: it
  is renewed at once, and nothing runs before that renewal is confirmed
  (``confirmed``); unconfirmed once surely over (received + ttl), it is lost.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable
from dataclasses import dataclass, field

from leaseq.model import Lease
from leaseq.worker.job import Job, StopReason

DEFAULT_KILL_GRACE_S = 2.0
MAX_MARGIN_S = 1.0
RENEW_RETRY_FIRST_S = 0.1
RENEW_RETRY_MAX_S = 2.0


def safety_margin(ttl_s: float) -> float:
    """What the stop must finish ahead of the lease's end by: signals, a late timer (≤ 1 s)."""
    return min(MAX_MARGIN_S, ttl_s * 0.1)


def kill_grace(ttl_s: float, asked: float | None = None) -> float:
    """The kill grace for a lease of ``ttl_s``: ``asked``, or 2 s (a tenth of a short ttl).

    Never more than leaves half the ttl before the stop: renewals, sent every
    third of it, then have a sixth of the ttl to come back and be retried.
    """
    room = max(0.0, ttl_s / 2 - safety_margin(ttl_s))
    wanted = min(DEFAULT_KILL_GRACE_S, ttl_s / 10) if asked is None else asked
    return min(wanted, room)


def check_kill_grace(ttl_s: float, kill_grace_s: float) -> None:
    """Refuse a kill grace that leaves the lease less than half its ttl. Raises ValueError."""
    if kill_grace_s > kill_grace(ttl_s, kill_grace_s):
        longest = kill_grace(ttl_s, math.inf)
        raise ValueError(
            f"a kill grace of {kill_grace_s:g}s is too long for a ttl of {ttl_s:g}s: "
            f"at most {longest:g}s (the stop must leave half the ttl for renewals)"
        )


def renew_backoff(failures: int, ttl_s: float) -> float:
    """Seconds before a failed renewal is tried again: 0.1 s doubling, at most ttl/20 (≤ 2 s)."""
    cap = max(RENEW_RETRY_FIRST_S, min(RENEW_RETRY_MAX_S, ttl_s / 20))
    return float(min(cap, RENEW_RETRY_FIRST_S * 2 ** max(failures - 1, 0)))


@dataclass(eq=False, slots=True)
class Held:
    """A lease in flight, on the worker's clock (see the module docstring)."""

    job: Job
    ttl_s: float
    valid_until: float
    started: float  # when the answer came, then when the handler started (max runtime)
    renew_at: float
    renew_failures: int = 0
    confirmed: asyncio.Event = field(default_factory=asyncio.Event)  # the handler may run
    # Called when the lease is interrupted or confirmed: wakes whatever waits on the lead.
    wake: Callable[[], None] | None = None
    reason: StopReason | None = None
    slot: bool = False  # a handler slot is given to it (else it is prefetched, waiting)
    launched: bool = False  # its handler was started (else it is given back unstarted)
    queued: bool = False  # in the worker's queue of leads waiting for a handler slot
    settling: bool = False  # the handler is over; complete or release is being sent
    abandoned: bool = False  # the handler did not stop when told: left to its lease's expiry

    @classmethod
    def leased(cls, job: Job, *, sent: float, ttl_s: float, received: float) -> Held:
        """A lease asked for at ``sent``, granted ``ttl_s``, its answer received at ``received``."""
        held = cls(job, ttl_s, sent + ttl_s, received, renew_at=sent + ttl_s / 3)
        if received < held.renew_at:
            held.confirmed.set()  # fresh: its first renewal is still ahead
        return held

    @property
    def unconfirmed_until(self) -> float:
        """An unconfirmed lease has surely ended by then: its answer's receipt plus the ttl."""
        return self.started + self.ttl_s

    @property
    def lease(self) -> Lease:
        return self.job.lease

    @property
    def margin(self) -> float:
        return safety_margin(self.ttl_s)

    @property
    def stop_at(self) -> float:
        """When the handler must be told to stop, unless a renewal is confirmed before."""
        return self.valid_until - self.job.kill_grace_s - self.margin

    @property
    def lost(self) -> bool:
        return self.reason is not None and self.reason.lease_gone

    def interrupt(self, reason: StopReason) -> None:
        """Stop the handler; losing the lease overrides any earlier reason."""
        if self.reason is None or reason.lease_gone:
            self.reason = reason
        self.job.cancel_token.cancel(reason)
        if self.wake is not None:
            self.wake()

    def renewed(self, sent: float, ttl_s: float) -> None:
        """A renewal sent at ``sent`` was confirmed: valid for its ttl from then (never less)."""
        self.ttl_s = ttl_s
        self.valid_until = max(self.valid_until, sent + ttl_s)
        self.renew_at = max(self.renew_at, sent + ttl_s / 3)
        self.renew_failures = 0
        if not self.confirmed.is_set():
            self.confirmed.set()
            if self.wake is not None:
                self.wake()

    def renew_failed(self, now: float) -> None:
        """A renewal was not confirmed: try again soon."""
        self.renew_failures += 1
        self.renew_at = now + renew_backoff(self.renew_failures, self.ttl_s)

    def needed_by(self) -> float:
        """Until when a renewal's answer is of use: the stop; settling, the lease's end;
        unconfirmed, until it has surely ended."""
        if not self.confirmed.is_set():
            return self.unconfirmed_until
        return self.valid_until if self.settling else self.stop_at

    def deadline(self, max_runtime_s: float | None) -> float:
        """When the handler must stop at the latest."""
        return min(self.stop_at, self.started + (max_runtime_s or math.inf))

    def due(self, now: float, max_runtime_s: float | None) -> StopReason | None:
        """Why the handler must stop at ``now``: the lease may end soon, or its time is up."""
        if not self.confirmed.is_set():
            return StopReason.EXPIRED if now >= self.unconfirmed_until else None
        if now >= self.stop_at:
            return StopReason.EXPIRED
        if max_runtime_s is not None and now >= self.started + max_runtime_s:
            return StopReason.MAX_RUNTIME
        return None
