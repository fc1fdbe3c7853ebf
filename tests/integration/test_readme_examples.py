"""The README's examples run as pasted against a real ``leaseq serve``, and print what it says.

The README (and the Python client's, whose first example a newcomer pastes first) shows
each example against the service its quick start starts, ``http://127.0.0.1:8000``; here
that address becomes the test's own service, on a fresh database, and nothing else changes.
A ``# →`` line under a command is what it prints: the lines a block prints are its ``# →``
lines, in order, ``…`` standing for anything (a token, an instant). Every ``sh`` block of
the README either runs here (it calls the service) or is one of the setup commands .ci/run
itself runs (a virtualenv, pip, pytest, mkdocs).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.serving import Service, Services, child_env
from tests.support.system import CURL, JQ, need

pytestmark = pytest.mark.service

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
CLIENT_README = ROOT / "clients" / "python" / "README.md"
PYTHON_TUTORIAL = ROOT / "docs" / "tutorials" / "python.md"
QUICK_START_URL = "http://127.0.0.1:8000"
FENCE = re.compile(r"^```(\w+)\n(.*?)^```$", re.MULTILINE | re.DOTALL)
SHOWN = "# → "
# What the quick start and development blocks run, which .ci/run runs the same way.
SETUP = re.compile(r"^(python3 -m venv|\.venv/bin/(pip|mkdocs|python -m pytest)|\. \.venv)")
RUN_TIMEOUT_S = 60


def blocks(readme: Path, language: str) -> list[tuple[int, str]]:
    """The fenced blocks of ``language`` in ``readme``, with the line each starts on."""
    text = readme.read_text()
    return [
        (text.count("\n", 0, found.start()) + 1, found[2])
        for found in FENCE.finditer(text)
        if found[1] == language
    ]


def shown(code: str) -> list[str]:
    """What the block says it prints: its ``# →`` lines."""
    return [
        line.strip()[len(SHOWN) :] for line in code.splitlines() if line.strip().startswith(SHOWN)
    ]


def matches(printed: str, expected: str) -> bool:
    """``printed`` is ``expected``, each ``…`` of it standing for any text."""
    pattern = ".*".join(re.escape(part) for part in expected.split("…"))
    return re.fullmatch(pattern, printed) is not None


def check(where: str, code: str, run: subprocess.CompletedProcess[str]) -> None:
    assert run.returncode == 0, f"{where} failed ({run.returncode}):\n{run.stdout}\n{run.stderr}"
    printed = run.stdout.splitlines()
    expected = shown(code)
    assert len(printed) == len(expected) and all(map(matches, printed, expected)), (
        f"{where} printed\n{run.stdout}\nand says it prints\n" + "\n".join(expected)
    )


@pytest.fixture
def service(services: Services, database_url: str) -> Service:
    return services.start(database_url=database_url)


def as_pasted(code: str, service: Service) -> str:
    """The block against the test's service: its address is the one thing changed."""
    assert QUICK_START_URL in code
    return code.replace(QUICK_START_URL, service.url)


def run_python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=ROOT,
        timeout=RUN_TIMEOUT_S,
        check=False,
    )


def test_the_readme_is_read_in_ten_minutes() -> None:
    lines = README.read_text().count("\n")
    assert lines <= 250, f"README.md has {lines} lines: move what is not the front door to docs/"


def test_every_sh_block_runs_here_or_is_a_setup_command() -> None:
    for line, code in blocks(README, "sh"):
        if QUICK_START_URL in code:
            continue
        commands = [c for c in code.splitlines() if c.strip() and not c.startswith("#")]
        assert all(SETUP.match(c) for c in commands), f"README.md:{line} runs nowhere"


def test_the_curl_life_runs_as_pasted(service: Service, tmp_path: Path) -> None:
    need(CURL)
    need(JQ)
    [(line, code)] = [(n, c) for n, c in blocks(README, "sh") if QUICK_START_URL in c]
    script = tmp_path / "life.sh"
    script.write_text("set -euo pipefail\n" + as_pasted(code, service))
    run = subprocess.run(
        ["bash", str(script)],
        capture_output=True,
        text=True,
        env=child_env(),
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    check(f"README.md:{line}", code, run)


def test_the_sdk_examples_run_as_pasted(service: Service) -> None:
    found = blocks(README, "python")
    assert len(found) == 2, "the README's SDK examples: the Client by hand, then a Worker"
    for line, code in found:
        check(f"README.md:{line}", code, run_python(as_pasted(code, service)))


def test_the_python_clients_first_example_runs_as_pasted(service: Service) -> None:
    [(line, code), *_] = blocks(CLIENT_README, "python")
    run = run_python(as_pasted(code, service))
    assert run.returncode == 0, f"clients/python/README.md:{line}:\n{run.stdout}\n{run.stderr}"
    assert run.stdout.splitlines() == ["done: 1"]


def in_order(printed: str, expected: list[str]) -> bool:
    """Each line of ``expected`` matches a line of ``printed``, in order (others between)."""
    lines = iter(printed.splitlines())
    return all(any(matches(line, want) for line in lines) for want in expected)


def test_the_python_tutorial_runs_as_pasted(service: Service, tmp_path: Path) -> None:
    """docs/tutorials/python.md, block by block in one folder, as a newcomer pastes it: the
    ``leaseq`` command and ``python`` of this environment, ``LEASEQ_URL`` naming the service
    (the quick start's address is the command's default)."""
    text = PYTHON_TUTORIAL.read_text()
    found = [
        (text.count("\n", 0, match.start()) + 1, match[1], match[2])
        for match in FENCE.finditer(text)
        if match[1] in ("sh", "python")
    ]
    assert [language for _, language, _ in found].count("sh") >= 4
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = child_env({"LEASEQ_URL": service.url, "PATH": path})
    for line, language, code in found:
        if language == "python":
            command = [sys.executable, "-c", code.replace(QUICK_START_URL, service.url)]
        else:
            command = ["bash", "-c", "set -euo pipefail\n" + code]
        run = subprocess.run(
            command,
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=RUN_TIMEOUT_S,
            check=False,
        )
        where = f"docs/tutorials/python.md:{line}"
        assert run.returncode == 0, f"{where} failed:\n{run.stdout}\n{run.stderr}"
        assert in_order(run.stdout, shown(code)), f"{where} printed\n{run.stdout}"
