"""What the service reads of the cluster when it connects (``app.store.topology``), and how it
follows a change: a database that becomes distributed while the pool is open (``leaseq db
upgrade`` on a Citus database) is read as sharded at the next read, in the background of a
call once the last read is older than ``RECHECK_S``; each new answer is logged once."""

from __future__ import annotations

import logging

import pytest

from app.config import Settings
from app.store import migrate, topology
from app.store.pool import Database
from tests.citus.cluster import Cluster
from tests.support.worker_support import eventually


async def test_the_catalog_tells_where_the_service_runs_and_a_change_is_followed(
    citus_empty_url: str,
    citus_cluster: Cluster,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="leaseq.pg")
    async with Database.from_settings(Settings(database_url=citus_empty_url)) as db:
        assert db.topology == topology.ONE_POSTGRESQL  # nothing read before the first call
        found = await db.know_topology()
        assert found.citus and not found.sharded  # the extension, no leaseq schema yet
        assert len(found.nodes) == 1 + len(citus_cluster.workers)
        assert await db.know_topology() is found  # read once, kept

        migrate.upgrade(citus_empty_url)  # distributed while the pool is open
        monkeypatch.setattr(topology, "RECHECK_S", 0.0)

        async def sharded() -> bool:
            return (await db.know_topology()).sharded

        await eventually(sharded)
        assert {
            "leads",
            "lead_events",
            "lead_counts",
            "session_settings",
        } <= db.topology.distributed
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("the database is")]
    assert said == [
        f"the database is {found.describe()}",
        f"the database is {db.topology.describe()}",
    ]
