"""Helpers the queue tests share: an injected clock and readers of the raw tables."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from app.pg import Database
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
