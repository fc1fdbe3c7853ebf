"""The flake finder (tests/support/flakes.py) names a failed test by the id pytest takes back."""

from __future__ import annotations

from pathlib import Path

from tests.support.flakes import failures

REPORT = """<?xml version="1.0" encoding="utf-8"?>
<testsuites><testsuite name="pytest" tests="4">
<testcase classname="tests.api.test_x" name="test_ok" file="tests/api/test_x.py" line="3"/>
<testcase classname="tests.api.test_x" name="test_bad[a-1]" file="tests/api/test_x.py" line="9">
<failure message="assert 1 == 2">...</failure></testcase>
<testcase classname="tests.api.test_x.TestThing" name="test_err" file="tests/api/test_x.py">
<error message="fixture">...</error></testcase>
<testcase classname="tests.api.test_x" name="test_skip" file="tests/api/test_x.py">
<skipped message="no npm"/></testcase>
</testsuite></testsuites>
"""


def test_a_runs_failures_and_errors_are_named_by_their_pytest_ids(tmp_path: Path) -> None:
    report = tmp_path / "run.xml"
    report.write_text(REPORT)
    assert failures(report) == (
        4,
        ["tests/api/test_x.py::test_bad[a-1]", "tests/api/test_x.py::TestThing::test_err"],
    )
