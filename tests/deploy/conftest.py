"""Fixtures of the deployment tests: PgBouncer before the test server, `leaseq serve` processes."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from tests.deploy.pgbouncer import PgBouncer
from tests.support import system


@pytest.fixture(scope="session")
def pgbouncer_program() -> str:
    """pgbouncer's path; the test skips (fails under CI's switch) without it.

    Asked for before ``server_url``, so a machine without PgBouncer skips
    without starting a PostgreSQL first.
    """
    return system.need(system.PGBOUNCER)


@pytest.fixture(scope="session")
def pgbouncer(pgbouncer_program: str, server_url: str) -> Iterator[PgBouncer]:
    """One PgBouncer (transaction mode, pooling.ini's pool sizes) for the whole run."""
    bouncer = PgBouncer(pgbouncer_program, server_url).start()
    yield bouncer
    bouncer.stop()


@pytest.fixture
def start_pgbouncer(pgbouncer_program: str, server_url: str) -> Iterator[Callable[..., PgBouncer]]:
    """``start_pgbouncer(pool_size=1)``: a PgBouncer of this test's own, stopped after it."""
    started: list[PgBouncer] = []

    def start(**options: object) -> PgBouncer:
        bouncer = PgBouncer(pgbouncer_program, server_url, **options)  # type: ignore[arg-type]
        started.append(bouncer)
        return bouncer.start()

    yield start
    for bouncer in started:
        bouncer.stop()
