"""The hot statements use their partial indexes (PITFALLS: pgqueuer PRs #607 and #668).

So do the maintenance and operator reads that run on a live queue: prune
(``leads_terminal_updated``) and the dashboard's throughput window
(``lead_events_outcomes_at``).
"""

from __future__ import annotations

import re

import pytest

from app.domain import overview
from app.domain.lease_tokens import mint
from app.domain.queue import Queue
from app.store import statements
from app.store.pool import Database
from app.store.statements import Statement
from leaseq.model import SessionSettings
from tests.support import T0, at, leasing_of

# Each fills a table with thousands of leads to read a plan: CI runs them, and the README's
# command leaves them out (docs/testing.md).
pytestmark = pytest.mark.slow

SESSIONS = 20
PER_SESSION = 5000


async def _fill(db: Database) -> None:
    """100,000 leads in 20 sessions: mostly finished, some queued, a few leased; then ANALYZE."""
    await db.rows(
        """
INSERT INTO leads (session, priority, payload, status, attempts, owner, lease_token,
                   lease_expires_at, available_at)
SELECT 's' || (n %% %(sessions)s), k %% 7, '{}',
       CASE WHEN k %% 10 = 0 THEN 'queued' WHEN k %% 50 = 1 THEN 'leased' ELSE 'done' END,
       CASE WHEN k %% 10 = 0 THEN 0 ELSE 1 END,
       CASE WHEN k %% 10 = 0 THEN NULL ELSE 'w' END,
       CASE WHEN k %% 50 = 1 THEN md5(n::text) END,
       CASE WHEN k %% 50 = 1 THEN %(t0)s::timestamptz + make_interval(secs => k %% 600) END,
       %(t0)s::timestamptz
FROM generate_series(1, %(total)s) AS n, LATERAL (SELECT n / %(sessions)s AS k) AS per_session
""",
        {"sessions": SESSIONS, "total": SESSIONS * PER_SESSION, "t0": T0},
    )
    await db.rows("ANALYZE leads")


async def _plan(db: Database, statement: Statement) -> str:
    explained = await db.rows(f"EXPLAIN {statement.text}", statement.params)
    return "\n".join(row["QUERY PLAN"] for row in explained)


async def test_lease_next_uses_the_partial_index(db: Database) -> None:
    await _fill(db)
    for ledger in (True, False):
        for max_ in (1, 100):
            params = {
                "session": "s3",
                "owner": "w",
                "max": max_,
                "ttl_s": 60.0,
                "now": at(1),
                "tokens": [mint("s") for _ in range(max_)],
            }
            plan = await _plan(db, statements.lease_next(**params, ledger=ledger))
            assert "Index Scan using leads_ready on leads" in plan, plan
            assert "Seq Scan on leads" not in plan, plan
            assert "LockRows" in plan, plan  # FOR UPDATE SKIP LOCKED stays in the plan


async def test_the_grouped_lease_uses_the_partial_index_too(db: Database) -> None:
    """The lease of several callers at once (group commit) plans as lease_next does."""
    await _fill(db)
    for ledger in (True, False):
        params = {
            "session": "s3",
            "max": 30,
            "owners": ["w1"] * 10 + ["w2"] * 20,
            "ttls": [60.0] * 10 + [30.0] * 20,
            "now": at(1),
            "tokens": [mint("s") for _ in range(30)],
        }
        plan = await _plan(db, statements.lease_group(**params, ledger=ledger))
        assert "Index Scan using leads_ready on leads" in plan, plan
        assert "Seq Scan on leads" not in plan and "LockRows" in plan, plan


async def test_the_limited_lease_uses_the_partial_index_too(db: Database) -> None:
    """A capped session's lease (after its lock) scans leads_ready as the plain one does, and
    counts what the session holds from lead_counts, never from the leads."""
    await _fill(db)
    await Queue(db).put_settings("s3", SessionSettings(max_leased=10, rate_per_s=5))
    params = {
        "session": "s3",
        "owner": "w",
        "max": 10,
        "ttl_s": 60.0,
        "now": at(1),
        "tokens": [mint("s") for _ in range(10)],
    }
    plan = await _plan(db, statements.lease_limited(**params, ledger=True))
    assert "Index Scan using leads_ready on leads" in plan, plan
    assert "Seq Scan on leads" not in plan and "LockRows" in plan, plan
    assert "lead_counts" in plan and "leads_session_status" not in plan, plan


async def test_sweep_uses_the_expiry_index(db: Database) -> None:
    await _fill(db)
    for scoped in (True, False):
        params = {"session": "s3", "now": at(30), "limit": 1000}
        plan = await _plan(db, statements.sweep(**params, ledger=True, scoped=scoped))
        assert "leads_leased_expiry" in plan, plan
        assert "Seq Scan on leads" not in plan, plan


async def test_the_filled_table_leases_as_planned(db: Database) -> None:
    """The statement explained above runs and honours priority then age on that data."""
    await _fill(db)
    queue = Queue(db)
    leased = await leasing_of(queue).lease_next("s3", "w", max=100, now=at(1))
    assert len(leased) == 100
    keys = [(-lease.lead.priority, lease.lead.id) for lease in leased]
    assert keys == sorted(keys)
    assert {lease.lead.session for lease in leased} == {"s3"}


async def _finished_over_hours(db: Database) -> None:
    """_fill, with the finished leads last changed over the 28 hours before T0."""
    await _fill(db)
    await db.rows(
        "UPDATE leads SET updated_at = %(t0)s::timestamptz "
        "- make_interval(secs => id) WHERE status = 'done'",
        {"t0": T0},
    )
    await db.rows("VACUUM ANALYZE leads")


# The scan that chooses the batch: EXPLAIN names the second reference to leads
# (the DELETE's) ``leads leads_1``; how the DELETE finds its 1,000 rows by id
# (index probes, or a hash join over the table) is the planner's cost call.
CHOOSING_BY_SEQ_SCAN = re.compile(r"Seq Scan on leads\s+\(")


def _cte(plan: str, name: str) -> str:
    """The part of a text plan under ``CTE name``, up to the next CTE or the main plan."""
    lines = plan.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == f"CTE {name}")
    depth = len(lines[start]) - len(lines[start].lstrip())
    end = next(
        (
            i
            for i in range(start + 1, len(lines))
            if len(lines[i]) - len(lines[i].lstrip()) <= depth
        ),
        len(lines),
    )
    return "\n".join(lines[start:end])


async def test_prune_uses_the_terminal_index(db: Database) -> None:
    await _finished_over_hours(db)
    for older_than_s in (60.0, 86_400.0):  # most finished leads qualify; a few do
        params = {"older_than_s": older_than_s, "now": at(0), "limit": 1000}
        plan = await _plan(db, statements.prune(**params, scoped=False))
        assert "Index Scan using leads_terminal_updated on leads  (" in plan, plan
        assert not CHOOSING_BY_SEQ_SCAN.search(plan), plan
        # The index gives the choice's order (a later CTE may sort the chosen ids, as the
        # dependency edges' delete does: at most ``limit`` rows, never the table).
        assert "Sort" not in _cte(plan, "doomed"), plan
        assert "LockRows" in plan, plan
    scoped = {"older_than_s": 60.0, "now": at(0), "limit": 1000, "session": "s3"}
    plan = await _plan(db, statements.prune(**scoped, scoped=True))
    assert not CHOOSING_BY_SEQ_SCAN.search(plan), plan

    # And the statement explained above deletes what it should on that data.
    [total] = await db.rows("SELECT count(*) AS n FROM leads")
    [expected] = await db.rows(
        "SELECT count(*) AS n FROM leads WHERE status = 'done' "
        "AND updated_at < %(cutoff)s::timestamptz",
        {"cutoff": at(-86_400)},
    )
    assert expected["n"] and total["n"] and expected["n"] < total["n"]
    assert await Queue(db).prune(86_400, now=at(0)) == expected["n"]


async def test_the_throughput_window_uses_the_time_index(db: Database) -> None:
    """150,000 ledger rows over the last 5 hours of the real clock, a third of them ends."""
    await db.rows(
        """
INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at)
SELECT n / 3, 's' || (n %% %(sessions)s),
       (ARRAY['pushed', 'leased', 'completed'])[n %% 3 + 1],
       (ARRAY['queued', 'leased', 'done'])[n %% 3 + 1], 1, 'w',
       now() - make_interval(secs => (150000 - n) * 0.12)
FROM generate_series(1, 150000) AS n
""",
        {"sessions": SESSIONS},
    )
    await db.rows("VACUUM ANALYZE lead_events")

    window = statements.per_minute(window_minutes=overview.WINDOW_MINUTES)
    plan = await _plan(db, window)
    assert "lead_events_outcomes_at" in plan, plan
    assert "Seq Scan on lead_events" not in plan, plan

    # And the statement explained above counts what the ledger holds in the window
    # (one statement, so both counts see the same now()).
    [found] = await db.rows(f"""
SELECT (SELECT sum(completed) FROM ({window.text}) AS shown) AS shown,
       (SELECT count(*) FROM lead_events WHERE event = 'completed'
        AND at >= now() - interval '{overview.WINDOW_MINUTES} minutes') AS expected
""")
    minutes = {r["ago"] for r in await db.rows(window)}
    assert found["expected"] and 0 < found["expected"] < 50_000
    assert found["shown"] == found["expected"]
    assert minutes <= set(range(overview.WINDOW_MINUTES))

    # Each session's lease seconds of the last minute (the dashboard's time share, /metrics'
    # leaseq_lease_seconds_per_second): the same range of the same index, each end joined to
    # its lease through lead_events_session_lead; never the whole ledger.
    recent = statements.lease_seconds_recent(window_s=60.0, now=None)
    plan = await _plan(db, recent)
    assert "lead_events_outcomes_at" in plan, plan
    assert "lead_events_session_lead" in plan, plan
    assert "Seq Scan on lead_events" not in plan, plan
    assert isinstance(await db.rows(recent), list)  # runs (its sums: tests/api/test_time_share.py)
