"""The service's Queue on a Citus cluster: what runs today (docs/scaling.md, "What runs on
Citus today"). A test marked xfail names the error that stops it; it fails (strict) once the
statement runs, so the marker goes with the fix."""

from __future__ import annotations

import psycopg
import pytest

from app.domain.queue import Queue
from leaseq.model import NewLead


async def test_stats_of_a_session(queue: Queue, database_url: str) -> None:
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("INSERT INTO leads (session) VALUES ('s'), ('s'), ('t')")
    assert (await queue.stats("s")).queued == 2
    assert (await queue.stats("t")).queued == 1
    assert await queue.settings_all() == {}


@pytest.mark.xfail(
    strict=True,
    raises=psycopg.errors.InvalidTableDefinition,
    reason='push: column "pg_notify" has pseudo-type void (docs/scaling.md)',
)
async def test_push_and_lease_one_session(queue: Queue) -> None:
    pushed = await queue.push("s", [NewLead(payload={"n": n}) for n in range(3)])
    leases = await queue.lease_next("s", "w", max=2)
    assert [lease.lead.id for lease in leases] == pushed.ids[:2]
    done = await queue.complete(leases[0].lead.id, leases[0].token)
    assert done.status == "done"
