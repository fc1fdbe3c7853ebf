"""Timestamps on the wire: RFC 3339 in UTC, written and read here only."""

from __future__ import annotations

from datetime import UTC, datetime


def rfc3339(value: datetime) -> str:
    """``2026-01-02T03:04:05.678901Z``."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse(value: str) -> datetime:
    """An RFC 3339 timestamp as an aware datetime."""
    return datetime.fromisoformat(value)
