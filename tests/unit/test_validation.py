"""The service's input checks (``app.domain.validation``, the API's request models), without a
database.

The same refusals through the queue, with nothing written, are tests/integration/test_validation.py.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from pydantic import ValidationError

from app.api.schemas import CompleteIn, LeaseIn, PushIn, SweepIn
from app.domain import validation
from leaseq.errors import InvalidInput
from leaseq.limits import (
    MAX_ERROR_CHARS,
    MAX_ITEM_BATCH,
    MAX_JSON_DEPTH,
    MAX_LEASE_BATCH,
    MAX_OWNER_CHARS,
    MAX_PUSH_BATCH,
    MAX_TTL_S,
)
from leaseq.model import FINAL_STATUSES, STATUSES

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("good", ["s", "crawl-2026.01:eu_west", "A" * 128, "0"])
def test_a_session_name_matches_the_pattern(good: str) -> None:
    assert validation.session(good) == good


@pytest.mark.parametrize("bad", ["", "-s", "a b", "a/b", "é", "A" * 129, None, 5])
def test_a_bad_session_name_is_refused(bad: Any) -> None:
    with pytest.raises(InvalidInput, match=r"^session: must match"):
        validation.session(bad)


@pytest.mark.parametrize("bad", [True, 1.0, "1", None, 0, MAX_LEASE_BATCH + 1])
def test_an_integer_is_an_int_in_its_range(bad: Any) -> None:
    with pytest.raises(InvalidInput) as refused:
        validation.lease_max(bad)
    assert refused.value.field == "max"
    assert validation.lease_max(MAX_LEASE_BATCH) == MAX_LEASE_BATCH


@pytest.mark.parametrize("bad", [0, -1, NAN, INF, True, "60", MAX_TTL_S + 1])
def test_a_ttl_is_a_finite_positive_number_of_seconds(bad: Any) -> None:
    with pytest.raises(InvalidInput, match=r"^ttl_s: "):
        validation.ttl(bad)
    assert validation.ttl(0.5) == 0.5 and validation.ttl(MAX_TTL_S) == MAX_TTL_S


def test_json_is_what_jsonb_stores_within_the_byte_limit() -> None:
    assert validation.json_text("result", {"a": [1, "é"]}) == '{"a":[1,"\\u00e9"]}'
    for bad in ({"x": NAN}, {"x": INF}, {"x": object()}, {"x": "nul\x00"}):
        with pytest.raises(InvalidInput, match=r"^result: "):
            validation.json_text("result", bad)
    # Every non-ASCII character is escaped: the limit counts bytes, the same everywhere.
    assert validation.json_text("p", {"s": "é" * 2}, max_bytes=20)  # {"s":"\u00e9\u00e9"}
    with pytest.raises(InvalidInput, match="at most 19 bytes"):
        validation.json_text("p", {"s": "é" * 2}, max_bytes=19)


def test_a_payload_is_an_object() -> None:
    with pytest.raises(InvalidInput, match=r"^leads\[3\]\.payload: must be a JSON object"):
        validation.payload([1], "leads[3].payload")


def test_batches_are_bounded_by_the_wire_limits() -> None:
    validation.push_batch([{}] * MAX_PUSH_BATCH)
    validation.item_batch([{}] * MAX_ITEM_BATCH)
    for check, limit in ((validation.push_batch, MAX_PUSH_BATCH), (validation.item_batch, 100)):
        for bad in ([], [{}] * (limit + 1), "not a list"):
            with pytest.raises(InvalidInput):
                check(bad)


def test_text_refuses_nul_and_the_empty_string_and_knows_its_limit() -> None:
    assert validation.owner("w" * MAX_OWNER_CHARS)
    for bad in ("", "w" * (MAX_OWNER_CHARS + 1), "a\x00b", None):
        with pytest.raises(InvalidInput, match=r"^owner: "):
            validation.owner(bad)
    error = "e" * MAX_ERROR_CHARS
    assert validation.text("error", error, max_chars=MAX_ERROR_CHARS) == error


def test_the_status_lists_come_from_the_model() -> None:
    assert STATUSES == ("queued", "leased", "done", "failed", "cached")
    assert FINAL_STATUSES == ("done", "failed", "cached")
    for status in FINAL_STATUSES:
        assert validation.final_status(status) == status
    with pytest.raises(InvalidInput, match="must be one of done, failed, cached"):
        validation.final_status("leased")


# -- the API's request models: strict, and bounded as docs/contract.md#limits says -------


def test_a_request_is_strict_and_a_whole_float_is_an_integer() -> None:
    assert LeaseIn.model_validate({"session": "s", "owner": "w", "max": 5.0}).max == 5
    for bad in (
        {"session": "s", "owner": "w", "max": "5"},
        {"session": "s", "owner": "w", "max": 5.5},
        {"session": "s", "owner": "w", "ttl_s": NAN},
        {"session": "s", "owner": "w", "surprise": 1},
        {"session": "s", "owner": "w", "wait_s": 31},
        {"session": "s", "owner": "w", "ttl_s": 0.5},
    ):
        with pytest.raises(ValidationError):
            LeaseIn.model_validate(bad)


def test_push_complete_and_sweep_bodies_hold_their_limits() -> None:
    with pytest.raises(ValidationError):
        PushIn.model_validate({"leads": [{"payload": {}}] * (MAX_PUSH_BATCH + 1)})
    with pytest.raises(ValidationError):
        too_long = "e" * (MAX_ERROR_CHARS + 1)
        CompleteIn.model_validate({"lead_id": 1, "token": "t", "error": too_long})
    with pytest.raises(ValidationError):
        CompleteIn.model_validate({"lead_id": 1, "token": "t", "status": "leased"})
    assert SweepIn.model_validate({"all": True}).all_
    for bad in ({}, {"session": "s", "all": True}):
        with pytest.raises(ValidationError):
            SweepIn.model_validate(bad)


def test_the_text_backslash_u0000_is_not_a_nul() -> None:
    assert validation.json_text("p", {"a": "\\u0000"}) == '{"a":"\\\\u0000"}'
    validation.text("error", "\\u0000", max_chars=10)


@pytest.mark.parametrize("bad", ["\ud800", "a\udfffb", "\ud83d\ude00"])
def test_a_lone_surrogate_is_refused_in_text_and_json(bad: str) -> None:
    for value in ({"s": bad}, {bad: 1}, [bad], bad):
        with pytest.raises(InvalidInput, match="lone surrogates"):
            validation.json_text("result", value)
    with pytest.raises(InvalidInput, match="lone surrogates"):
        validation.text("error", bad, max_chars=10)
    assert validation.json_text("r", "😀") == '"\\ud83d\\ude00"'  # a pair, joined, is fine


def _nested(depth: int) -> Any:
    value: Any = "leaf"
    for level in range(depth):
        value = [value] if level % 2 else {"k": value}
    return value


def test_json_nests_at_most_max_json_depth_levels() -> None:
    validation.json_text("result", _nested(MAX_JSON_DEPTH))
    for depth in (MAX_JSON_DEPTH + 1, 300, 100_000):
        with pytest.raises(InvalidInput, match=f"deeper than {MAX_JSON_DEPTH}"):
            validation.json_text("result", _nested(depth))


def test_object_keys_are_strings() -> None:
    with pytest.raises(InvalidInput, match="keys"):
        validation.json_text("result", {1: "a"})
