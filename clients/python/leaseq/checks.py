"""The checks of a value against the wire's limits (``leaseq.limits``), in one place.

Each says why a value is refused, or None when it is not, in the words of the service's
422 answers: the service raises the reason as ``InvalidInput`` naming the field, and
``leaseq push`` names it with the line it came from, before anything is sent and
without the server installed. They live in the client's distribution for that reason.
Pure functions: no I/O, nothing of HTTP.
"""

from __future__ import annotations

import math
import re
from typing import Any

from leaseq.limits import MAX_JSON_DEPTH, TRACEPARENT_PATTERN

# A surrogate code point in a Python str is always unpaired (a JSON parser joins a pair into
# one character): UTF-8, and so PostgreSQL, cannot hold it; nor can jsonb hold a NUL.
_SURROGATE = re.compile("[\ud800-\udfff]")
UNSTORABLE_TEXT = "must not contain NUL characters or lone surrogates"


def storable(text: str) -> bool:
    """Text PostgreSQL can store: no NUL character, no lone surrogate."""
    return "\x00" not in text and (text.isascii() or _SURROGATE.search(text) is None)


def integer_fault(value: Any, *, low: int, high: int, nullable: bool = False) -> str | None:
    """An integer from ``low`` to ``high`` (or None, when ``nullable``); a bool is not one."""
    if value is None and nullable:
        return None
    if isinstance(value, int) and not isinstance(value, bool) and low <= value <= high:
        return None
    return f"must be an integer from {low} to {high}{' or null' if nullable else ''}"


def number_fault(
    value: Any, *, low: float, high: float, low_inclusive: bool = True, what: str = "a number"
) -> str | None:
    """A finite number from ``low`` (or above it) to ``high``; a bool is not one."""
    number = isinstance(value, int | float) and not isinstance(value, bool)
    above = number and math.isfinite(value) and (value >= low if low_inclusive else value > low)
    if above and value <= high:
        return None
    bound = "≥" if low_inclusive else ">"
    return f"must be {what} {bound} {low:g} and ≤ {high:g}"


def text_fault(value: Any, *, max_chars: int, nullable: bool = False) -> str | None:
    """A string of 1 to ``max_chars`` characters PostgreSQL can store (or None)."""
    if value is None and nullable:
        return None
    if isinstance(value, str) and 1 <= len(value) <= max_chars and storable(value):
        return None
    return (
        f"must be a string of 1 to {max_chars} characters without NUL or lone surrogates"
        f"{', or null' if nullable else ''}"
    )


def json_fault(value: Any) -> str | None:
    """What jsonb, or the answer built from it, could not hold: nesting deeper than
    MAX_JSON_DEPTH (answers are serialised recursively), a NUL character or a lone
    surrogate in any string or key, a key that is not a string. Iterative, so any depth
    is judged without recursion."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, level = stack.pop()
        if isinstance(node, str):
            if not storable(node):
                return UNSTORABLE_TEXT
            continue
        if not isinstance(node, dict | list):
            continue
        if level > MAX_JSON_DEPTH:
            return f"must not nest arrays and objects deeper than {MAX_JSON_DEPTH}"
        if isinstance(node, dict):
            for key, item in node.items():
                if not isinstance(key, str):
                    return "must have strings as object keys"
                stack.append((key, level))
                stack.append((item, level + 1))
        else:
            stack.extend((item, level + 1) for item in node)
    return None


_traceparent_re = re.compile(TRACEPARENT_PATTERN)
TRACEPARENT_FAULT = (
    "must be a W3C traceparent: 2 hex digits of version (not ff), 32 of trace id and 16 of "
    "parent id (neither all zeros), 2 of flags, joined by '-', in lowercase"
)


def traceparent_fault(value: Any, *, nullable: bool = True) -> str | None:
    """A W3C Trace Context ``traceparent`` (or None, when ``nullable``), checked strictly."""
    if value is None and nullable:
        return None
    if isinstance(value, str) and _traceparent_re.fullmatch(value):
        version, trace_id, parent_id, _flags = value.split("-")
        if version != "ff" and trace_id != "0" * 32 and parent_id != "0" * 16:
            return None
    return TRACEPARENT_FAULT
