"""Fixtures of the deployment tests: PgBouncer before the test server, `leaseq serve` processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.deploy.pgbouncer import PgBouncer
from tests.serving import Services


@pytest.fixture(scope="session")
def pgbouncer(server_url: str) -> Iterator[PgBouncer]:
    """One PgBouncer (transaction mode, pooling.ini's pool sizes) for the whole run."""
    bouncer = PgBouncer(server_url).start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
def start_pgbouncer(server_url: str) -> Iterator[Callable[..., PgBouncer]]:
    """``start_pgbouncer(pool_size=1)``: a PgBouncer of this test's own, stopped after it."""
    started: list[PgBouncer] = []

    def start(**options: object) -> PgBouncer:
        bouncer = PgBouncer(server_url, **options)  # type: ignore[arg-type]
        started.append(bouncer)
        return bouncer.start()

    yield start
    for bouncer in started:
        bouncer.stop()


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    running = Services(tmp_path)
    yield running
    running.close()
