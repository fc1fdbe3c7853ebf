"""What a worker did so far (``WorkerStats``), on the clock the worker is given."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime

Clock = Callable[[], float]  # monotonic seconds; tests inject their own


@dataclass(slots=True)
class WorkerStats:
    """What one worker did so far. ``started`` is when it started (UTC, wall clock)."""

    leased: int = 0
    done: int = 0
    cached: int = 0
    failed: int = 0  # completed as failed (attempts used up)
    errors: int = 0  # handler attempts that failed: exception, exit status, max runtime
    released: int = 0  # for a retry after an error, at shutdown, or unusable
    lost: int = 0  # leases lost while held: the handler was stopped, nothing sent
    abandoned: int = 0  # handlers that did not stop when told: their leases left to expire
    in_flight: int = 0
    started: datetime = field(default_factory=lambda: datetime.now(UTC))
    busy_s: float = 0.0  # time with at least one lead in flight (clock seconds)
    clock: Clock = field(default=time.monotonic, repr=False, compare=False)
    busy_since: float | None = field(default=None, repr=False, compare=False)

    @property
    def finished(self) -> int:
        return self.done + self.cached + self.failed

    def holding(self, in_flight: int) -> None:
        """The leads in flight are now ``in_flight``; busy time runs while there are any."""
        now = self.clock()
        if in_flight and self.busy_since is None:
            self.busy_since = now
        elif not in_flight and self.busy_since is not None:
            self.busy_s += now - self.busy_since
            self.busy_since = None
        self.in_flight = in_flight

    def busy(self) -> float:
        """Seconds with leads in flight so far: waiting for work does not count."""
        running = 0.0 if self.busy_since is None else self.clock() - self.busy_since
        return self.busy_s + running

    def rate(self) -> float:
        """Leads finished per second of busy time."""
        busy = self.busy()
        return self.finished / busy if busy > 0 else 0.0
