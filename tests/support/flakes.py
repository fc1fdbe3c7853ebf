"""The flake finder: run a selection of tests N times and name each test that failed in any run.

    python -m tests.support.flakes --runs 5                      # the default suite, 5 times
    python -m tests.support.flakes --runs 20 tests/api/test_long_poll.py::test_x
    python -m tests.support.flakes --runs 3 -- --run-slow tests/deploy -x

Everything after the options (or after ``--``) goes to ``python -m pytest`` as it is. Each
run is a pytest process of its own, so a test that fails only after another one, or only
when the machine is busy, gets its chances too; the results are read from each run's JUnit
XML. A test that failed once is a flake until its cause is found: the exit status is 1 when
any test failed in any run (or a run ended without its report), else 0. A test that passed
three runs is not proven, so run a new or touched test ``--runs 20`` before landing it.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def failures(report: Path) -> tuple[int, list[str]]:
    """How many tests a run's JUnit XML counts, and the ids of those that failed or erred."""
    root = ET.parse(report).getroot()
    cases = list(root.iter("testcase"))
    failed = []
    for case in cases:
        if case.find("failure") is not None or case.find("error") is not None:
            failed.append(node_id(case))
    return len(cases), failed


def node_id(case: ET.Element) -> str:
    """pytest's id of a test case (the xunit1 family names its file)."""
    file, classname, name = case.get("file", ""), case.get("classname", ""), case.get("name")
    module = file.removesuffix(".py").replace("/", ".")
    inner = classname.removeprefix(module).lstrip(".")
    return "::".join(part for part in (file, inner.replace(".", "::"), name) if part)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.support.flakes",
        description="Run pytest N times; name each test that failed in any run.",
    )
    parser.add_argument("--runs", type=int, default=5, help="how many runs (default 5)")
    options, pytest_args = parser.parse_known_args(argv)
    if pytest_args[:1] == ["--"]:
        pytest_args = pytest_args[1:]
    failed_in: dict[str, list[int]] = defaultdict(list)
    broken: list[int] = []
    with tempfile.TemporaryDirectory(prefix="leaseq-flakes-") as folder:
        for run in range(1, options.runs + 1):
            report = Path(folder) / f"run-{run}.xml"
            began = time.monotonic()
            junit = [f"--junitxml={report}", "-o", "junit_family=xunit1"]
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pytest",
                    "-q",
                    "-p",
                    "no:cacheprovider",
                    *junit,
                    *pytest_args,
                ],
                cwd=ROOT,
                check=False,
            )
            took = time.monotonic() - began
            if not report.exists():
                broken.append(run)
                print(f"flakes: run {run}: no report (pytest exit {done.returncode})", flush=True)
                continue
            count, failed = failures(report)
            for test in failed:
                failed_in[test].append(run)
            print(
                f"flakes: run {run}/{options.runs}: {count} tests, {len(failed)} failed, "
                f"{took:.0f} s (pytest exit {done.returncode})",
                flush=True,
            )
    print(f"\nflakes: {options.runs} runs of: pytest {' '.join(pytest_args) or '(default)'}")
    for test, runs in sorted(failed_in.items()):
        print(f"FAILED in {len(runs)}/{options.runs} runs ({', '.join(map(str, runs))}): {test}")
    if broken:
        print(f"runs without a report: {', '.join(map(str, broken))}")
    if not failed_in and not broken:
        print("no test failed in any run")
    return 1 if failed_in or broken else 0


if __name__ == "__main__":
    sys.exit(main())
