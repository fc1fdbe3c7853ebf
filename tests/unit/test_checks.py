"""The checks the service and ``leaseq push`` share (``leaseq.checks``): one answer, one wording.

``leaseq push`` judges each line before anything is sent, without the server installed;
the service judges the same values again. Both say why in the same words, so a line the
CLI lets through is one the service takes, and a refusal reads the same from either.
"""

from __future__ import annotations

from typing import Any

import pytest

from app.domain import validation
from leaseq import checks
from leaseq.cli import lines
from leaseq.errors import InvalidInput
from leaseq.limits import INT32_MAX, MAX_DELAY_S, MAX_JSON_DEPTH, MAX_KEY_CHARS


def nested(depth: int) -> Any:
    value: Any = {}
    for _ in range(depth - 1):
        value = [value]
    return value


HOSTILE_JSON = {
    "NUL in a string": {"a": "\x00"},
    "NUL in a key": {"\x00": 1},
    "a lone surrogate": {"a": ["\ud800"]},
    "a key that is not a string": {1: "a"},
    "one level too deep": nested(MAX_JSON_DEPTH + 1),
    "far too deep": nested(100_000),
}


@pytest.mark.parametrize("value", HOSTILE_JSON.values(), ids=HOSTILE_JSON)
def test_hostile_json_is_refused_in_the_services_words(value: Any) -> None:
    why = checks.json_fault(value)
    assert why is not None and why.startswith("must ")
    with pytest.raises(InvalidInput) as refused:
        validation.json_shape("payload", value)
    assert str(refused.value) == f"payload: {why}"


@pytest.mark.parametrize(
    "value", [{}, nested(MAX_JSON_DEPTH), {"a": "é😀", "b": [1, 2.5, None, True]}]
)
def test_json_jsonb_holds_passes(value: Any) -> None:
    assert checks.json_fault(value) is None
    validation.json_shape("payload", value)


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (True, "must be an integer from 1 to 10"),
        (0, "must be an integer from 1 to 10"),
        (11, "must be an integer from 1 to 10"),
        (2.0, "must be an integer from 1 to 10"),
        ("3", "must be an integer from 1 to 10"),
        (1, None),
        (10, None),
    ],
)
def test_integer(value: Any, why: str | None) -> None:
    assert checks.integer_fault(value, low=1, high=10) == why
    if why is None:
        assert validation.integer("n", value, low=1, high=10) == value
    else:
        with pytest.raises(InvalidInput, match=f"^n: {why}$"):
            validation.integer("n", value, low=1, high=10)


def test_null_passes_only_where_it_may() -> None:
    assert checks.integer_fault(None, low=1, high=2, nullable=True) is None
    assert checks.integer_fault(None, low=1, high=2) == "must be an integer from 1 to 2"
    assert checks.text_fault(None, max_chars=3, nullable=True) is None
    assert checks.text_fault(None, max_chars=3) is not None


@pytest.mark.parametrize("value", [-1, float("nan"), float("inf"), MAX_DELAY_S + 1, False, "1"])
def test_a_delay_out_of_range_is_refused_as_the_service_refuses_it(value: Any) -> None:
    why = checks.number_fault(value, low=0, high=MAX_DELAY_S, what="a number of seconds")
    assert why == f"must be a number of seconds ≥ 0 and ≤ {MAX_DELAY_S:g}"
    with pytest.raises(InvalidInput, match=r"^delay_s: must be a number of seconds"):
        validation.delay(value)


def test_a_bound_may_be_exclusive() -> None:
    assert (
        checks.number_fault(0, low=0, high=1, low_inclusive=False) == "must be a number > 0 and ≤ 1"
    )
    assert checks.number_fault(0.5, low=0, high=1, low_inclusive=False) is None


@pytest.mark.parametrize("value", ["", "x" * (MAX_KEY_CHARS + 1), "a\x00", "\udfff", 5])
def test_text_out_of_its_bounds_is_refused(value: Any) -> None:
    why = checks.text_fault(value, max_chars=MAX_KEY_CHARS)
    assert why == (
        f"must be a string of 1 to {MAX_KEY_CHARS} characters without NUL or lone surrogates"
    )
    with pytest.raises(InvalidInput, match=f"^key: {why}$"):
        validation.text("key", value, max_chars=MAX_KEY_CHARS)


# -- leaseq push's lines, judged by the same checks -----------------------------------------


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"payload": {"a": "\\u0000"}}', "payload must not contain NUL characters"),
        ('{"payload": {"a": "\\ud800"}}', "payload must not contain NUL characters"),
        (
            f'{{"payload": {{"a": {"[" * MAX_JSON_DEPTH}{"]" * MAX_JSON_DEPTH}}}}}',
            "payload must not nest",
        ),
        ('{"payload": {}, "priority": true}', "priority must be an integer from"),
        (f'{{"payload": {{}}, "depth": {INT32_MAX + 1}}}', "depth must be an integer from 0"),
        ('{"payload": {}, "max_attempts": 0}', "max_attempts must be an integer from 1"),
        ('{"payload": {}, "delay_s": -1}', "delay_s must be a number of seconds ≥ 0"),
        ('{"payload": {}, "key": ""}', "key must be a string of 1 to 512 characters"),
    ],
)
def test_a_bad_line_says_what_the_service_would(line: str, why: str) -> None:
    with pytest.raises(lines.BadLine, match=f"^line 7: {why}"):
        lines.read(line, 7)


def test_a_whole_float_is_an_integer_as_the_service_reads_it() -> None:
    line = lines.read('{"payload": {}, "priority": 5.0, "parent_id": null, "key": null}', 1)
    assert line is not None and line.lead["priority"] == 5.0
