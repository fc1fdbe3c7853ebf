"""A session's settings (weight, cap, rate): read, stored, and the barrier of a change."""

from __future__ import annotations

from datetime import datetime

from app.store.statements._build import statement
from app.store.statements.fragments import (
    FOREVER,
    NOW,
    PAUSED_UNTIL,
    SETTINGS,
    SETTINGS_COLUMNS,
    notify,
    plus_seconds,
)


def _settings_get() -> str:
    return f"SELECT {SETTINGS}, {PAUSED_UNTIL} FROM session_settings WHERE session = %(session)s"


@statement(_settings_get)
def settings_get(*, session: str, now: datetime | None) -> None:
    """One session's settings; no row: the defaults."""


def _settings_all() -> str:
    return f"SELECT session, {SETTINGS}, {PAUSED_UNTIL} FROM session_settings ORDER BY session"


@statement(_settings_all)
def settings_all(*, now: datetime | None) -> None:
    """Every session's settings that an operator set (a small table: one row per such session)."""


def _settings_barrier() -> str:
    return "LOCK TABLE session_settings IN ACCESS EXCLUSIVE MODE"


@statement(_settings_barrier)
def settings_barrier() -> None:
    """Wait for every statement that read the settings to end, and hold back new ones until
    this transaction commits: a cap or rate stored after it binds every lease begun later.

    The lease statements read ``session_settings`` (a share lock for their one statement);
    this is the one lock that waits for them. Operators' changes are rare and take
    milliseconds; ``lock_timeout`` keeps a stuck reader from holding the change for long.
    """


def _lock_timeout() -> str:
    return "SELECT set_config('lock_timeout', %(timeout)s, true)"


@statement(_lock_timeout)
def lock_timeout(*, timeout: str) -> None:
    """This transaction's ``lock_timeout`` (``%(timeout)s``, text such as '2s')."""


def _settings_put() -> str:
    return f"""
INSERT INTO session_settings AS s (session, {SETTINGS_COLUMNS}, updated_at)
VALUES (%(session)s, %(weight)s, %(max_leased)s, %(rate_per_s)s, %(burst)s,
        %(max_leased_per_key)s, %(max_runtime_s)s, %(max_queued)s, {NOW})
ON CONFLICT (session) DO UPDATE SET
    weight = excluded.weight, max_leased = excluded.max_leased,
    rate_per_s = excluded.rate_per_s, burst = excluded.burst,
    max_leased_per_key = excluded.max_leased_per_key, max_runtime_s = excluded.max_runtime_s,
    max_queued = excluded.max_queued,
    tokens = CASE WHEN excluded.rate_per_s IS NOT NULL AND s.rate_per_s IS NOT NULL
                  THEN s.tokens END,
    refilled_at = CASE WHEN excluded.rate_per_s IS NOT NULL AND s.rate_per_s IS NOT NULL
                       THEN s.refilled_at END,
    updated_at = {NOW}
RETURNING {SETTINGS}, {PAUSED_UNTIL}
"""


@statement(_settings_put)
def settings_put(
    *,
    session: str,
    burst: float | None,
    max_leased: int | None,
    rate_per_s: float | None,
    weight: float,
    max_leased_per_key: int | None,
    max_runtime_s: int | None,
    max_queued: int | None,
    now: datetime | None,
) -> None:
    """Store a session's settings. A bucket that keeps a rate keeps its level (a change is no
    burst); a rate newly set starts with a full bucket; no rate, no bucket."""


def _pause() -> str:
    return f"""
INSERT INTO session_settings AS s (session, paused_until, updated_at)
VALUES (%(session)s,
        coalesce({plus_seconds(NOW, "%(for_s)s::float8")}, {FOREVER}), {NOW})
ON CONFLICT (session) DO UPDATE SET paused_until = excluded.paused_until
RETURNING {SETTINGS}, {PAUSED_UNTIL}
"""


@statement(_pause)
def pause(*, session: str, for_s: float | None, now: datetime | None) -> None:
    """Pause a session until now + ``for_s`` (NULL: until resumed, shown as ``FOREVER``); its
    settings. A lease statement that begins after this commits reads the pause."""


def _resume() -> str:
    return f"""
WITH resumed AS (
    UPDATE session_settings SET paused_until = NULL WHERE session = %(session)s RETURNING *
)
SELECT {SETTINGS}, NULL::timestamptz AS paused_until,
       {notify("session")} AS notified
FROM resumed
"""


@statement(_resume)
def resume(*, session: str) -> None:
    """End a session's pause; its settings (no row: it had none). Wakes its waiting leases."""
