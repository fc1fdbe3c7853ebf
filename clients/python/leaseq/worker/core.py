"""What every part of a worker shares: its options, its state, and how it is told to stop.

``Worker`` (``loop``) is made of parts that each own one concept and read
this state: leasing (``leasing``), renewing (``heartbeat``), running the
handler (``execution``) and sending what its end calls for (``settling``).
They are mixins of one object rather than objects of their own because they
share its clock, its leases in flight and its stop, all of which change
while they run; this class names that state once, with its types.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import math
import os
import random
import time
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from leaseq._client import AsyncClient
from leaseq.limits import MAX_TTL_S, MAX_WAIT_S, MIN_TTL_S
from leaseq.model import Lease
from leaseq.worker.held import Held, check_kill_grace
from leaseq.worker.job import Handler, StopReason
from leaseq.worker.metrics import Metrics
from leaseq.worker.stats import Clock, WorkerStats

if TYPE_CHECKING:
    from leaseq.worker.completing import Completion
    from leaseq.worker.execution import HandlerThreads

log = logging.getLogger("leaseq.worker")

DEFAULT_WAIT_S = 2.0
DEFAULT_GRACE_S = 10.0
# The lease a worker asks for when given no ttl: short, since its heartbeat renews every
# third of it anyway, so a worker killed outright (SIGKILL, the OOM killer, a lost host)
# strands its leads for seconds, not for the service's default (docs/worker.md#lease-length).
DEFAULT_WORKER_TTL_S = 30.0


def worker_ttl(ttl_s: float | None, kill_grace_s: float | None) -> float:
    """The ttl a worker asks for: ``ttl_s``, else ``DEFAULT_WORKER_TTL_S``, made long enough
    for a ``kill_grace_s`` given (it must leave half the ttl for renewals)."""
    if ttl_s is not None:
        return ttl_s
    if kill_grace_s is None:
        return DEFAULT_WORKER_TTL_S
    return min(MAX_TTL_S, max(DEFAULT_WORKER_TTL_S, 2 * kill_grace_s + 2))


DEFAULT_GIVE_UP_S = 60.0
MAX_SECONDS = 366 * 24 * 3600.0  # any duration beyond a year is a typo
RETRY_BASE_S = 1.0
MAX_RETRY_DELAY_S = 300.0
MIN_CALL_TIMEOUT_S = 0.05  # the shortest timeout a renewal or a last checkpoint is sent with


def default_prefetch(concurrency: int) -> int:
    """Leads held beyond those running: 1, and a quarter of the concurrency above 4.

    Enough that the next lead is there when a handler ends (so a worker of one slot
    is not a round trip in turn per lead), few enough that a lead seldom waits in a
    worker while another worker idles.
    """
    return concurrency // 4 if concurrency > 4 else 1


def default_owner() -> str:
    """``hostname-pid``: the name a worker leases under unless told otherwise."""
    return f"{os.uname().nodename}-{os.getpid()}"


def default_retry_delay(attempt: int, base_s: float = RETRY_BASE_S) -> float:
    """Seconds before failed attempt n is retried: base · 2^(n-1), at most 300, jittered."""
    delay = min(MAX_RETRY_DELAY_S, base_s * 2.0 ** max(attempt - 1, 0))
    return delay * random.uniform(0.75, 1.0)


def check_seconds(name: str, value: float | None, *, low: float, high: float) -> None:
    """Refuse a duration outside [low, high] (NaN and infinities too). Raises ValueError."""
    if value is not None and not (math.isfinite(value) and low <= value <= high):
        raise ValueError(f"{name} must be from {_seconds(low)} to {_seconds(high)}")


def _seconds(value: float) -> str:
    days, rest = divmod(value, 86400)
    return f"{days:g} days" if days and not rest else f"{value:g}s"


def naming(url: str, detail: str) -> str:
    """A failure's detail, with the service's URL unless it names it already."""
    return detail if url in detail else f"{url}: {detail}"


def is_async(handler: Handler) -> bool:
    """An async function, or an object whose ``__call__`` is one: run as a task, not a thread."""
    return inspect.iscoroutinefunction(handler) or inspect.iscoroutinefunction(
        getattr(handler, "__call__", None)  # noqa: B004 (an object with async __call__)
    )


class WorkerCore:
    """A worker's options and state (see ``Worker`` for the options), and its stop."""

    def __init__(
        self,
        client: AsyncClient,
        session: str | Sequence[str] | None,
        handler: Handler,
        *,
        owner: str | None = None,
        concurrency: int = 1,
        ttl_s: float | None = None,
        wait_s: float = DEFAULT_WAIT_S,
        max_runtime_s: float | None = None,
        grace_s: float = DEFAULT_GRACE_S,
        kill_grace_s: float | None = None,
        forever: bool = False,
        give_up_s: float | None = DEFAULT_GIVE_UP_S,
        retry_delay: Callable[[int], float] = default_retry_delay,
        metrics: Metrics | None = None,
        clock: Clock = time.monotonic,
        lease_on_complete: bool = True,
        prefetch: int | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        if prefetch is not None and prefetch < 0:
            raise ValueError("prefetch must not be negative")
        check_seconds("ttl_s", ttl_s, low=MIN_TTL_S, high=MAX_TTL_S)
        check_seconds("wait_s", wait_s, low=0, high=MAX_WAIT_S)
        check_seconds("max_runtime_s", max_runtime_s, low=0.001, high=MAX_SECONDS)
        check_seconds("grace_s", grace_s, low=0, high=MAX_SECONDS)
        check_seconds("kill_grace_s", kill_grace_s, low=0, high=MAX_SECONDS)
        check_seconds("give_up_s", give_up_s, low=0.001, high=MAX_SECONDS)
        if ttl_s is not None and kill_grace_s is not None:
            check_kill_grace(ttl_s, kill_grace_s)
        if not isinstance(session, str | None) and not session:
            raise ValueError("give a session, several, or None for any session")
        self.client = client
        self.session = session if isinstance(session, str | None) else tuple(session)
        self.handler = handler
        self.owner = owner or default_owner()
        self.concurrency = concurrency
        self.prefetch = default_prefetch(concurrency) if prefetch is None else prefetch
        self.ttl_s = worker_ttl(ttl_s, kill_grace_s)
        self.wait_s = wait_s
        self.max_runtime_s = max_runtime_s
        self.grace_s = grace_s
        self.kill_grace_s = kill_grace_s
        self.forever = forever
        self.give_up_s = None if forever else give_up_s
        self.retry_delay = retry_delay
        self.lease_on_complete = lease_on_complete
        self.release_unstarted = True  # False once the service refuses ``unstarted``
        self.metrics = metrics or Metrics()
        self.clock = clock
        self.stats = WorkerStats(clock=clock)
        self._is_async = is_async(handler)
        self._held: dict[str, Held] = {}  # by lease token: a lead may come back
        self._runners: set[asyncio.Task[None]] = set()
        self._slot_freed = asyncio.Event()
        self._reserved = 0  # slots a lease call in flight may fill (a long poll, a ``next``)
        self._running = 0  # handler slots given (at most ``concurrency``)
        self._waiting: deque[Held] = deque()  # confirmed leads waiting for a handler slot
        self._pending: list[Completion] = []  # completions not sent yet (``completing``)
        self._completing = 0  # completion requests in flight
        self._completers: set[asyncio.Task[None]] = set()  # their tasks, kept till they end
        self._sending = 0  # completions in those requests: their slots free as they answer
        self._stop_event = asyncio.Event()
        self._schedule = asyncio.Event()  # wakes the heartbeat: a renewal due sooner, a new clock
        self._heartbeat_at = math.inf  # when the heartbeat wakes by itself (worker's clock)
        self._threads: HandlerThreads | None = None  # where sync handlers run, once one does
        self._stopping_at: float | None = None  # time.monotonic(); -inf: no grace left
        self._fatal: BaseException | None = None  # ends the run once the leads in flight end
        self._clamped = False

    @property
    def capacity(self) -> int:
        """The most leads held at once: the handler slots and the prefetch."""
        return self.concurrency + self.prefetch

    # -- control -----------------------------------------------------------

    @property
    def stopping(self) -> bool:
        return self._stopping_at is not None

    def stop(self) -> None:
        """Stop leasing; leads in flight get ``grace_s``, then are released. Twice: no grace."""
        if self._stopping_at is None:
            self._stopping_at = time.monotonic()
            self._stop_event.set()
            for held in list(self._held.values()):  # prefetched, not running: back at once
                if not held.slot and not held.settling:
                    held.interrupt(StopReason.SHUTDOWN)
            log.info(
                "stopping: no new leases; %d in flight get %.1fs", len(self._held), self.grace_s
            )
            return
        log.info("stopping now: releasing %d leads in flight", len(self._held))
        self._stopping_at = -math.inf
        self._interrupt_all(StopReason.SHUTDOWN)

    def _end(self, error: BaseException) -> None:
        """End the run with ``error``: no grace, and no retries of what is still sent."""
        self._fatal = error
        self._stopping_at = -math.inf
        self._stop_event.set()
        self._interrupt_all(StopReason.SHUTDOWN)

    def _interrupt_all(self, reason: StopReason) -> None:
        for held in list(self._held.values()):
            held.interrupt(reason)

    def _grace_left(self) -> float:
        if self._stopping_at is None:
            return self.grace_s
        return max(0.0, self._stopping_at + self.grace_s - time.monotonic())

    async def _sleep(self, seconds: float) -> None:
        """Sleep, waking early when the worker is told to stop."""
        if seconds > 0 and not self.stopping:
            try:
                async with asyncio.timeout(seconds):
                    await self._stop_event.wait()
            except TimeoutError:
                pass

    # The parts call each other through these (``Worker``'s method resolution finds the parts').

    def _start(self, lease: Lease, *, sent: float, received: float) -> None:
        """Hold a lease and run its handler (``leasing``)."""
        raise NotImplementedError

    async def _hold(self, held: Held) -> None:
        """One lead's life: executed, then settled (``loop``)."""
        raise NotImplementedError
