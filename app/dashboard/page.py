"""The dashboard's HTML shell (Jinja2, rendered once per process) and its JSON data."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, fields
from functools import cache
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape

from app import __version__
from app.domain.overview import WINDOW_MINUTES, SessionView, Snapshot
from app.domain.schedules import next_after, zone
from app.service.maintenance import AUTOVACUUM_OFF
from leaseq.model import STATUSES, Schedule, SessionSettings
from leaseq.timefmt import rfc3339

POLL_INTERVAL_MS = 2000
NEXT_TICKS = 5  # a schedule's ticks the schedules page lists
NO_SETTINGS = {f.name: None for f in fields(SessionSettings)}  # the total's


@cache
def shell() -> str:
    """The page: no data and no secret (its script fetches ``dashboard/data``)."""
    env = Environment(
        loader=PackageLoader("app.dashboard", "templates"),
        autoescape=select_autoescape(["html"]),
    )
    return env.get_template("dashboard.html").render(
        version=__version__,
        poll_interval_ms=POLL_INTERVAL_MS,
        window_minutes=WINDOW_MINUTES,
        statuses=STATUSES,
    )


def _session(
    view: SessionView, default_max_queued: int | None = None, held_s: float = 0.0
) -> dict[str, Any]:
    """One line of the page; ``queued_bound`` is the ``max_queued`` that binds the session (its
    own, else the service's ``LEASEQ_MAX_QUEUED``; null: none, and for the total), so the page
    can show how full it is without knowing how the service was started. ``time_share`` is
    its ``lease_seconds`` over ``held_s``, the total's (every session the reader sees, not
    only those a search lists); null when no lease ended in the last minute."""
    own = view.settings.max_queued if view.settings else None
    bound = None if view.settings is None else own if own is not None else default_max_queued
    return {
        "name": view.name,
        **{status: getattr(view.counts, status) for status in STATUSES},
        "blocked": view.counts.blocked,
        "pending": view.counts.pending,
        "oldest_available_age_s": view.counts.oldest_available_age_s,
        **(_settings(view.settings) if view.settings else NO_SETTINGS),
        "completed_per_minute": view.completed_per_minute,
        "wasted_per_minute": view.wasted_per_minute,
        "wasted": sum(view.wasted_per_minute),
        "queued_bound": bound,
        "lease_seconds": view.lease_seconds,
        "time_share": view.lease_seconds / held_s if held_s > 0 else None,
        "suggested_workers": view.suggested_workers,
    }


def warnings(snapshot: Snapshot) -> list[str]:
    """What the operator should act on, shown above everything else."""
    return [] if snapshot.autovacuum else [AUTOVACUUM_OFF]


def _settings(settings: SessionSettings) -> dict[str, Any]:
    """A session's settings as JSON values (``paused_until`` in RFC 3339 UTC, or null)."""
    paused = settings.paused_until
    return {**asdict(settings), "paused_until": None if paused is None else rfc3339(paused)}


def next_ticks(schedule: Schedule, n: int = NEXT_TICKS) -> list[str]:
    """Its next ``n`` ticks from the one due, in RFC 3339 UTC: computed, not stored, so an
    operator sees when it fires across a change of daylight saving time."""
    where = zone(schedule.timezone)
    ticks = [schedule.next_tick]
    while len(ticks) < n:
        ticks.append(next_after(schedule.cron, where, ticks[-1]))
    return [rfc3339(tick) for tick in ticks]


def _schedule(schedule: Schedule) -> dict[str, Any]:
    return {
        "name": schedule.name,
        "session": schedule.session,
        "cron": schedule.cron,
        "timezone": schedule.timezone,
        "next_tick": rfc3339(schedule.next_tick),
        "next_ticks": next_ticks(schedule),
    }


def to_json(
    snapshot: Snapshot, schedules: Sequence[Schedule] = (), default_max_queued: int | None = None
) -> dict[str, Any]:
    """The snapshot, and the schedules with their next ticks, as JSON values; timestamps in
    RFC 3339 UTC. ``default_max_queued``: the service's, the bound of sessions without their
    own (``max_queued_default``: a session's page reads it to show how full that session is)."""
    held_s = snapshot.total.lease_seconds
    return {
        "now": rfc3339(snapshot.now),
        "autovacuum": snapshot.autovacuum,
        "warnings": warnings(snapshot),
        "window_minutes": WINDOW_MINUTES,
        "max_queued_default": default_max_queued,
        "sessions": [_session(v, default_max_queued, held_s) for v in snapshot.sessions],
        "total": _session(snapshot.total, None, held_s),
        "hidden_sessions": snapshot.hidden_sessions,
        "expiring": [asdict(lease) for lease in snapshot.expiring],
        "failures": [{**asdict(f), "at": rfc3339(f.at)} for f in snapshot.failures],
        "schedules": [_schedule(schedule) for schedule in schedules],
    }
