"""One lead and its ledger: what the dashboard's page for a lead shows.

The lead as it is now (payload, result, error, checkpoint, its lease, the leads it waits
on), the leads that wait on it (``dependents``, docs/contract.md#dependencies) and its
``lead_events`` rows in the order they were written: pushed, each lease (with
its attempt and owner), its release, expiry (swept; ``expires_at`` is the expiry
the sweeper found, so the last renewal's), completion, an operator's cancel or
retry, each at the database clock's time. Renewals write no event: the lead's
``lease_expires_at`` is the current one. Both are read in one read-only
snapshot, so the timeline never shows a step the lead has not reached, nor
misses one it has.

A lead's events are bounded by its attempts and retries; the newest
``MAX_EVENTS`` are listed, and ``earlier_events`` says how many came before
them. With the ledger off (``Settings.ledger``) there are none. Part of the
domain, as the report is. Knows nothing of HTTP.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from app.domain import validation
from app.domain.queue import Queue
from app.store import statements as sql
from app.store.pool import Connection, Row, execute
from leaseq.errors import NotFound
from leaseq.model import Lead

MAX_EVENTS = 1000


@dataclass(frozen=True, slots=True)
class Event:
    """One ledger row: what happened (``event``), the status it left, the attempt and the
    owner it concerned, when (``at``); for a lease the expiry granted, for an expiry the
    one the sweeper found."""

    id: int
    event: str
    status: str
    attempt: int
    owner: str | None
    at: datetime
    expires_at: datetime | None


@dataclass(frozen=True, slots=True)
class Timeline:
    lead: Lead
    events: list[Event]
    earlier_events: int = 0
    dependents: list[int] = field(default_factory=list)  # the leads that wait on it


async def timeline(queue: Queue, lead_id: int) -> Timeline:
    """A lead and its newest events, oldest first. Raises InvalidInput, NotFound."""
    validation.lead_id(lead_id)
    routing = await queue.session_of(lead_id)  # on a cluster: its session's shard alone

    async def read(conn: Connection) -> tuple[list[Row], list[Row], list[Row]]:
        async with conn.transaction():
            await execute(conn, sql.one_snapshot())
            one = sql.get(lead_id=lead_id, routed=routing is not None, session=routing)
            leads = await execute(conn, one)
            if not leads:
                return leads, [], []
            session = leads[0]["session"]
            events = sql.lead_events(session=session, lead_id=lead_id, limit=MAX_EVENTS)
            waiting = sql.dependents(session=session, lead_id=lead_id)
            return leads, await execute(conn, events), await execute(conn, waiting)

    leads, rows, dependents = await queue.db.run(read)
    if not leads:
        raise NotFound(f"no lead {lead_id}")
    events = [Event(**{name: row[name] for name in Event.__slots__}) for row in rows]
    total = int(rows[0]["total"]) if rows else 0
    lead = Lead(**{name: leads[0][name] for name in Lead.__slots__})
    waiting_on_it = [row["lead_id"] for row in dependents]
    return Timeline(lead, events, earlier_events=total - len(events), dependents=waiting_on_it)
