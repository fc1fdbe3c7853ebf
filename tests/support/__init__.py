"""What more than one test tier uses; here, the queue tests' clock and readers of the raw tables.

The modules beside it: ``serving`` (``leaseq serve`` as processes), ``in_process`` (the
app served in-process), ``worker_support`` and ``handle_lead`` (workers and their
handlers), ``proxy`` and ``lossy_proxy`` (connections cut or answers lost),
``http_wire`` (raw HTTP on a socket), ``browser`` and ``system`` (Chromium, PgBouncer, Citus:
found, or the test skips), ``schema_catalog`` and ``fixtures/`` (the
migrations' catalog snapshots).
"""

from __future__ import annotations

import weakref
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from app.domain import idempotency
from app.domain.queue import Queue
from app.leasing import session as one_session
from app.leasing.entry import Leasing
from app.leasing.request import LeaseRequest
from app.leasing.session import Leased
from app.store import pool, statements
from app.store.pool import Database
from leaseq.model import NewLead

# Every test moves this clock by hand (the ``now=`` of each Queue method).
T0 = datetime(2030, 1, 1, 12, 0, tzinfo=UTC)
TICK = timedelta(microseconds=1)  # the database clock's resolution


def at(seconds: float) -> datetime:
    """T0 plus ``seconds``."""
    return T0 + timedelta(seconds=seconds)


def leads(n: int, **fields: Any) -> list[NewLead]:
    """``n`` leads with payload {"i": 0..n-1}."""
    return [NewLead({"i": i}, **fields) for i in range(n)]


async def fetch(db: Database, query: str, **params: Any) -> list[dict[str, Any]]:
    """Rows of a raw SQL statement (``%(name)s`` placeholders); [] when it returns none."""
    return await db.rows(query, params)


async def events(db: Database, lead_id: int | None = None) -> list[dict[str, Any]]:
    """The lead_events ledger (of one lead, or all), in the order written."""
    where = "" if lead_id is None else "WHERE lead_id = %(lead_id)s"
    return await fetch(
        db,
        "SELECT lead_id, session, event, status, attempt, owner, at, expires_at "
        f"FROM lead_events {where} ORDER BY id",
        lead_id=lead_id,
    )


async def event_names(db: Database, lead_id: int) -> list[str]:
    return [row["event"] for row in await events(db, lead_id)]


async def row(db: Database, lead_id: int) -> dict[str, Any]:
    """The raw leads row, lease_token included."""
    [found] = await fetch(db, "SELECT * FROM leads WHERE id = %(id)s", id=lead_id)
    return found


# Ways to make one session's lease statement fail on its own rows, written in SQL (bypassing
# the API), as rows of an older version or an operator's hand could: every update of its
# settings row raises what an underflow in the bucket's arithmetic raised (SQLSTATE 22003),
# or its lead's attempt counter is at the end of its integer (the next lease overflows it).
UNSERVABLE = {
    "settings": """
CREATE OR REPLACE FUNCTION unservable() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'value out of range: underflow' USING ERRCODE = 'numeric_value_out_of_range';
END $$;
CREATE TRIGGER "unservable {session}" BEFORE UPDATE ON session_settings FOR EACH ROW
WHEN (OLD.session = '{session}') EXECUTE FUNCTION unservable();
""",
    "lead": "UPDATE leads SET attempts = 2147483647 WHERE session = '{session}'",
}
# The database's connection lost in the middle of one session's lease (an outage, not that
# session's rows): its backend ends itself as the lease updates a lead of that session.
CONNECTION_LOST = """
CREATE OR REPLACE FUNCTION connection_lost() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_terminate_backend(pg_backend_pid());
    RETURN NEW;
END $$;
CREATE TRIGGER "connection lost {session}" BEFORE UPDATE ON leads FOR EACH ROW
WHEN (OLD.session = '{session}') EXECUTE FUNCTION connection_lost();
"""


def unservable(how: str, session: str) -> str:
    """The SQL that makes ``session``'s lease fail (``UNSERVABLE[how]``); a test's own name."""
    return UNSERVABLE[how].format(session=session)


_leasing: weakref.WeakKeyDictionary[Queue, Leasing] = weakref.WeakKeyDictionary()


def leasing_of(queue: Queue) -> Leasing:
    """The leasing over ``queue``, one per queue as one process has (its groups, its hints)."""
    if queue not in _leasing:
        _leasing[queue] = Leasing(queue)
    return _leasing[queue]


async def lease_from(
    queue: Queue,
    session: str,
    owner: str,
    *,
    max: int = 1,
    ttl_s: float | None = None,
    now: datetime | None = None,
) -> Leased:
    """One session's lease over ``queue``, saying what held the session back."""
    request = LeaseRequest.checked(owner, session=session, max=max, ttl_s=ttl_s)
    return await leasing_of(queue).sessions.lease(session, request, now)


def across(sessions: Collection[str] | None, owner: str, **options: Any) -> LeaseRequest:
    """A lease request across ``sessions`` (None: any session)."""
    return LeaseRequest.checked(owner, sessions=sessions, **options)


def statements_run(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the statements the queue and leasing run from here on, in order (each
    still runs): what a test of round trips counts."""
    names: list[str] = []
    real = pool.execute

    async def spying(conn: Any, query: Any, params: Any = None) -> Any:
        names.append(query.name if isinstance(query, statements.Statement) else "text")
        return await real(conn, query, params)

    for module in (pool, one_session, idempotency):
        monkeypatch.setattr(module, "execute", spying)
    return names
