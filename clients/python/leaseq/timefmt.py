"""Timestamps on the wire: RFC 3339 in UTC, written and read here only; durations as typed."""

from __future__ import annotations

import re
from datetime import UTC, datetime

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_duration_re = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(value: str) -> float:
    """Seconds in a duration such as 90s, 30m, 12h or 7d. Raises ValueError."""
    match = _duration_re.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a duration such as 30m, 12h or 7d")
    return float(match[1]) * DURATION_UNITS[match[2]]


def rfc3339(value: datetime) -> str:
    """``2026-01-02T03:04:05.678901Z``."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse(value: str) -> datetime:
    """An RFC 3339 timestamp as an aware datetime."""
    return datetime.fromisoformat(value)
