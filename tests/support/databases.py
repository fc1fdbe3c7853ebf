"""Dropping a test's database, however busy it still is.

``DROP DATABASE … WITH (FORCE)`` ends the sessions it finds and then fails if one is
still there: a session that connected in between (a service's pool or listener that
reconnects at once after a test killed its connections, or Citus's maintenance daemon,
which the postmaster restarts in that database) makes the drop fail with ``ObjectInUse``
and a passing test error at teardown. So the drop is tried again until it succeeds; its
deadline is its only failure, and that failure names the sessions that stayed.
"""

from __future__ import annotations

import time

import psycopg
from psycopg import errors

DROP_DEADLINE_S = 60.0
DROP_INTERVAL_S = 0.2


def drop_database(conn: psycopg.Connection, name: str) -> None:
    """``name`` gone (or never there), through ``conn``: an autocommit connection to
    another database of the same server."""
    deadline = time.monotonic() + DROP_DEADLINE_S
    while True:
        try:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            return
        except errors.ObjectInUse:
            if time.monotonic() > deadline:
                left = conn.execute(
                    "SELECT pid, backend_type, application_name, state, query "
                    "FROM pg_stat_activity WHERE datname = %s",
                    [name],
                ).fetchall()
                raise AssertionError(
                    f"{name} still in use after {DROP_DEADLINE_S} s: {left}"
                ) from None
            time.sleep(DROP_INTERVAL_S)
