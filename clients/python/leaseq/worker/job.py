"""What a handler gets and gives back: the ``Job``, its ``CancelToken``, and ``Cached``.

A handler is any callable (async or not) taking a ``Job``. It returns the
lead's result, or ``Cached(result)`` to finish the lead as ``cached``; it
raises to fail the attempt (``HandlerUnusable`` when it can run nothing at
all). When the worker must stop it (``StopReason``), an async handler is
cancelled as a task and a sync one is told through its ``CancelToken``,
which it polls; it has ``Job.kill_grace_s`` to end.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

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


@dataclass(frozen=True, slots=True)
class Job:
    """What a handler gets: the lease (lead, attempt) and the token that says stop.

    ``kill_grace_s``: once told to stop, how long the handler has to end
    before it is killed (a command's tree) or abandoned (a function).
    """

    lease: Lease
    cancel_token: CancelToken = field(default_factory=CancelToken)
    kill_grace_s: float = 2.0

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
