"""Which tests a run takes: ``python -m pytest`` leaves out the slow ones and says so."""

from __future__ import annotations

import subprocess
import sys

from tests.support.serving import ROOT, child_env

SLOW_TEST = "tests/integration/test_state_machine.py::test_lease_state_machine"


def collect(*args: str) -> list[str]:
    """The output lines of pytest collecting ``SLOW_TEST`` (nothing runs)."""
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert run.returncode in (0, 5), run.stdout + run.stderr  # 5: every test deselected
    return run.stdout.splitlines()


def test_by_default_slow_tests_are_left_out_and_the_run_says_so() -> None:
    lines = collect(SLOW_TEST)
    assert "slow tests: left out (add --run-slow to run them too)" in lines
    assert "1 slow test left out (deselected): python -m pytest --run-slow runs them" in lines
    assert "1 deselected" in lines[-1]


def test_run_slow_takes_them() -> None:
    lines = collect("--run-slow", SLOW_TEST)
    assert "slow tests: included" in lines
    assert any("test_lease_state_machine" in line for line in lines)
    assert "1 test collected" in lines[-1] and "deselected" not in lines[-1], lines[-1]
