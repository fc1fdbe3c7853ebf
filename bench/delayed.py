"""Lease latency over REST with 100,000 delayed leads of higher priority ahead, against a
session without them: ``python -m bench.delayed``.

A session holds ``--delayed`` leads of priority 5 due in an hour (pushed with
a delay: ``scheduled``) and ``--calls`` ready leads of priority 0; another
holds only the ready ones. One client leases (``max`` 1) from each session in
turn through a real ``leaseq serve``, ``--calls`` times each; the figure is
the ratio of the two p50s (target: within 1.5 times). Before revision 0004 the lease
walked over every delayed lead in ``leads_queued`` (9.9 times slower at 100,000).

Results go to ``bench/results/delayed.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psycopg

from app.store import migrate
from app.store.pool import libpq_url
from bench import common
from bench.service import Service

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"


def fill(url: str, delayed: int, ready: int) -> None:
    """``delayed`` leads of priority 5 due in an hour and ``ready`` of priority 0 in session
    ``delayed``; ``ready`` of priority 0 in session ``plain``. As push writes them."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO leads (session, priority, payload, available_at, scheduled) "
            "SELECT 'delayed', 5, jsonb_build_object('n', i), now() + interval '1 hour', true "
            "FROM generate_series(1, %s) AS i",
            (delayed,),
        )
        for session in ("delayed", "plain"):
            conn.execute(
                "INSERT INTO leads (session, priority, payload) "
                "SELECT %s, 0, jsonb_build_object('n', i) FROM generate_series(1, %s) AS i",
                (session, ready),
            )
        conn.execute("VACUUM ANALYZE leads")


async def lease_calls(base_url: str, calls: int) -> dict[str, list[float]]:
    """``calls`` leases from each session, alternating; the seconds each took."""
    took: dict[str, list[float]] = {"delayed": [], "plain": []}
    async with httpx.AsyncClient(base_url=base_url, timeout=30) as http:
        for _ in range(20):  # warm the connection, the pool and the plans
            await http.post("/lease", json={"session": "nothing", "owner": "warm"})
        for _ in range(calls):
            for session, samples in took.items():
                started = time.perf_counter()
                answer = await http.post("/lease", json={"session": session, "owner": "b"})
                samples.append(time.perf_counter() - started)
                [lease] = answer.json()["leases"]
                assert lease["lead"]["priority"] == 0, lease  # never a delayed one
    return took


def plan(url: str) -> str:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        rows = conn.execute(
            "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) SELECT id FROM leads "
            "WHERE session = 'delayed' AND status = 'queued' AND NOT scheduled "
            "AND available_at <= now() ORDER BY priority DESC, id LIMIT 1 FOR UPDATE SKIP LOCKED"
        ).fetchall()
    return "\n".join(row[0] for row in rows)


def run(server_url: str, delayed: int, calls: int) -> dict[str, Any]:
    name = common.new_name("delayed")
    url = common.create_database(server_url, name)
    try:
        migrate.upgrade(url)
        started = time.perf_counter()
        fill(url, delayed, calls)
        fill_s = time.perf_counter() - started
        service = Service(url, workers=1, extra_args=["--sweep-interval", "3600"])
        try:
            service.wait_ready()
            took = asyncio.run(lease_calls(service.base_url, calls))
        finally:
            service.stop()
        explained = plan(url)
    finally:
        common.drop_database(server_url, name)
    p50 = {session: common.percentile_ms(samples, 50) for session, samples in took.items()}
    p95 = {session: common.percentile_ms(samples, 95) for session, samples in took.items()}
    assert p50["delayed"] is not None and p50["plain"] is not None
    return {
        "delayed_leads_ahead": delayed,
        "calls_per_session": calls,
        "fill_s": round(fill_s, 1),
        "lease_p50_ms": p50,
        "lease_p95_ms": p95,
        "ratio_p50": round(p50["delayed"] / p50["plain"], 2),
        "target_ratio": 1.5,
        "plan": explained,
        "machine": common.machine(server_url),
        "load_after": common.load_avg(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.delayed", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_SERVER)
    parser.add_argument("--delayed", type=int, default=100_000)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--name", default="delayed")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args.database_url, args.delayed, args.calls)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    p50 = result["lease_p50_ms"]
    print(
        f"lease p50 with {args.delayed:,} delayed leads ahead: {p50['delayed']} ms; "
        f"without: {p50['plain']} ms; ratio {result['ratio_p50']} (target ≤ 1.5)"
    )
    return 0 if result["ratio_p50"] <= result["target_ratio"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
