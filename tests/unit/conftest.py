"""The unit tier: no PostgreSQL, no service, no network; it runs in seconds.

A test here that asks for a database fails at once instead of starting one.
"""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def server_url() -> str:
    pytest.fail("the unit tier needs no PostgreSQL: move this test out of tests/unit")
