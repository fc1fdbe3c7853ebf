"""Fixtures of the citus tier: one cluster per run, a fresh database on it for each test.

The cluster starts when the first test of this folder asks for it, never for
the rest of the suite. Where Citus is not installed every test here skips
with one line saying how to get it (``tests.citus.cluster``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from tests.citus.cluster import Cluster


@pytest.fixture
def citus_database(citus_cluster: Cluster) -> Iterator[str]:
    """The name of a fresh database on every node, the extension in each, the workers added;
    no schema. Dropped from every node afterwards."""
    name = f"leaseq_c_{uuid.uuid4().hex[:12]}"
    citus_cluster.create_database(name)
    yield name
    citus_cluster.drop_database_later(name)


@pytest.fixture
def citus_empty_url(citus_cluster: Cluster, citus_database: str) -> str:
    """The coordinator's URL of this test's database, before any migration."""
    return citus_cluster.url(citus_database)


@pytest.fixture
def citus_url(citus_cluster: Cluster) -> Iterator[str]:
    """The coordinator's URL of a fresh database migrated to head (distributed), a copy of
    the cluster's template; dropped from every node afterwards."""
    name = f"leaseq_c_{uuid.uuid4().hex[:12]}"
    yield citus_cluster.migrated_database(name)
    citus_cluster.drop_database_later(name)


@pytest.fixture
def database_url(citus_url: str) -> str:
    """Here every test's database is on the cluster: the suite's ``db`` and ``queue`` (and the
    API's ``client``) reach the coordinator."""
    return citus_url
