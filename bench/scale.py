"""Lease latency against the size of the table: 10,000 and 1,000,000 queued leads,
in one session and spread over 1,000 sessions.

The queue is filled with one ``INSERT … SELECT generate_series`` per step (the
figures are of leasing, not pushing), then ``VACUUM ANALYZE``d, since this server
runs with autovacuum off. Then one worker (``app.domain.queue.Queue``, ledger on) leases
and completes ``calls`` leads, one at a time: from the one session, or from a
session drawn at random each call. The partial index ``leads_ready`` holds only
ready queued leads, ordered as the lease query reads them, so a lease reads the same
few index pages whatever the table holds.
"""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import psycopg
from rich.console import Console

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database, libpq_url
from bench import common

SESSIONS = 1000
CALLS = 1000


def _fill(url: str, first: int, last: int, sessions: int) -> None:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        session = "'one'" if sessions == 1 else f"'s' || (i %% {sessions})"
        conn.execute(
            f"INSERT INTO leads (session, payload) SELECT {session}, jsonb_build_object('n', i) "
            "FROM generate_series(%s::bigint, %s::bigint) AS i",
            (first, last),
        )
        conn.execute("VACUUM ANALYZE leads")


async def _lease_calls(url: str, sessions: int, calls: int) -> dict[str, Any]:
    db = Database.from_settings(Settings(statement_timeout_ms=60_000), url, pool_size=1)
    lease_s: list[float] = []
    complete_s: list[float] = []
    rng = random.Random(7)
    try:
        queue = Queue(db, ledger=True)
        await queue.db_now()
        for _ in range(calls):
            session = "one" if sessions == 1 else f"s{rng.randrange(sessions)}"
            started = time.perf_counter()
            [lease] = await common.leasing_of(queue).lease_next(
                session, "scale", max=1, ttl_s=common.LEASE_TTL_S
            )
            leased = time.perf_counter()
            await queue.complete(lease.lead.id, lease.token)
            lease_s.append(leased - started)
            complete_s.append(time.perf_counter() - leased)
    finally:
        await db.close()
    return {
        "lease_p50_ms": common.percentile_ms(lease_s, 50),
        "lease_p99_ms": common.percentile_ms(lease_s, 99),
        "complete_p50_ms": common.percentile_ms(complete_s, 50),
        "complete_p99_ms": common.percentile_ms(complete_s, 99),
    }


def _plan(url: str, session: str) -> str:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM leads "
            "WHERE session = %s AND status = 'queued' AND NOT scheduled AND available_at <= now() "
            "ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED",
            (session,),
        ).fetchall()
    return "\n".join(row[0] for row in rows)


def measure(
    server_url: str, template: str, largest: int, console: Console | None = None
) -> list[dict[str, Any]]:
    """Rows of (queued leads, sessions, lease and complete p50/p99 ms)."""
    sizes = [size for size in (10_000, largest) if size <= largest]
    rows: list[dict[str, Any]] = []
    for sessions in (1, SESSIONS):
        with common.fresh_copy(server_url, template) as url:
            filled = 0
            for size in sizes:
                started = time.perf_counter()
                _fill(url, filled + 1, size, sessions)
                filled = size
                fill_s = round(time.perf_counter() - started, 1)
                figures = asyncio.run(_lease_calls(url, sessions, CALLS))
                plan = _plan(url, "one" if sessions == 1 else "s1")
                row = {
                    "queued": size,
                    "sessions": sessions,
                    "calls": CALLS,
                    "fill_s": fill_s,
                    "load": common.load_avg(),
                    **figures,
                    "plan": plan,
                }
                rows.append(row)
                if console is not None:
                    console.print(
                        f"  scale: {size:>9,} queued in {sessions:>4} session(s): lease p50/p99 "
                        f"{row['lease_p50_ms']}/{row['lease_p99_ms']} ms (filled in {fill_s} s)"
                    )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| queued leads | sessions | lease p50 ms | lease p99 ms "
        "| complete p50 ms | complete p99 ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r['queued']:,} | {r['sessions']:,} | {r['lease_p50_ms']} | {r['lease_p99_ms']} "
            f"| {r['complete_p50_ms']} | {r['complete_p99_ms']} |"
        )
    return "\n".join(lines)
