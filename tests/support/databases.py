"""Copying a test's database from its template, and dropping it however busy it still is.

On the tests' own embedded PostgreSQL, which runs without ``fsync`` (``tests/conftest.py``),
a copy is made with ``STRATEGY FILE_COPY``: the default of PostgreSQL 15 and newer
(``WAL_LOG``) writes every page of the template through the WAL and the shared buffers,
which then cost the drop its time too (0.11 s + 0.14 s a test, where a copy of the files and
its drop take 0.03 to 0.13 s + 0.01 s). A server that syncs keeps its default: there each
file copy begins with a checkpoint, which under CI's load made every test wait for one
(1,401 checkpoints, 356 s of writing, in one run; docs/testing.md).
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
    synced = conn.execute("SELECT current_setting('fsync')::bool").fetchone()
    copy_files = conn.info.server_version >= 150000 and synced == (False,)
    strategy = " STRATEGY FILE_COPY" if copy_files else ""
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
