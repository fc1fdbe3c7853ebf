"""The contract's answer shapes (docs/contract.md#lease-and-lead-objects), checked exactly: the
keys, their types, RFC 3339 UTC timestamps."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import httpx

LEAD_KEYS = {
    "id",
    "session",
    "priority",
    "payload",
    "key",
    "status",
    "owner",
    "attempts",
    "max_attempts",
    "available_at",
    "lease_expires_at",
    "result",
    "error",
    "created_at",
    "updated_at",
    "depth",
    "parent_id",
    "checkpoint",
    "concurrency_key",
    "max_runtime_s",
    "traceparent",
    "after",
}
LEASE_KEYS = {"lead", "token", "attempt", "owner", "expires_at", "ttl_s", "fence"}
COUNT_KEYS = {
    "queued",
    "leased",
    "done",
    "failed",
    "cached",
    "blocked",
    "pending",
    "oldest_available_age_s",
    "paused_until",
}
PROBLEM_KEYS = {"type", "title", "status", "detail", "code"}


def timestamp(value: Any) -> datetime:
    """An RFC 3339 timestamp in UTC (``…Z``)."""
    assert isinstance(value, str) and value.endswith("Z"), value
    parsed = datetime.fromisoformat(value)
    assert parsed.utcoffset() is not None and parsed.utcoffset().total_seconds() == 0  # type: ignore[union-attr]
    return parsed.astimezone(UTC)


def lead(data: Any, **expected: Any) -> dict[str, Any]:
    """A lead object: exactly docs/contract.md#the-lead-object's columns, never a lease token."""
    assert isinstance(data, dict)
    assert set(data) == LEAD_KEYS, set(data) ^ LEAD_KEYS
    assert "lease_token" not in data and "token" not in data
    assert isinstance(data["id"], int) and isinstance(data["payload"], dict)
    for name in ("available_at", "created_at", "updated_at"):
        timestamp(data[name])
    if data["status"] == "leased":
        timestamp(data["lease_expires_at"])
    else:
        assert data["lease_expires_at"] is None
    for name, value in expected.items():
        assert data[name] == value, (name, data[name], value)
    return data


def lease(data: Any, **expected: Any) -> dict[str, Any]:
    """A lease object around a leased lead."""
    assert isinstance(data, dict) and set(data) == LEASE_KEYS, data
    assert isinstance(data["token"], str) and len(data["token"]) >= 16
    assert isinstance(data["attempt"], int) and data["attempt"] >= 1
    assert isinstance(data["ttl_s"], int | float) and data["ttl_s"] > 0
    lead(data["lead"], status="leased", owner=data["owner"], attempts=data["attempt"])
    assert timestamp(data["expires_at"]) == timestamp(data["lead"]["lease_expires_at"])
    for name, value in expected.items():
        assert data[name] == value, (name, data[name], value)
    return data


AGE = "oldest_available_age_s"
PAUSED = "paused_until"


def counts(data: Any, **expected: int) -> dict[str, Any]:
    """Counts by status (exactly ``expected``, else 0) and the age of the oldest available lead:
    a number of seconds when some lead is queued and available, else null."""
    assert isinstance(data, dict) and set(data) == COUNT_KEYS, data
    assert all(isinstance(v, int) for k, v in data.items() if k not in (AGE, PAUSED))
    assert data["pending"] == data["queued"] + data["leased"]
    want = {name: 0 for name in COUNT_KEYS - {"pending", AGE, PAUSED}} | expected
    counted = {k: v for k, v in data.items() if k not in ("pending", AGE, PAUSED)}
    assert counted == want, (data, want)
    if data[PAUSED] is not None:
        timestamp(data[PAUSED])
    age = data[AGE]
    assert age is None or (isinstance(age, int | float) and age >= 0), data
    if not data["queued"]:
        assert age is None, data
    return data


def problem(response: httpx.Response, status: int, code: str) -> dict[str, Any]:
    """An RFC 9457 problem answer with its code (docs/contract.md#error-codes)."""
    assert response.status_code == status, (response.status_code, response.text)
    assert response.headers["content-type"].startswith("application/problem+json")
    body = response.json()
    assert isinstance(body, dict)
    assert (
        {"type", "title", "status", "code"} <= set(body) <= PROBLEM_KEYS | {"errors", "reason"}
    ), body
    assert body["status"] == status and body["code"] == code, body
    assert isinstance(body["type"], str) and isinstance(body["title"], str)
    if status == 503:
        assert int(response.headers["retry-after"]) >= 1
    return body
