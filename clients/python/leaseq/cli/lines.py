"""Leads from JSON lines, as ``leaseq push`` reads them: each line checked, never guessed at.

A line is a lead: a JSON object with ``payload`` and only a lead's fields
(``NewLead``'s), each of the type and range the service takes, judged by the checks
the service makes (``leaseq.checks``). With ``payloads`` every line is a payload instead, whole.
Anything else is a ``BadLine`` that names the line and says why; nothing
decides between the two by looking at the line. Blank lines are skipped.

A payload is a JSON object, as push (docs/contract.md#push) and ``NewLead`` have it. What
only the service can judge (its ``LEASEQ_MAX_PAYLOAD_BYTES``) is left to it.
"""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from leaseq.checks import integer_fault, json_fault, number_fault, text_fault, traceparent_fault
from leaseq.cli.output import CliError
from leaseq.limits import (
    DEFAULT_MAX_BODY_BYTES,
    INT32_MAX,
    MAX_ATTEMPTS,
    MAX_DELAY_S,
    MAX_KEY_CHARS,
    MAX_LEAD_ID,
    MAX_PUSH_BATCH,
)
from leaseq.model import NewLead

LEAD_FIELDS = tuple(field.name for field in dataclasses.fields(NewLead))
PAYLOADS_HINT = "--payloads takes each line whole as a payload"
# The bytes of ``{"leads":[]}`` around a push's leads.
_ENVELOPE = len(b'{"leads":[]}')


class BadLine(CliError):
    """A line that is not what ``leaseq push`` was told to read; ``number`` is its line."""

    def __init__(self, number: int, why: str) -> None:
        super().__init__(f"line {number}: {why}")
        self.number = number
        self.why = why


@dataclass(frozen=True, slots=True)
class Line:
    """One lead read from line ``number``: the lead as the API takes it, and its JSON's size."""

    number: int
    lead: dict[str, Any]
    size: int  # bytes of the lead as compact UTF-8 JSON, as the client sends it


def read(text: str, number: int, *, payloads: bool = False) -> Line | None:
    """Line ``number`` as a lead (None when blank). Raises BadLine."""
    if not text.strip():
        return None
    value = _json(text, number)
    lead = {"payload": value} if payloads else _lead(value, number)
    why = _payload_fault(lead["payload"])
    if why is not None:
        raise BadLine(number, f"the payload {why}" if payloads else f"payload {why}")
    wire = json.dumps(lead, ensure_ascii=False, separators=(",", ":"))
    return Line(number, lead, len(wire.encode("utf-8")))


def read_all(lines: Iterable[str], *, payloads: bool = False) -> list[Line]:
    """Every line read and checked before anything is sent. Raises BadLine for the first
    bad one, saying how many more there are."""
    read_lines: list[Line] = []
    first: BadLine | None = None
    more = 0
    for number, text in enumerate(lines, start=1):
        try:
            line = read(text, number, payloads=payloads)
        except BadLine as exc:
            if first is None:
                first = exc
            else:
                more += 1
            continue
        if line is not None and first is None:
            read_lines.append(line)
    if first is not None:
        after = f" ({more} more bad {'line' if more == 1 else 'lines'} after it)" if more else ""
        raise BadLine(first.number, f"{first.why}{after}")
    return read_lines


class Packer:
    """Lines packed into calls of at most MAX_PUSH_BATCH leads and ``max_bytes`` of body, the
    client's own packing, so each call is one request of the client: atomic. A lead bigger
    than that goes alone (for the service to refuse)."""

    def __init__(self, max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> None:
        self.max_bytes = max_bytes
        self.call: list[Line] = []
        self._size = _ENVELOPE

    def fits(self, line: Line) -> bool:
        """Whether ``line`` may join the call being packed."""
        if not self.call:
            return True
        return len(self.call) < MAX_PUSH_BATCH and self._size + 1 + line.size <= self.max_bytes

    def add(self, line: Line) -> None:
        self._size += line.size + (1 if self.call else 0)  # the comma before it
        self.call.append(line)

    def take(self) -> list[Line]:
        """The call packed so far; the next one starts empty."""
        call, self.call, self._size = self.call, [], _ENVELOPE
        return call


def batches(lines: Iterable[Line], max_bytes: int = DEFAULT_MAX_BODY_BYTES) -> Iterator[list[Line]]:
    """The lines in calls packed by ``Packer``."""
    packer = Packer(max_bytes)
    for line in lines:
        if not packer.fits(line):
            yield packer.take()
        packer.add(line)
    if packer.call:
        yield packer.take()


def _json(text: str, number: int) -> Any:
    """The line's JSON value: strict (no NaN, no number beyond a double, no name given twice,
    as I-JSON). Raises BadLine."""
    try:
        return json.loads(
            text,
            object_pairs_hook=_unique_names,
            parse_constant=_no_constant,
            parse_float=_finite,
        )
    except (ValueError, RecursionError) as exc:
        raise BadLine(number, f"not JSON ({exc})") from None


def _unique_names(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names: dict[str, Any] = {}
    for name, value in pairs:
        if name in names:
            raise ValueError(f"the name {name!r} appears twice in one object")
        names[name] = value
    return names


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite(text: str) -> float:
    """A number with a fraction or an exponent, refused beyond a double's range (as the
    service refuses it), not read as an infinity the line could not be sent with."""
    value = float(text)
    if not math.isfinite(value):
        shown = text if len(text) <= 20 else f"{text[:20]}... ({len(text)} characters)"
        raise ValueError(f"{shown} is a number beyond the range of a double")
    return value


def _lead(value: Any, number: int) -> dict[str, Any]:
    """``value`` checked to be a lead. Raises BadLine."""
    if not isinstance(value, dict):
        raise BadLine(number, f"a lead is a JSON object, not {_kind(value)} ({PAYLOADS_HINT})")
    if "payload" not in value:
        raise BadLine(number, f'a lead needs "payload" ({PAYLOADS_HINT})')
    unknown = [name for name in value if name not in LEAD_FIELDS]
    if unknown:
        known = ", ".join(LEAD_FIELDS)
        raise BadLine(number, f"{unknown[0]!r} is not a field of a lead ({known}; {PAYLOADS_HINT})")
    for name, check in _FIELDS.items():
        if name in value and (why := check(value[name])) is not None:
            raise BadLine(number, f"{name} {why}")
    return value


def _integer(low: int, high: int, *, nullable: bool = False) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, float) and value.is_integer():
            value = int(value)  # JSON has one number type: 5.0 is 5, as the service reads it
        return integer_fault(value, low=low, high=high, nullable=nullable)

    return check


def _delay(value: Any) -> str | None:
    return number_fault(value, low=0, high=MAX_DELAY_S, what="a number of seconds")


def _key(value: Any) -> str | None:
    return text_fault(value, max_chars=MAX_KEY_CHARS, nullable=True)


_FIELDS: dict[str, Callable[[Any], str | None]] = {
    "priority": _integer(-INT32_MAX - 1, INT32_MAX),
    "key": _key,
    "depth": _integer(0, INT32_MAX),
    "parent_id": _integer(1, MAX_LEAD_ID, nullable=True),
    "max_attempts": _integer(1, MAX_ATTEMPTS, nullable=True),
    "delay_s": _delay,
    "traceparent": traceparent_fault,
}


def _payload_fault(value: Any) -> str | None:
    """Why ``value`` cannot be a payload (None when it can): an object jsonb can hold."""
    if not isinstance(value, dict):
        return f"must be a JSON object, not {_kind(value)}"
    return json_fault(value)


def _kind(value: Any) -> str:
    """A JSON value's kind as JSON names it: ``a string``, ``an array``, ``null``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    return "a string" if isinstance(value, str) else "an array"
