"""What a handler gets and gives back: the ``Job``, its ``CancelToken``, and ``Cached``.

A handler is any callable (async or not) taking a ``Job``. It returns the
lead's result, or ``Cached(result)`` to finish the lead as ``cached``; it
raises to fail the attempt (``HandlerUnusable`` when it can run nothing at
all). When the worker must stop it (``StopReason``), an async handler is
cancelled as a task and a sync one is told through its ``CancelToken``,
which it polls; it has ``Job.kill_grace_s`` to end.

``job.checkpoint(value)`` says where the handler got to: the next heartbeat
carries it to the service, which stores it on the lead, so a holder after a
lost lease starts from ``job.lead.checkpoint`` instead of from scratch.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NoReturn

from leaseq.limits import MAX_THROTTLE_S
from leaseq.model import JSON, Lead, Lease


class StopReason(StrEnum):
    """Why a handler was stopped. The first two mean the lease is gone: nothing is sent."""

    LOST = "lease lost"
    EXPIRED = "lease not renewed in time"
    MAX_RUNTIME = "max runtime exceeded"
    SHUTDOWN = "worker shutting down"

    @property
    def lease_gone(self) -> bool:
        """The lease may be someone else's now: the worker sends nothing for it."""
        return self in (StopReason.LOST, StopReason.EXPIRED)


@dataclass(frozen=True, slots=True)
class Cached:
    """Return ``Cached(result)`` from a handler to finish the lead as ``cached``."""

    result: JSON = None


class Throttled(Exception):
    """Raise ``Throttled(retry_after=60)`` (or call ``job.throttle(60)``) when the upstream
    says "slow down" (a 429): the lead goes back without using up an attempt, and its whole
    session pauses for ``retry_after`` seconds, for every worker (docs/worker.md).

    ``retry_after`` is held to the service's range, 1 to 3600 seconds.
    """

    def __init__(self, retry_after: float = 60.0) -> None:
        self.retry_after = min(max(float(retry_after), 1.0), MAX_THROTTLE_S)
        super().__init__(f"throttled: pause the session for {self.retry_after:g}s")


class HandlerCancelled(Exception):
    """The handler was told to stop: lease lost, maximum runtime, or the worker stopping."""


class HandlerUnusable(Exception):
    """The handler cannot run any lead (its program cannot be started, say).

    The worker gives the lead back and stops, instead of burning one lead after
    another on the same failure.
    """


class CancelToken:
    """Set when a handler must stop. Safe to read from any thread."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self.reason: StopReason | None = None

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def cancel(self, reason: StopReason) -> None:
        if self.reason is None:
            self.reason = reason
        self._event.set()

    def wait(self, timeout: float | None = None) -> bool:
        """Sleep up to ``timeout`` seconds, waking early when cancelled; True if cancelled."""
        return self._event.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raise ``HandlerCancelled`` once the handler must stop."""
        if self._event.is_set():
            raise HandlerCancelled(self.reason or "cancelled")


class Checkpoints:
    """A handler's latest checkpoint, until a renewal carries it. Safe to use from any thread."""

    def __init__(self, saved: JSON = None) -> None:
        self._lock = threading.Lock()
        self._latest: JSON = saved
        self._version = 0  # of the latest set; 0: none set here
        self._sent = 0  # the newest version a renewal carried
        # Called before each look for an unsent checkpoint: where a command's file is read.
        self.source: Callable[[], None] | None = None

    @property
    def latest(self) -> JSON:
        """The last one set, else the one the lead came with (None: none)."""
        with self._lock:
            return self._latest

    def set(self, value: JSON) -> None:
        """Keep ``value`` for the next renewal. Raises ValueError when it is not JSON, or null."""
        if value is None:
            raise ValueError("a checkpoint cannot be null")
        try:
            json.dumps(value, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise ValueError(f"a checkpoint must be JSON: {exc}") from None
        with self._lock:
            self._latest = value
            self._version += 1

    def unsent(self) -> tuple[int, JSON] | None:
        """The latest one a renewal has not carried yet, with its version; None when none."""
        if self.source is not None:
            self.source()
        with self._lock:
            return None if self._version == self._sent else (self._version, self._latest)

    def sent(self, version: int) -> None:
        """A renewal that carried ``version`` was confirmed."""
        with self._lock:
            self._sent = max(self._sent, version)


@dataclass(frozen=True, slots=True)
class Job:
    """What a handler gets: the lease (lead, attempt) and the token that says stop.

    ``kill_grace_s``: once told to stop, how long the handler has to end
    before it is killed (a command's tree) or abandoned (a function).
    """

    lease: Lease
    cancel_token: CancelToken = field(default_factory=CancelToken)
    kill_grace_s: float = 2.0
    checkpoints: Checkpoints = field(default_factory=Checkpoints)

    @classmethod
    def of(cls, lease: Lease, *, kill_grace_s: float) -> Job:
        """The job of a lease, its checkpoints starting from the lead's."""
        return cls(lease, kill_grace_s=kill_grace_s, checkpoints=Checkpoints(lease.lead.checkpoint))

    def checkpoint(self, value: JSON) -> None:
        """Say where the work got to (any JSON but None); the next heartbeat stores it on the
        lead, for whoever holds it next. Raises ValueError when it is not JSON."""
        self.checkpoints.set(value)

    def throttle(self, retry_after: float = 60.0) -> NoReturn:
        """End this attempt as a throttle: raises ``Throttled(retry_after)``."""
        raise Throttled(retry_after)

    @property
    def saved_checkpoint(self) -> JSON:
        """Where to resume from: the last checkpoint set here, else the lead's (None: none)."""
        return self.checkpoints.latest

    @property
    def lead(self) -> Lead:
        return self.lease.lead

    @property
    def id(self) -> int:
        return self.lease.lead.id

    @property
    def session(self) -> str:
        return self.lease.lead.session

    @property
    def payload(self) -> dict[str, JSON]:
        return self.lease.lead.payload

    @property
    def attempt(self) -> int:
        return self.lease.attempt

    @property
    def cancelled(self) -> bool:
        return self.cancel_token.cancelled


Handler = Callable[[Job], Any]
