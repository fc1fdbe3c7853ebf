"""The problem codes are one table (``app.api.problems.CODES``), shared by service and client."""

from __future__ import annotations

from app.api import problems
from leaseq import errors


def test_every_code_the_client_knows_has_its_status_and_title_in_the_one_table() -> None:
    assert set(errors.BY_CODE) <= set(problems.CODES)


def test_a_framework_error_gets_the_one_code_marked_for_its_status() -> None:
    assert problems.CODE_BY_STATUS[409] == "conflict"  # never lease_lost: no lease was judged
    assert problems.CODE_BY_STATUS[405] == "method_not_allowed"
    assert 400 not in problems.CODE_BY_STATUS and 500 not in problems.CODE_BY_STATUS
    statuses = [code.status for code in problems.CODES.values() if code.for_status]
    assert len(statuses) == len(set(statuses))


def test_an_answer_carries_the_title_of_its_code() -> None:
    answer = problems.problem(400, "incomplete_body", "cut short")
    assert b'"title":"Incomplete body"' in answer.body
