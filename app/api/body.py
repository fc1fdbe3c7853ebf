"""The one JSON parser of request bodies: I-JSON (RFC 7493), or a 422 naming what is wrong.

Every body any route reads passes ``parse`` (``app.api.front_door`` calls it),
so no route, and no faster path, can take JSON that another would refuse.
What it refuses, each as ``validation_error`` with the fault's location:

- bytes that are not UTF-8, or not JSON (``json_invalid``, as FastAPI says it);
- nesting deeper than ``MAX_BODY_DEPTH``, found before the parser recurses;
- a member name given twice in any object, at any depth (the last would win);
- ``NaN``, ``Infinity`` and numbers beyond a double's range (``1e400``);
- a lone surrogate (``"\\ud800"``) in any string or member name: UTF-8 cannot
  carry it, so nothing downstream could store it.

The models then refuse unknown fields and wrong types, and the domain the
stored values' own limits (``MAX_JSON_DEPTH``); this module knows no model.
"""

from __future__ import annotations

import json
import math
import re
from itertools import accumulate
from typing import Any

from fastapi.exceptions import RequestValidationError

from leaseq.limits import MAX_BODY_DEPTH

Loc = list[str | int]


class _Repeated(Exception):
    """A member name given twice in one object."""


class _NotFinite(Exception):
    """NaN, an infinity, or a number a double cannot hold."""


def _members(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) != len(pairs):
        raise _Repeated()
    return members


def _constant(name: str) -> float:
    raise _NotFinite(name)


def _float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise _NotFinite(text)
    return value


_DECODER = json.JSONDecoder(
    object_pairs_hook=_members, parse_constant=_constant, parse_float=_float
)

# A JSON string, as the parser reads one (an escape takes the character after it).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(set(range(256)) - set(b"[]{}"))
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse(raw: bytes) -> Any:
    """The body's JSON value (None for an empty body; a body of JSON null is refused), or
    RequestValidationError."""
    if not raw:
        return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _refused("json_invalid", ["body", exc.start], "the body is not UTF-8") from None
    if raw.count(b"{") + raw.count(b"[") > MAX_BODY_DEPTH and _depth(raw) > MAX_BODY_DEPTH:
        detail = f"arrays and objects nest deeper than {MAX_BODY_DEPTH}"
        raise _refused("json_too_deep", ["body"], detail)
    try:
        value = _DECODER.decode(text)
    except json.JSONDecodeError as exc:
        raise _refused("json_invalid", ["body", exc.pos], exc.msg) from None
    except _Repeated:
        name, loc = _repeated(text)
        raise _refused(
            "json_duplicate_member", loc, f"the member {name!r} is given twice"
        ) from None
    except _NotFinite as exc:
        detail = f"{str(exc)[:40]} is not a finite number (NaN and infinities are not JSON)"
        raise _refused("json_number", ["body"], detail) from None
    except ValueError as exc:  # an integer of more digits than Python converts
        raise _refused("json_number", ["body"], str(exc)) from None
    if value is None:  # null is a body, never "no body": an optional one would run as absent
        raise _refused("json_null", ["body"], "the body must be a JSON object, not null")
    if "\\u" in text:
        where = _lone_surrogate(value)
        if where is not None:
            raise _refused("json_string", where, "a lone surrogate is not text (RFC 7493)")
    return value


def _refused(kind: str, loc: Loc, msg: str) -> RequestValidationError:
    # A name in the location is shown escaped where it is not text (a lone surrogate).
    shown = [
        part.encode("utf-8", "backslashreplace").decode() if isinstance(part, str) else part
        for part in loc
    ]
    return RequestValidationError([{"type": kind, "loc": tuple(shown), "msg": msg, "input": None}])


def _depth(raw: bytes) -> int:
    """How deep the arrays and objects nest, strings left out; no recursion, any depth."""
    brackets = _STRING.sub(b"", raw).translate(None, _NOT_BRACKETS)
    return max(accumulate(map(_STEP.__getitem__, brackets)), default=0)


class _Marked(dict[str, Any]):
    """An object whose members named ``name`` more than once (found only to say where)."""

    name = ""


def _marking(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members = dict(pairs)
    if len(members) == len(pairs):
        return members
    marked = _Marked(members)
    seen: set[str] = set()
    for key, _ in pairs:
        if key in seen:
            marked.name = key
            break
        seen.add(key)
    return marked


def _repeated(text: str) -> tuple[str, Loc]:
    """The first member name given twice, and where: parsed again, only on this refusal."""
    value = json.loads(text, object_pairs_hook=_marking, parse_constant=float)
    stack: list[tuple[Any, Loc]] = [(value, ["body"])]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, _Marked):
            return node.name, [*loc, node.name]
        if isinstance(node, dict | list):
            items = list(node.items() if isinstance(node, dict) else enumerate(node))
            stack.extend((item, [*loc, key]) for key, item in reversed(items))
    raise AssertionError("a repeated member was seen")  # pragma: no cover


def _lone_surrogate(value: Any) -> Loc | None:
    """Where a string or member name holds a lone surrogate (a parser joins a pair), or None."""
    stack: list[tuple[Any, Loc]] = [(value, ["body"])]
    while stack:
        node, loc = stack.pop()
        if isinstance(node, str):
            if not node.isascii() and _SURROGATE.search(node):
                return loc
        elif isinstance(node, dict):
            for key, item in node.items():
                if not key.isascii() and _SURROGATE.search(key):
                    return [*loc, key]
                stack.append((item, [*loc, key]))
        elif isinstance(node, list):
            stack.extend((item, [*loc, index]) for index, item in enumerate(node))
    return None
