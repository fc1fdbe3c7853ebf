"""Without Chromium, PgBouncer or Go their tests skip with one line, or fail under CI's switch.

Runs pytest in a subprocess on one PgBouncer test, one browser test and one Go test, with
``LEASEQ_TEST_PATH`` pointing at an empty folder (a PATH that lacks the three
programs, and no sbin fallback), and reads the reasons in its short summary
(``-rsE``: skips and errors).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import system
from tests.support.serving import ROOT, child_env

NEEDS_PGBOUNCER = (
    "tests/deploy/test_pgbouncer.py::test_the_tests_pooler_lets_no_other_user_reach_the_server"
)
NEEDS_CHROMIUM = (
    "tests/api/test_dashboard_browser.py::"
    "test_the_page_shows_the_autovacuum_warning_when_the_server_says_off"
)
NEEDS_GO = "tests/clients/test_go.py::test_the_client_is_gofmt_and_go_vet_clean"
TIMEOUT_S = 120


def pytest_without_programs(
    tmp_path: Path, server_url: str, *, require: bool
) -> subprocess.CompletedProcess[str]:
    nowhere = tmp_path / "empty-path"
    nowhere.mkdir()
    env = child_env({"LEASEQ_TEST_DATABASE_URL": server_url, system.PATH_ENV: str(nowhere)})
    if require:
        env[system.REQUIRE_ENV] = "1"
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-rsE",
            "-p",
            "no:cacheprovider",
            NEEDS_PGBOUNCER,
            NEEDS_CHROMIUM,
            NEEDS_GO,
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )


def skip_reasons(output: str) -> list[str]:
    """The reasons of the summary's SKIPPED lines (``SKIPPED [1] file:line: reason``)."""
    return sorted(
        line.split(": ", 1)[1] for line in output.splitlines() if line.startswith("SKIPPED ")
    )


def test_without_the_programs_their_tests_skip_saying_what_to_install(
    tmp_path: Path, server_url: str
) -> None:
    run = pytest_without_programs(tmp_path, server_url, require=False)
    assert run.returncode == pytest.ExitCode.OK, run.stdout + run.stderr
    assert skip_reasons(run.stdout) == [
        "chromium is not installed: apt-get install -y chromium",
        "go is not installed: apt-get install -y golang-go",
        "pgbouncer is not installed: apt-get install -y pgbouncer",
    ], run.stdout
    assert "3 skipped" in run.stdout.splitlines()[-1]


def test_with_the_switch_on_a_missing_program_fails_the_test(
    tmp_path: Path, server_url: str
) -> None:
    run = pytest_without_programs(tmp_path, server_url, require=True)
    assert run.returncode == pytest.ExitCode.TESTS_FAILED, run.stdout + run.stderr
    lines = run.stdout.splitlines()
    switch = f"({system.REQUIRE_ENV}=1)"
    for program, package in (
        ("chromium", "chromium"),
        ("pgbouncer", "pgbouncer"),
        ("go", "golang-go"),
    ):
        assert f"{program} is not installed: apt-get install -y {package} {switch}" in lines
    assert {line.split()[1] for line in lines if line.startswith("ERROR ")} == {
        NEEDS_PGBOUNCER,
        NEEDS_CHROMIUM,
        NEEDS_GO,
    }, run.stdout
    assert "3 errors" in lines[-1] and "skipped" not in lines[-1], lines[-1]
