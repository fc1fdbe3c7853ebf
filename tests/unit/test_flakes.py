"""The flake finder (tests/support/flakes.py) names a failed test by the id pytest takes back."""

from __future__ import annotations

from pathlib import Path

from tests.support.flakes import failures

MODULE = "tests.api.test_long_poll"
FILE = "tests/api/test_long_poll.py"


def case(classname: str, name: str, inside: str = "") -> str:
    return f'<testcase classname="{classname}" name="{name}" file="{FILE}">{inside}</testcase>'


REPORT = "".join(
    [
        '<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest">',
        case(MODULE, "test_ok"),
        case(MODULE, "test_bad[a-1]", '<failure message="assert 1 == 2">...</failure>'),
        case(f"{MODULE}.TestThing", "test_err", '<error message="fixture">...</error>'),
        case(MODULE, "test_skip", '<skipped message="no npm"/>'),
        "</testsuite></testsuites>",
    ]
)


def test_a_runs_failures_and_errors_are_named_by_their_pytest_ids(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(REPORT)
    assert failures(report) == (4, [f"{FILE}::test_bad[a-1]", f"{FILE}::TestThing::test_err"])
