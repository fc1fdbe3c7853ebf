"""The signal to scale on (docs/beyond.md#a-signal-to-scale-on): leads finished recently, per
session, for a throughput to size the workers by. The counts and the oldest available age
are the stats' (``reads``).

Both read the finished leads of the window only, through ``leads_terminal_updated`` (a
range of ``updated_at`` over finished leads): their cost follows the throughput of the last
window, never the backlog.
"""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import statement
from app.store.statements.fragments import NOW, in_list, plus_seconds
from leaseq.model import FINAL_STATUSES

_RECENT = f"""status IN {in_list(FINAL_STATUSES)}
  AND updated_at > {plus_seconds(NOW, "-%(window_s)s::float8")}"""


def _completions() -> str:
    return f"""
SELECT count(*)::bigint AS n FROM leads
WHERE session = %(session)s AND {_RECENT}
"""


@statement(_completions)
def completions(*, session: str, window_s: float, now: datetime | None) -> None:
    """How many of a session's leads finished (done, failed or cached) in the last
    ``window_s`` seconds of the database clock."""


def _completions_all() -> str:
    return f"""
SELECT session, count(*)::bigint AS n FROM leads
WHERE {_RECENT}
GROUP BY session
"""


@statement(_completions_all)
def completions_all(*, window_s: float, now: datetime | None) -> None:
    """How many leads of each session finished in the last ``window_s`` seconds (sessions
    with none are left out)."""
