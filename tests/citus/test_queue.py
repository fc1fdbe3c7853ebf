"""The service's Queue on a Citus cluster: what runs today (docs/scaling.md, "What runs on
Citus today"). A test marked xfail names the error that stops it; it fails (strict) once the
statement runs, so the marker goes with the fix."""

from __future__ import annotations

import psycopg
import pytest

from app.domain.queue import Queue
from leaseq import push_in
from leaseq.model import NewLead
from tests.support import leasing_of


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
    leases = await leasing_of(queue).lease_next("s", "w", max=2)
    assert [lease.lead.id for lease in leases] == pushed.ids[:2]
    done = await queue.complete(leases[0].lead.id, leases[0].token)
    assert done.status == "done"


def test_a_push_in_the_producers_transaction(database_url: str) -> None:
    """``leaseq_push`` on the coordinator: the lead and its ledger row commit or roll back
    with the producer's transaction, on the session's shard."""
    with psycopg.connect(database_url) as conn:
        push_in(conn, "s", {"dropped": True})
        conn.rollback()
        lead_id = push_in(conn, "s", {"kept": True}, key="k")
        assert push_in(conn, "s", {}, key="k") == lead_id
        conn.commit()
        found = conn.execute("SELECT id, payload FROM leads").fetchall()
        ledger = conn.execute("SELECT lead_id, event FROM lead_events").fetchall()
    assert found == [(lead_id, {"kept": True})]
    assert ledger == [(lead_id, "pushed")]
