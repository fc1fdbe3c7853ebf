"""A session's throughput over time, for its page on the dashboard: its leads finished (done
or cached) and failed in each minute of the last hour, by the database clock.

One statement (``throughput``) reads the session's leads finished in the window through
``leads_terminal_updated``: its cost follows the window's throughput, never the backlog, and
it names the session, so a cluster routes it to one shard. A lead counts once, in the minute
of its last change, with its present status (a failed lead retried since leaves the count).
Knows nothing of HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import cast

from app.domain.queue import Queue
from app.store import statements as sql
from app.store.pool import Connection, Row, execute

WINDOW_MINUTES = sql.SESSION_WINDOW_MINUTES


@dataclass(frozen=True, slots=True)
class Throughput:
    """Per minute, oldest first: ``completed[-1]`` is the current minute's."""

    session: str
    now: datetime
    completed: list[int]
    failed: list[int]


async def throughput(queue: Queue, session: str) -> Throughput:
    """The session's finished and failed leads per minute over the last hour."""
    completed = [0] * WINDOW_MINUTES
    failed = [0] * WINDOW_MINUTES

    async def read(conn: Connection) -> tuple[datetime, list[Row]]:
        [clock] = await execute(conn, sql.db_now())
        now = cast(datetime, clock["now"])
        return now, await execute(conn, sql.throughput(session=session, now=now))

    now, rows = await queue.db.run(read)
    for row in rows:
        slot = WINDOW_MINUTES - 1 - int(row["ago"])
        completed[slot] += int(row["completed"])
        failed[slot] += int(row["failed"])
    return Throughput(session, now, completed, failed)
