"""The Go client (clients/go) checked and tested by Go's own tools, against a real
``leaseq serve`` that the test starts: ``gofmt``, ``go vet``, ``go test ./...`` (its unit
tests, and its integration tests, which read ``LEASEQ_TEST_URL``), and the README's example
run as written. Without Go each test skips with one line saying how to get it.
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from tests.support import system
from tests.support.golang import CLIENT, GO_TOOL, go_env
from tests.support.serving import Service, Services, child_env

GO_TIMEOUT_S = 900.0
MODULE = "github.com/leaseq/leaseq/clients/go"
# The fence keys the service signs with, for the client's tests to verify leases' fences.
FENCE_KEYS = "k-go-test-new,k-go-test-old"
SERVE_ENV = {"LEASEQ_FENCE_KEYS": FENCE_KEYS, "LEASEQ_SWEEP_INTERVAL_S": "1"}


@pytest.fixture(scope="module")
def go() -> str:
    return system.need(GO_TOOL)


@pytest.fixture(scope="session")
def go_folder(build_folder: Path) -> Path:
    """Go's caches, shared with the conformance worker's build: filled once per run."""
    return build_folder / "go"


def run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` with ``env`` added to the tests' environment; fail unless it exits 0."""
    done = subprocess.run(
        argv,
        cwd=cwd,
        env=child_env(env),
        capture_output=True,
        text=True,
        timeout=GO_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, f"{' '.join(argv)}:\n{done.stdout[-6000:]}{done.stderr[-4000:]}"
    return done


@pytest.fixture
def service(database_url: str, services: Services) -> Service:
    return services.start(database_url=database_url, env=SERVE_ENV)


def test_the_client_is_gofmt_and_go_vet_clean(go: str, go_folder: Path) -> None:
    env = go_env(go_folder)
    goroot = run([go, "env", "GOROOT"], CLIENT, env).stdout.strip()
    unformatted = run([f"{goroot}/bin/gofmt", "-l", "."], CLIENT, env).stdout
    assert unformatted == "", f"not gofmt'd:\n{unformatted}"
    run([go, "vet", "./..."], CLIENT, env)


def test_go_test_against_a_real_service(go: str, go_folder: Path, service: Service) -> None:
    """Every package's tests, the integration tests included (none may skip for want of
    the service)."""
    env = go_env(go_folder, {"LEASEQ_TEST_URL": service.url, "LEASEQ_TEST_FENCE_KEYS": FENCE_KEYS})
    done = run([go, "test", "-count=1", "-v", "./..."], CLIENT, env)
    assert "no service" not in done.stdout, done.stdout[-3000:]
    assert re.search(r"^ok\s+" + re.escape(MODULE) + r"\s", done.stdout, re.M), done.stdout
    assert "--- FAIL" not in done.stdout


def readme_example() -> str:
    """The Go program of clients/go/README.md's "Example" (its first ```go block)."""
    text = (CLIENT / "README.md").read_text()
    found = re.search(r"```go\n(.*?)```", text, re.S)
    assert found, "clients/go/README.md has no ```go block"
    return found.group(1)


def test_the_readme_example_runs_as_written(
    go: str, go_folder: Path, service: Service, tmp_path: Path
) -> None:
    program = tmp_path / "example"
    program.mkdir()
    (program / "main.go").write_text(readme_example())
    (program / "go.mod").write_text(
        f"module example\n\ngo 1.19\n\nrequire {MODULE} v0.0.0\n\nreplace {MODULE} => {CLIENT}\n"
    )
    env = go_env(go_folder, {"LEASEQ_URL": service.url})
    done = run([go, "run", "."], program, env)
    assert "done 10 of 10" in done.stdout, done.stdout + done.stderr
