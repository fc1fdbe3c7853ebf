"""Which tests a run takes: ``python -m pytest`` leaves out the slow ones and the tiers outside
the default, and says so."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support import processes
from tests.support.serving import ROOT, child_env

pytestmark = pytest.mark.service

SLOW_TEST = "tests/integration/test_state_machine.py::test_lease_state_machine"


def collect(*args: str) -> list[str]:
    """The output lines of pytest collecting ``SLOW_TEST`` (nothing runs)."""
    processes.starting("pytest")
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=300,  # a deadline: collecting takes seconds
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


# A run given no paths takes ``testpaths``: small files stand in for the whole of tests/, one
# of a default tier, one of another, and one of a default tier that drives Node (``tools``).
TWO_TIERS = [
    "-o",
    "testpaths=tests/unit/test_tiers.py tests/deploy/test_compose.py tests/api/test_openapi.py",
]


def test_a_run_given_no_paths_takes_the_default_tiers_and_counts_the_others() -> None:
    header = "tiers: unit, integration, api, less the tests of tools and of processes"
    assert f"{header} (name a path, or add --run-slow for every test)" in collect(*TWO_TIERS)
    lines = collect("-q", *TWO_TIERS)
    counted = "tests of other tiers, tools or processes left out"
    [left_out] = [line for line in lines if counted in line]
    assert "(deselected: deploy " in left_out and ", tools 2)" in left_out, left_out
    taken = {line.split("::")[0] for line in lines if line.startswith("tests/")}
    assert taken == {"tests/unit/test_tiers.py", "tests/api/test_openapi.py"}
    assert not any("typescript" in line or "redocly" in line for line in lines)


def test_a_named_tier_runs_and_run_slow_takes_every_tier() -> None:
    named = collect("-q", "tests/deploy/test_compose.py")
    assert not any("tiers:" in line or "other tiers" in line for line in named)
    assert any(line.startswith("tests/deploy/test_compose.py::") for line in named)
    every = collect("-q", "--run-slow", *TWO_TIERS)
    taken = {line.split("::")[0] for line in every if line.startswith("tests/")}
    assert taken == {
        "tests/unit/test_tiers.py",
        "tests/deploy/test_compose.py",
        "tests/api/test_openapi.py",
    }
    assert any("typescript" in line for line in every)


def test_default_elsewhere_leaves_out_what_the_readme_command_runs_of_that_tier() -> None:
    """CI's run beside the README's command: of tests/api only what that command leaves out."""
    readme = collect("-q", *TWO_TIERS)
    beside = collect("-q", "--run-slow", "--default-elsewhere", "api", *TWO_TIERS)
    every = collect("-q", "--run-slow", *TWO_TIERS)

    def api(lines: list[str]) -> set[str]:
        return {line for line in lines if line.startswith("tests/api/")}

    assert api(readme) and api(beside)
    assert api(readme) | api(beside) == api(every)
    assert api(readme) & api(beside) == set()
    assert all("typescript" in line or "redocly" in line for line in api(beside)), api(beside)
    others = {line for line in every if line.startswith("tests/") and line not in api(every)}
    assert others and others <= set(beside)  # the other tiers keep every test
