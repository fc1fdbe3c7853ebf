"""Copying a test's database from its template, and dropping it however busy it still is.

A copy is made with ``STRATEGY FILE_COPY`` on PostgreSQL 15 and newer: their default
(``WAL_LOG``) writes every page of the template through the WAL and the shared buffers,
which then cost the drop its time too (docs/testing.md: about 0.25 s of a server's CPU a
test on the embedded PostgreSQL, where a copy of the files and its drop take a tenth).

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


def copy_database(conn: psycopg.Connection, name: str, template: str) -> None:
    """``name``, a copy of ``template``, through ``conn``: an autocommit connection to another
    database of the same server."""
    strategy = " STRATEGY FILE_COPY" if conn.info.server_version >= 150000 else ""
    conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"{strategy}')


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
