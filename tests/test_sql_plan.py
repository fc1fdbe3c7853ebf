"""The hot statements use their partial indexes (PITFALLS: pgqueuer PRs #607 and #668)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import TextClause, text
from sqlalchemy.ext.asyncio import AsyncEngine

from app import sql
from app.queue import Queue, new_token
from tests.support import T0, at

SESSIONS = 20
PER_SESSION = 5000


async def _fill(engine: AsyncEngine) -> None:
    """100,000 leads in 20 sessions: mostly finished, some queued, a few leased; then ANALYZE."""
    async with engine.connect() as conn:
        await conn.execute(
            text("""
INSERT INTO leads (session, priority, payload, status, attempts, owner, lease_token,
                   lease_expires_at, available_at)
SELECT 's' || (n % :sessions), k % 7, '{}',
       CASE WHEN k % 10 = 0 THEN 'queued' WHEN k % 50 = 1 THEN 'leased' ELSE 'done' END,
       CASE WHEN k % 10 = 0 THEN 0 ELSE 1 END,
       CASE WHEN k % 10 = 0 THEN NULL ELSE 'w' END,
       CASE WHEN k % 50 = 1 THEN md5(n::text) END,
       CASE WHEN k % 50 = 1 THEN CAST(:t0 AS timestamptz) + make_interval(secs => k % 600) END,
       CAST(:t0 AS timestamptz)
FROM generate_series(1, :total) AS n, LATERAL (SELECT n / :sessions AS k) AS per_session
"""),
            {"sessions": SESSIONS, "total": SESSIONS * PER_SESSION, "t0": T0},
        )
        await conn.execute(text("ANALYZE leads"))


async def _plan(engine: AsyncEngine, stmt: TextClause, params: dict[str, Any]) -> str:
    async with engine.connect() as conn:
        result = await conn.execute(text(f"EXPLAIN {stmt.text}"), params)
        return "\n".join(row[0] for row in result)


async def test_lease_next_uses_the_partial_index(engine: AsyncEngine) -> None:
    await _fill(engine)
    for ledger in (True, False):
        for max_ in (1, 100):
            params = {
                "session": "s3",
                "owner": "w",
                "max": max_,
                "ttl_s": 60.0,
                "now": at(1),
                "tokens": [new_token() for _ in range(max_)],
            }
            plan = await _plan(engine, sql.lease_next(ledger), params)
            assert "Index Scan using leads_queued on leads" in plan, plan
            assert "Seq Scan on leads" not in plan, plan
            assert "LockRows" in plan, plan  # FOR UPDATE SKIP LOCKED stays in the plan


async def test_sweep_uses_the_expiry_index(engine: AsyncEngine) -> None:
    await _fill(engine)
    for scoped in (True, False):
        params = {"session": "s3", "now": at(30), "limit": 1000}
        plan = await _plan(engine, sql.sweep(True, scoped=scoped), params)
        assert "leads_leased_expiry" in plan, plan
        assert "Seq Scan on leads" not in plan, plan


async def test_the_filled_table_leases_as_planned(engine: AsyncEngine) -> None:
    """The statement explained above runs and honours priority then age on that data."""
    await _fill(engine)
    queue = Queue(engine)
    leased = await queue.lease_next("s3", "w", max=100, now=at(1))
    assert len(leased) == 100
    keys = [(-lease.lead.priority, lease.lead.id) for lease in leased]
    assert keys == sorted(keys)
    assert {lease.lead.session for lease in leased} == {"s3"}
