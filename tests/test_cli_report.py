"""``leaseq report``: the ledger's audit read from the database, exit 1 on a broken promise."""

from __future__ import annotations

import json

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.model import NewLead
from app.queue import Queue
from tests.serving import leaseq
from tests.support import T0, at


async def _clean_run(queue: Queue) -> list[int]:
    ids = (await queue.push("s", [NewLead({"i": i}) for i in range(3)], now=T0)).ids
    leases = await queue.lease_next("s", "w1", max=3, ttl_s=10, now=at(1))
    for lease in leases:
        await queue.complete(lease.lead.id, lease.token, now=at(2))
    return ids


async def test_a_clean_run_reports_no_breach(queue: Queue, database_url: str) -> None:
    await _clean_run(queue)

    shown = leaseq("report", "--session", "s", "--database-url", database_url)
    assert shown.returncode == 0, shown.stderr
    assert "double completions" in shown.stdout
    assert "w1" in shown.stdout
    assert "no double completion, no overlapping lease" in shown.stdout

    as_json = leaseq("report", "-s", "s", "--json", env={"LEASEQ_DATABASE_URL": database_url})
    assert as_json.returncode == 0, as_json.stderr
    found = json.loads(as_json.stdout)
    assert (found["double_completions"], found["overlapping_leases"]) == (0, 0)
    assert (found["wasted_attempts"], found["completions"], found["leases"]) == (0, 3, 3)
    assert found["attempts_per_lead"] == {"1": 3}
    assert found["owners"] == [{"owner": "w1", "leases": 3, "completions": 3, "wasted": 0}]


async def test_a_tampered_ledger_exits_1(
    queue: Queue, engine: AsyncEngine, database_url: str
) -> None:
    [first, second, _] = await _clean_run(queue)
    async with engine.connect() as conn:
        # A second completion of the first lead, and a lease of the second given
        # while its first lease was still valid (leased at 1 s for 10 s).
        await conn.execute(
            text(
                "INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at) "
                "VALUES (:first, 's', 'completed', 'done', 1, 'w9', :late), "
                "(:second, 's', 'leased', 'leased', 2, 'w9', :early)"
            ),
            {"first": first, "second": second, "late": at(3), "early": at(1.5)},
        )

    shown = leaseq("report", "--session", "s", "--database-url", database_url)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "broken promise" in shown.stderr

    as_json = leaseq("report", "--session", "s", "--json", "--database-url", database_url)
    assert as_json.returncode == 1
    found = json.loads(as_json.stdout)
    assert (found["double_completions"], found["overlapping_leases"]) == (1, 1)


def test_a_bad_session_name_is_one_line(database_url: str) -> None:
    shown = leaseq("report", "--session", "no spaces", "--database-url", database_url)
    assert shown.returncode == 1
    assert "validation_error" in shown.stderr
    assert "Traceback" not in shown.stderr
