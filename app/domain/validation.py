"""Checks on input to the queue, with the wire's limits (``leaseq.limits``).

Each failure raises InvalidInput naming the field; nothing is written.
Pure functions: no database, no HTTP.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Mapping
from typing import Any, cast

from leaseq import checks
from leaseq.errors import InvalidInput
from leaseq.limits import (
    INT32_MAX,
    INT64_MAX,
    MAX_AFTER,
    MAX_BURST,
    MAX_CONCURRENCY_KEY_CHARS,
    MAX_DELAY_S,
    MAX_ITEM_BATCH,
    MAX_KEY_CHARS,
    MAX_LEASE_BATCH,
    MAX_LEASE_SESSIONS,
    MAX_OWNER_CHARS,
    MAX_PAUSE_S,
    MAX_PUSH_BATCH,
    MAX_RATE_PER_S,
    MAX_RUNTIME_S,
    MAX_THROTTLE_S,
    MAX_TOKEN_CHARS,
    MAX_TTL_S,
    MAX_WEIGHT,
    MIN_BURST,
    MIN_RATE_PER_S,
    MIN_WEIGHT,
    SESSION_PATTERN,
)
from leaseq.model import FINAL_STATUSES, SessionSettings

_session_re = re.compile(SESSION_PATTERN)


def session(value: Any) -> str:
    if not isinstance(value, str) or not _session_re.fullmatch(value):
        raise InvalidInput("session", f"must match {SESSION_PATTERN}")
    return value


def integer(field: str, value: Any, *, low: int, high: int) -> int:
    if (fault := checks.integer_fault(value, low=low, high=high)) is not None:
        raise InvalidInput(field, fault)
    return int(value)


def number(
    field: str,
    value: Any,
    *,
    low: float,
    high: float,
    low_inclusive: bool = True,
    what: str = "a number",
) -> float:
    fault = checks.number_fault(value, low=low, high=high, low_inclusive=low_inclusive, what=what)
    if fault is not None:
        raise InvalidInput(field, fault)
    return float(value)


def seconds(
    field: str, value: Any, *, low: float, high: float, low_inclusive: bool = True
) -> float:
    return number(
        field, value, low=low, high=high, low_inclusive=low_inclusive, what="a number of seconds"
    )


def ttl(value: Any) -> float:
    return seconds("ttl_s", value, low=0, high=MAX_TTL_S, low_inclusive=False)


def delay(value: Any, field: str = "delay_s") -> float:
    return seconds(field, value, low=0, high=MAX_DELAY_S)


def lease_max(value: Any) -> int:
    return integer("max", value, low=1, high=MAX_LEASE_BATCH)


# Lists of sessions found good, as a worker sends the same list with every lease: checking
# one again is a set lookup, not a pattern match per name.
_good_session_sets: dict[frozenset[str], None] = {}
GOOD_SESSION_SETS = 64


def lease_sessions(values: Any) -> frozenset[str]:
    """The sessions a lease across sessions may choose from: 1 to MAX_LEASE_SESSIONS names."""
    if isinstance(values, str | bytes) or not isinstance(values, Collection):
        raise InvalidInput("sessions", "must be a list of session names")
    batch("sessions", list(values), high=MAX_LEASE_SESSIONS)
    if not all(isinstance(value, str) for value in values):
        raise InvalidInput("sessions", f"each must match {SESSION_PATTERN}")
    names = frozenset(values)
    if names in _good_session_sets:
        return names
    for name in names:
        if not _session_re.fullmatch(name):
            raise InvalidInput("sessions", f"each must match {SESSION_PATTERN}")
    if len(_good_session_sets) >= GOOD_SESSION_SETS:
        _good_session_sets.pop(next(iter(_good_session_sets)))
    _good_session_sets[names] = None
    return names


def lead_id(value: Any, field: str = "lead_id") -> int:
    return integer(field, value, low=1, high=INT64_MAX)


def text(field: str, value: Any, *, max_chars: int, optional: bool = False) -> str | None:
    if value is None and optional:
        return None
    if (fault := checks.text_fault(value, max_chars=max_chars)) is not None:
        raise InvalidInput(field, fault)
    return str(value)


def owner(value: Any) -> str:
    result = text("owner", value, max_chars=MAX_OWNER_CHARS)
    assert result is not None
    return result


def token(value: Any) -> str:
    result = text("token", value, max_chars=MAX_TOKEN_CHARS)
    assert result is not None
    return result


def final_status(value: Any) -> str:
    if value not in FINAL_STATUSES:
        raise InvalidInput("status", f"must be one of {', '.join(FINAL_STATUSES)}")
    return str(value)


def json_shape(field: str, value: Any) -> None:
    """Refuse what jsonb or the answer built from it could not hold, before anything is
    written (``leaseq.checks.json_fault``: depth, NUL, lone surrogates, non-string keys)."""
    if (fault := checks.json_fault(value)) is not None:
        raise InvalidInput(field, fault)


def json_text(field: str, value: Any, *, max_bytes: int | None = None) -> str:
    """The value as JSON text jsonb accepts and gives back equal (see ``json_shape``; no NaN
    or infinity), of at most max_bytes."""
    json_shape(field, value)
    try:
        encoded = json.dumps(value, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(field, f"must be JSON ({exc})") from None
    # ensure_ascii (the default) escapes every non-ASCII character: one character, one byte.
    if max_bytes is not None and len(encoded) > max_bytes:
        raise InvalidInput(
            field, f"must be at most {max_bytes} bytes as compact JSON (is {len(encoded)})"
        )
    return encoded


def payload(value: Any, field: str = "payload", *, max_bytes: int | None = None) -> str:
    if not isinstance(value, dict):
        raise InvalidInput(field, "must be a JSON object")
    return json_text(field, value, max_bytes=max_bytes)


def batch(field: str, items: Any, *, high: int) -> None:
    if not isinstance(items, list | tuple) or not 1 <= len(items) <= high:
        raise InvalidInput(field, f"must hold 1 to {high} items")


def push_batch(items: Any) -> None:
    batch("leads", items, high=MAX_PUSH_BATCH)


def item_batch(items: Any) -> None:
    batch("items", items, high=MAX_ITEM_BATCH)


def session_settings(value: SessionSettings) -> None:
    """A session's settings: a weight, and each limit absent (None) or in its range
    (``leaseq.limits``: what the lease statements' arithmetic carries)."""
    number("weight", value.weight, low=MIN_WEIGHT, high=MAX_WEIGHT)
    if value.max_leased is not None:
        integer("max_leased", value.max_leased, low=0, high=INT32_MAX)
    if value.rate_per_s is not None:
        number("rate_per_s", value.rate_per_s, low=MIN_RATE_PER_S, high=MAX_RATE_PER_S)
    if value.burst is not None:
        integer("burst", value.burst, low=MIN_BURST, high=MAX_BURST)
        if value.rate_per_s is None:
            raise InvalidInput("burst", "needs rate_per_s: it is the size of the rate's bucket")
    if value.max_leased_per_key is not None:
        integer("max_leased_per_key", value.max_leased_per_key, low=1, high=INT32_MAX)
    max_runtime(value.max_runtime_s, "max_runtime_s")
    if value.max_queued is not None:
        integer("max_queued", value.max_queued, low=1, high=INT32_MAX)


# -- flow control (docs/contract.md#flow-control) ---------------------------------------------


def max_runtime(value: Any, field: str) -> None:
    """A maximum runtime in whole seconds, or None (none of its own)."""
    if value is not None:
        integer(field, value, low=1, high=MAX_RUNTIME_S)


def concurrency_key(value: Any, field: str) -> None:
    """A lead's concurrency key: 1 to MAX_CONCURRENCY_KEY_CHARS characters, or None."""
    text(field, value, max_chars=MAX_CONCURRENCY_KEY_CHARS, optional=True)


def traceparent(value: Any, field: str) -> None:
    """A lead's W3C ``traceparent``, checked strictly (docs/contract.md#trace-context), or None."""
    if (fault := checks.traceparent_fault(value)) is not None:
        raise InvalidInput(field, fault)


def header_traceparent(value: str | None) -> str | None:
    """A request's ``traceparent`` header: the value, or None when it is absent or malformed
    (a receiver ignores a malformed one, as W3C Trace Context asks)."""
    if value is None or checks.traceparent_fault(value.strip()) is not None:
        return None
    return value.strip()


def after(value: Any, field: str) -> list[int | str]:
    """A lead's ``after``: up to MAX_AFTER lead ids, or ``{"key": k}`` for a key; the ids as
    ints, the keys as strs (docs/contract.md#dependencies)."""
    if not isinstance(value, list | tuple) or len(value) > MAX_AFTER:
        raise InvalidInput(field, f'must be a list of at most {MAX_AFTER} lead ids or {{"key": k}}')
    refs: list[int | str] = []
    for j, item in enumerate(value):
        if isinstance(item, Mapping):
            if set(item) != {"key"}:
                raise InvalidInput(f"{field}[{j}]", 'must be a lead id or {"key": k}')
            key = text(f"{field}[{j}].key", item["key"], max_chars=MAX_KEY_CHARS)
            refs.append(cast(str, key))
        else:
            refs.append(lead_id(item, f"{field}[{j}]"))
    return refs


def pause_for(value: Any) -> float | None:
    """A pause's length in seconds (None: until resumed)."""
    if value is None:
        return None
    return number("for_s", value, low=0, high=MAX_PAUSE_S, low_inclusive=False)


def throttle(value: Any) -> float | None:
    """A throttled release's cooldown of its session, 1 to MAX_THROTTLE_S seconds (None: none)."""
    if value is None:
        return None
    return number("throttle_s", value, low=1, high=MAX_THROTTLE_S)
