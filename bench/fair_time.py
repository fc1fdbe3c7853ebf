"""Fair share by time, measured: ``python -m bench.fair_time [--seconds 60]``.

The acceptance measurement of docs/beyond.md#fair-share-by-time. One ``leaseq serve`` with
``--fair-by time`` (one process) on a fresh database with two sessions of queued leads:
``slow``, whose leads each take a worker 1 s, and ``fast``, 0.1 s. Eight workers lease with
no session (``POST /lease`` with neither ``session`` nor ``sessions``: any session), hold
the lead for its session's time (an asyncio sleep: a handler that waits), and complete it.
Over ``--seconds`` of each run, the worker-time each session took (from a lease's answer to
its completion's answer, as the service measures a lease on its clock) is added up: it should
be 50% ± 10% each with equal weights, and 75% ± 10% for the session of weight 3 with
weights 3:1. A third run with ``--fair-by count`` (the default) shows what sharing by
count gives the same load: the slow session takes about ten elevenths of the time.

Results go to ``bench/results/fair_time.json``; the exit status is 0 when both time runs
are within their bounds.
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
DURATIONS = {"slow": 1.0, "fast": 0.1}
WORKERS = 8
TOLERANCE = 0.10


def fill(url: str, seconds: float, weights: dict[str, float]) -> None:
    """Enough leads in each session for every worker to hold its leads for the whole run."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for session, held in DURATIONS.items():
            n = int(WORKERS * seconds / held * 1.5) + 100
            conn.execute(
                "INSERT INTO leads (session, payload) SELECT %s, '{}' FROM generate_series(1, %s)",
                (session, n),
            )
        for session, weight in weights.items():
            conn.execute(
                "INSERT INTO session_settings (session, weight) VALUES (%s, %s)", (session, weight)
            )
        conn.execute("VACUUM ANALYZE leads")


def lead_id(lease: dict[str, Any]) -> int:
    return int(lease["lead"]["id"])


async def workers(base_url: str, seconds: float) -> dict[str, float]:
    """Eight workers for ``seconds``: the worker-seconds each session's leads took."""
    busy = dict.fromkeys(DURATIONS, 0.0)
    leases = dict.fromkeys(DURATIONS, 0)
    started = time.monotonic()
    ends = started + seconds

    async def work(n: int, client: httpx.AsyncClient) -> None:
        while time.monotonic() < ends:
            answer = await client.post("/lease", json={"owner": f"w{n}", "ttl_s": 30})
            answer.raise_for_status()
            [lease] = answer.json()["leases"] or [None]
            if lease is None:
                await asyncio.sleep(0.01)
                continue
            session = lease["lead"]["session"]
            began = time.monotonic()  # the worker holds the lead from its lease's answer...
            await asyncio.sleep(DURATIONS[session])
            done = {"lead_id": lead_id(lease), "token": lease["token"]}
            (await client.post("/complete", json=done)).raise_for_status()
            # ...to its completion's answer: the time the lead took the worker.
            busy[session] += min(time.monotonic(), ends) - min(began, ends)
            leases[session] += 1

    async with httpx.AsyncClient(base_url=base_url, timeout=30) as client:
        await asyncio.gather(*(work(n, client) for n in range(WORKERS)))
    total = sum(busy.values())
    return {
        **{f"{s}_share": round(busy[s] / total, 3) for s in DURATIONS},
        **{f"{s}_leases": leases[s] for s in DURATIONS},
        "worker_seconds": round(total, 1),
    }


def one_run(server_url: str, fair_by: str, weights: dict[str, float], seconds: float) -> Any:
    name = common.new_name("fairtime")
    url = common.create_database(server_url, name)
    try:
        migrate.upgrade(url)
        fill(url, seconds, weights)
        args = ["--sweep-interval", "3600", "--fair-by", fair_by]
        service = Service(url, workers=1, extra_args=args)
        try:
            service.wait_ready()
            measured = asyncio.run(workers(service.base_url, seconds))
        finally:
            service.stop()
    finally:
        common.drop_database(server_url, name)
    return {"fair_by": fair_by, "weights": weights or {"slow": 1, "fast": 1}, **measured}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fair_time", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_SERVER)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--name", default="fair_time")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    load_before = common.load_avg()
    runs = [
        one_run(args.database_url, "time", {}, args.seconds),
        one_run(args.database_url, "time", {"slow": 3.0}, args.seconds),
        one_run(args.database_url, "count", {}, args.seconds),
    ]
    equal, weighted = runs[0]["slow_share"], runs[1]["slow_share"]
    within = abs(equal - 0.5) <= TOLERANCE and abs(weighted - 0.75) <= TOLERANCE
    result = {
        "seconds": args.seconds,
        "workers": WORKERS,
        "lead_seconds": DURATIONS,
        "runs": runs,
        "within_bounds": within,
        "machine": common.machine(args.database_url),
        "load_before": load_before,
        "load_after": common.load_avg(),
    }
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    for run in runs:
        print(
            f"fair by {run['fair_by']}, weights {run['weights']}: slow {run['slow_share']:.0%} "
            f"({run['slow_leases']} leases), fast {run['fast_share']:.0%} "
            f"({run['fast_leases']} leases) of {run['worker_seconds']} worker-seconds"
        )
    print(f"time shares within ±{TOLERANCE:.0%} of 50% and 75%: {within}")
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
