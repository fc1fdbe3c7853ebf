"""Fixtures of the clients' tier: the language, its worker program (built once per run), a
fresh ``leaseq serve`` per test, and the worker processes a test starts.

Each language's program is built on first use and kept for the run; a language whose
toolchain (or client) is missing skips each of its tests with the same one line.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.clients.harness import LANGUAGES, Fleet, built
from tests.support.serving import Service, Services

# The service of a conformance test: expired leases swept every second, so a lead whose
# worker died comes back soon after its lease ends.
SERVE_ENV = {"LEASEQ_SWEEP_INTERVAL_S": "1"}


@pytest.fixture(scope="session")
def build_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("programs")


@pytest.fixture(params=LANGUAGES)
def language(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


@pytest.fixture
def worker_program(language: str, build_folder: Path) -> list[str]:
    """The argv of ``language``'s conformance worker, built on first use (a skip is kept)."""
    return built(language, build_folder)


@pytest.fixture
def fleet(worker_program: list[str], tmp_path: Path) -> Iterator[Fleet]:
    running = Fleet(worker_program, tmp_path)
    yield running
    running.close()


@pytest.fixture
def service(database_url: str, services: Services) -> Service:
    """A fresh ``leaseq serve`` on this test's fresh database."""
    return services.start(database_url=database_url, env=SERVE_ENV)
