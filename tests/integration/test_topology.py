"""On one PostgreSQL the service reads that it is one (no ``citus`` extension), before its
first statement, and reads it again after the connection was lost (``app.store.topology``)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from app.store import topology
from app.store.pool import Database
from leaseq.errors import Unavailable


async def test_one_postgresql_is_read_as_one_and_read_again_after_a_lost_connection(
    db: Database, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert await db.know_topology() == topology.ONE_POSTGRESQL
    assert db.topology.describe() == "one PostgreSQL" and not db.topology.sharded
    reads = 0
    read = topology.read

    async def counted(conn: Any) -> topology.Topology:
        nonlocal reads
        reads += 1
        return await read(conn)

    monkeypatch.setattr(topology, "read", counted)
    await db.know_topology()
    assert reads == 0  # known: not read again
    with psycopg.connect(database_url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
    with pytest.raises(Unavailable):
        await db.rows("SELECT 1")  # its connection is gone
    assert await db.know_topology() == topology.ONE_POSTGRESQL
    assert reads == 1  # read again before the next statement is built
