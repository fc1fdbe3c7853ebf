"""An outage of the database, logged as a pager would want it: one line when it starts, one
every ``every_s`` seconds while it lasts (with the failed attempts since the last line), and
one when it ends (how long, how many attempts).

psycopg's pool logs each failed connection attempt itself ("error connecting in 'leaseq'",
"reconnection attempt in pool 'leaseq' failed"): during a 30 s restart that was about 130
lines a second. ``quiet_pool_attempts`` drops those two lines of its logger (``Database``
installs it); ``OutageLog`` says the same in a few. ``Database`` tells it of each failed
attempt and each connection made.

Knows nothing of HTTP and nothing of the queue.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from leaseq.errors import first_line

log = logging.getLogger("leaseq.pg")
EVERY_S = 5.0
# The lines psycopg_pool writes per failed attempt, which OutageLog sums up.
_ATTEMPT_LINES = ("error connecting in ", "reconnection attempt in pool ")


class _QuietAttempts(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith(_ATTEMPT_LINES))


_QUIET = _QuietAttempts()


def quiet_pool_attempts() -> None:
    """Drop psycopg_pool's line per failed connection attempt (idempotent)."""
    pool_log = logging.getLogger("psycopg.pool")
    if _QUIET not in pool_log.filters:
        pool_log.addFilter(_QUIET)


class OutageLog:
    """The lines of one database's outages (see the module docstring)."""

    def __init__(
        self, what: str, *, every_s: float = EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.what = what
        self.every_s = every_s
        self._clock = clock
        self._began: float | None = None  # when the outage began; None: no outage
        self._said_at = 0.0
        self._attempts = 0  # failed attempts in the outage
        self._unsaid = 0  # of those, since the last line

    @property
    def ongoing(self) -> bool:
        return self._began is not None

    def failed(self, exc: BaseException) -> None:
        """A connection attempt failed."""
        now = self._clock()
        self._attempts += 1
        self._unsaid += 1
        why = first_line(exc)
        if self._began is None:
            self._began, self._said_at, self._unsaid = now, now, 0
            log.warning("%s unreachable: %s", self.what, why)
        elif now - self._said_at >= self.every_s:
            log.warning(
                "%s still unreachable after %.0f s: %d failed connection attempts since the "
                "last line (%d in all); last: %s",
                self.what,
                now - self._began,
                self._unsaid,
                self._attempts,
                why,
            )
            self._said_at, self._unsaid = now, 0

    def connected(self) -> None:
        """A connection was made: an outage, if one was going on, is over."""
        if self._began is None:
            return
        log.warning(
            "%s reachable again after %.1f s of outage (%d failed connection attempts)",
            self.what,
            self._clock() - self._began,
            self._attempts,
        )
        self._began, self._attempts, self._unsaid = None, 0, 0
