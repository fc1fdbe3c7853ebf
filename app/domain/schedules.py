"""Schedules: a lead pushed into a session at each tick of a cron expression in a time zone.

The cron expression is read by ``cronsim`` (five fields, as cron has them;
``@daily`` and the like too) in the schedule's IANA time zone (``zoneinfo``),
so "every day at 09:00 Europe/Paris" follows daylight saving time. Ticks are
judged on the database clock, never an API process's: ``tick`` reads the due
schedules with the instant that judged them, works out the tick and the next
one from it, pushes the tick's lead keyed ``schedule:{name}:{tick}`` (the tick
in RFC 3339 UTC), which dedupes, then moves the schedule on
(``app.store.statements.schedule_push``, ``schedule_advance``), so however many
processes run ``tick`` at once, each tick pushes one lead. A schedule whose
push or advance cannot reach its node (a stopped node of a cluster) is left
for the next look, with a warning, and the others go on.

Ticks missed while no process ran: when one runs again, the latest tick not
after now is pushed, once; the older ones are not, and ``next_tick`` moves
to the first tick after now.

Every method takes ``now``: an instant that replaces the database clock, so
tests move time without waiting. Knows nothing of HTTP.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import psycopg
from cronsim import CronSim, CronSimError

from app.config import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES
from app.domain import validation
from app.store import statements
from app.store.pool import Database, Row
from leaseq.errors import InvalidInput, NotFound, Unavailable
from leaseq.limits import INT32_MAX, MAX_ATTEMPTS, SESSION_PATTERN
from leaseq.model import Schedule

log = logging.getLogger("leaseq.schedules")

MAX_CRON_CHARS = 200
MAX_TIMEZONE_CHARS = 64
# Due schedules one statement reads at most; the rest wait for the next look.
DUE_BATCH = 100
# What a schedule's lead may say: its key is the tick's, and nothing else of a push applies.
LEAD_FIELDS = ("payload", "priority", "max_attempts", "delay_s")
_name_re = re.compile(SESSION_PATTERN)


@dataclass(frozen=True, slots=True)
class Tick:
    """A tick pushed: the schedule's name, the tick, and the lead's id."""

    name: str
    tick: datetime
    lead_id: int


def tick_key(name: str, tick: datetime) -> str:
    """The dedupe key of a tick's lead: ``schedule:{name}:{tick}``, RFC 3339 UTC."""
    return f"schedule:{name}:{tick.astimezone(UTC):%Y-%m-%dT%H:%M:%SZ}"


def zone(timezone: Any) -> ZoneInfo:
    """The IANA time zone named. Raises InvalidInput."""
    if not isinstance(timezone, str) or not 1 <= len(timezone) <= MAX_TIMEZONE_CHARS:
        raise InvalidInput(
            "timezone", "must be an IANA time zone name, such as UTC or Europe/Paris"
        )
    try:
        return ZoneInfo(timezone)
    except (ZoneInfoNotFoundError, ValueError):
        raise InvalidInput(
            "timezone", f"unknown time zone {timezone!r} (an IANA name, such as Europe/Paris)"
        ) from None


def next_after(cron: str, where: ZoneInfo, instant: datetime) -> datetime:
    """The first tick strictly after ``instant``, in UTC. Raises InvalidInput."""
    try:
        return next(CronSim(cron, instant.astimezone(where))).astimezone(UTC)
    except (CronSimError, StopIteration):
        raise InvalidInput("cron", f"{cron!r} is no cron expression that ever fires") from None


def latest_not_after(cron: str, where: ZoneInfo, instant: datetime) -> datetime:
    """The last tick at or before ``instant`` (ticks fall on whole seconds), in UTC."""
    after = instant.astimezone(where).replace(microsecond=0) + timedelta(seconds=1)
    return next(CronSim(cron, after, reverse=True)).astimezone(UTC)


def schedule_of(row: Mapping[str, Any]) -> Schedule:
    return Schedule(**{name: row[name] for name in Schedule.__slots__})


class Schedules:
    """The schedules of one database, and their ticks."""

    def __init__(
        self,
        db: Database,
        *,
        default_max_attempts: int = DEFAULT_MAX_ATTEMPTS,
        max_payload_bytes: int = DEFAULT_MAX_PAYLOAD_BYTES,
    ) -> None:
        self.db = db
        self.default_max_attempts = default_max_attempts
        self.max_payload_bytes = max_payload_bytes

    async def put(
        self,
        name: str,
        session: str,
        cron: str,
        timezone: str,
        lead: Mapping[str, Any],
        *,
        now: datetime | None = None,
    ) -> Schedule:
        """Create or replace a schedule; its next tick is the first after now. Raises
        InvalidInput (nothing stored) for a bad name, session, cron, time zone or lead."""
        if not isinstance(name, str) or not _name_re.fullmatch(name):
            raise InvalidInput("name", f"must match {SESSION_PATTERN}")
        validation.session(session)
        if not isinstance(cron, str) or not 1 <= len(cron) <= MAX_CRON_CHARS:
            raise InvalidInput("cron", f"must be a cron expression of 1 to {MAX_CRON_CHARS} chars")
        where = zone(timezone)
        stored = self._checked_lead(lead)
        [row] = await self.db.rows(statements.schedule_now(now=now))
        next_tick = next_after(cron, where, row["now"])
        [saved] = await self.db.rows(
            statements.schedule_put(
                name=name,
                session=session,
                cron=cron,
                timezone=timezone,
                lead=json.dumps(stored, separators=(",", ":")),
                next_tick=next_tick,
                now=now,
            )
        )
        return schedule_of(saved)

    def _checked_lead(self, lead: Any) -> dict[str, Any]:
        """The lead of a tick, checked as a push checks one. Raises InvalidInput."""
        if not isinstance(lead, Mapping):
            raise InvalidInput(
                "lead", "must be an object: payload, priority, max_attempts, delay_s"
            )
        if unknown := sorted(set(lead) - set(LEAD_FIELDS)):
            raise InvalidInput(
                f"lead.{unknown[0]}",
                "not taken by a schedule's lead (its key is schedule:{name}:{tick}); "
                f"a lead here has {', '.join(LEAD_FIELDS)}",
            )
        if "payload" not in lead:
            raise InvalidInput("lead.payload", "is required: a JSON object")
        # A tick pushes through leaseq_push, which takes the default limit whatever the
        # service's: a larger payload would be refused at every tick.
        limit = min(self.max_payload_bytes, DEFAULT_MAX_PAYLOAD_BYTES)
        validation.payload(lead["payload"], "lead.payload", max_bytes=limit)
        checked: dict[str, Any] = {"payload": lead["payload"]}
        if lead.get("priority") is not None:
            checked["priority"] = validation.integer(
                "lead.priority", lead["priority"], low=-INT32_MAX - 1, high=INT32_MAX
            )
        if lead.get("max_attempts") is not None:
            checked["max_attempts"] = validation.integer(
                "lead.max_attempts", lead["max_attempts"], low=1, high=MAX_ATTEMPTS
            )
        if lead.get("delay_s") is not None:
            checked["delay_s"] = validation.delay(lead["delay_s"], "lead.delay_s")
        return checked

    async def get(self, name: str) -> Schedule:
        """One schedule by name. Raises NotFound."""
        rows = await self.db.rows(statements.schedule_get(name=name))
        if not rows:
            raise NotFound(f"no schedule {name}")
        return schedule_of(rows[0])

    async def all(self) -> list[Schedule]:
        """Every schedule, by name."""
        return [schedule_of(row) for row in await self.db.rows(statements.schedules_all())]

    async def delete(self, name: str) -> None:
        """Stop a schedule (its leads already pushed stay). Raises NotFound."""
        if not await self.db.rows(statements.schedule_delete(name=name)):
            raise NotFound(f"no schedule {name}")

    async def tick(self, *, now: datetime | None = None) -> list[Tick]:
        """Push the lead of every schedule whose tick has come (on the database clock, or
        ``now``); returns the ticks this call moved on (another process may move some).

        The due schedules are read a batch at a time in (next_tick, name) order, each batch
        after the last one read, so a schedule left due (its node unreachable) is passed
        over, not read again."""
        pushed: list[Tick] = []
        after: Row | None = None
        while True:
            due = await self.db.rows(
                statements.schedules_due(
                    now=now,
                    limit=DUE_BATCH,
                    after_tick=None if after is None else after["next_tick"],
                    after_name=None if after is None else after["name"],
                )
            )
            for row in due:
                fired = await self._fire(row, now)
                if fired is not None:
                    pushed.append(fired)
            if len(due) < DUE_BATCH:
                return pushed
            after = due[-1]

    async def _fire(self, row: Row, now: datetime | None) -> Tick | None:
        """Push the schedule's due tick, then move it on; None when another process moved it
        first, or when its node could not be reached (the next look pushes it again, and its
        key finds the lead pushed)."""
        where = ZoneInfo(row["timezone"])
        judged_at: datetime = row["now"]
        tick = max(row["next_tick"], latest_not_after(row["cron"], where, judged_at))
        try:
            [lead] = await self.db.rows(
                statements.schedule_push(
                    session=row["session"],
                    payload=row["payload_text"],
                    priority=row["priority"],
                    key=tick_key(row["name"], tick),
                    delay_s=row["delay_s"],
                    max_attempts=row["lead"].get("max_attempts") or self.default_max_attempts,
                )
            )
            advanced = await self.db.rows(
                statements.schedule_advance(
                    name=row["name"],
                    tick_was=row["next_tick"],
                    next_tick=next_after(row["cron"], where, judged_at),
                    now=now,
                )
            )
        except Unavailable as exc:
            log.warning("schedule %s: tick %s left for the next look: %s", row["name"], tick, exc)
            return None
        except psycopg.Error as exc:
            if exc.sqlstate != statements.QUOTA_SQLSTATE:
                raise
            # The session is at its max_queued: the tick waits for room, pushed at a later look.
            log.warning("schedule %s: tick %s waits for room: %s", row["name"], tick, exc)
            return None
        if not advanced:
            return None  # another process moved it on first
        return Tick(name=row["name"], tick=tick, lead_id=int(lead["lead_id"]))
