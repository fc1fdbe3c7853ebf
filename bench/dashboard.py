"""What the dashboard's data costs with 1,000 and with 1,000,000 leads, and what keeping the
counts costs the queue: ``python -m bench.dashboard``.

1. The dashboard. 10 sessions filled with ``--small`` then ``--large`` leads
   (queued, leased, done and failed mixed; ``INSERT … SELECT generate_series``,
   then ``VACUUM ANALYZE``); ``app.domain.overview.snapshot`` (what ``/dashboard/data``
   reads) and ``Queue.stats_all`` (``/stats``, ``/metrics``) timed ``--calls``
   times each. Counts come from ``lead_counts`` (statement triggers), the oldest
   ready lead from one ``leads_ready_age`` probe per session: neither reads
   the leads.
2. The triggers' price. In process (``app.domain.queue.Queue``, ledger on): push
   ``--leads`` leads in batches of 100, then lease and complete them one at a
   time, with the count triggers on and with them disabled
   (``ALTER TABLE leads DISABLE TRIGGER USER``), in alternating rounds.

Results go to ``bench/results/dashboard.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from app.config import Settings
from app.domain import overview
from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import Database, libpq_url
from bench import common
from leaseq.model import NewLead

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
SESSIONS = 10


def fill(url: str, first: int, last: int) -> None:
    """Leads ``first``..``last`` over SESSIONS sessions: 40 % queued, 10 % leased, 40 % done,
    10 % failed."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            f"""
INSERT INTO leads (session, payload, status, owner, lease_token, lease_expires_at, attempts)
SELECT 's' || (i %% {SESSIONS}), jsonb_build_object('n', i), kind,
       CASE WHEN kind <> 'queued' THEN 'w' END,
       CASE WHEN kind = 'leased' THEN md5(i::text) END,
       CASE WHEN kind = 'leased' THEN now() + interval '1 hour' END,
       CASE WHEN kind = 'queued' THEN 0 ELSE 1 END
FROM generate_series(%s::bigint, %s::bigint) AS i,
     LATERAL (SELECT CASE WHEN i %% 10 < 4 THEN 'queued' WHEN i %% 10 = 4 THEN 'leased'
                          WHEN i %% 10 < 9 THEN 'done' ELSE 'failed' END AS kind) AS k
""",
            (first, last),
        )
        conn.execute("VACUUM ANALYZE leads")


async def read_costs(url: str, calls: int) -> dict[str, Any]:
    db = Database.from_settings(Settings(statement_timeout_ms=120_000), url, pool_size=1)
    snapshot_s: list[float] = []
    stats_s: list[float] = []
    try:
        queue = Queue(db)
        await overview.snapshot(queue)  # warm
        for _ in range(calls):
            started = time.perf_counter()
            await overview.snapshot(queue)
            snapshot_s.append(time.perf_counter() - started)
            started = time.perf_counter()
            total = (await queue.stats_all()).total
            stats_s.append(time.perf_counter() - started)
    finally:
        await db.close()
    return {
        "snapshot_p50_ms": common.percentile_ms(snapshot_s, 50),
        "snapshot_p95_ms": common.percentile_ms(snapshot_s, 95),
        "stats_all_p50_ms": common.percentile_ms(stats_s, 50),
        "counted": total.queued + total.leased + total.done + total.failed + total.cached,
    }


def dashboard(server_url: str, sizes: Sequence[int], calls: int) -> list[dict[str, Any]]:
    rows = []
    name = common.new_name("dash")
    url = common.create_database(server_url, name)
    try:
        migrate.upgrade(url)
        filled = 0
        for size in sizes:
            fill(url, filled + 1, size)
            filled = size
            figures = asyncio.run(read_costs(url, calls))
            assert figures["counted"] == size, figures
            rows.append({"leads": size, **figures, "load": common.load_avg()})
            print(f"  {size:>9,} leads: snapshot p50 {figures['snapshot_p50_ms']} ms")
    finally:
        common.drop_database(server_url, name)
    return rows


async def queue_round(url: str, leads: int) -> dict[str, float]:
    db = Database.from_settings(Settings(), url, pool_size=1)
    try:
        queue = Queue(db)
        session = f"t{time.monotonic_ns()}"
        started = time.perf_counter()
        for _ in range(leads // 100):
            await queue.push(session, [NewLead({"x": 1})] * 100)
        pushed = time.perf_counter()
        for _ in range(leads):
            [lease] = await common.leasing_of(queue).lease_next(session, "b")
            await queue.complete(lease.lead.id, lease.token)
        drained = time.perf_counter()
    finally:
        await db.close()
    return {
        "push_per_s": round(leads / (pushed - started)),
        "lease_complete_per_s": round(leads / (drained - pushed)),
    }


def triggers(server_url: str, leads: int, rounds: int) -> dict[str, Any]:
    name = common.new_name("trig")
    url = common.create_database(server_url, name)
    found: dict[str, list[dict[str, float]]] = {"on": [], "off": []}
    try:
        migrate.upgrade(url)
        with psycopg.connect(libpq_url(url), autocommit=True) as conn:
            for _ in range(rounds):
                for state in ("on", "off"):
                    switch = "ENABLE" if state == "on" else "DISABLE"
                    conn.execute(f"ALTER TABLE leads {switch} TRIGGER USER")
                    found[state].append(asyncio.run(queue_round(url, leads)))
    finally:
        common.drop_database(server_url, name)
    summary: dict[str, Any] = {}
    for state, runs in found.items():
        summary[state] = {
            key: common.median([run[key] for run in runs])
            for key in ("push_per_s", "lease_complete_per_s")
        }
    summary["cost_pct"] = {
        key: round(100 * (1 - summary["on"][key] / summary["off"][key]), 1)
        for key in ("push_per_s", "lease_complete_per_s")
    }
    summary["runs"] = found
    return summary


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.dashboard", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_SERVER)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--large", type=int, default=1_000_000)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--leads", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="dashboard")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rows = dashboard(args.database_url, [args.small, args.large], args.calls)
    cost = triggers(args.database_url, args.leads, args.rounds)
    result = {
        "dashboard": rows,
        "ratio_snapshot_p50": round(rows[-1]["snapshot_p50_ms"] / rows[0]["snapshot_p50_ms"], 2),
        "triggers": cost,
        "machine": common.machine(args.database_url),
    }
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    print(
        f"dashboard data p50: {rows[0]['snapshot_p50_ms']} ms at {args.small:,} leads, "
        f"{rows[-1]['snapshot_p50_ms']} ms at {args.large:,} "
        f"(ratio {result['ratio_snapshot_p50']}); "
        f"count triggers cost {cost['cost_pct']['push_per_s']} % of push and "
        f"{cost['cost_pct']['lease_complete_per_s']} % of lease+complete throughput"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
