"""Soak benchmark: push and drain many leads with pruning on; the table must stay small.

A producer keeps a bounded backlog queued, W workers lease in batches and
complete, and a pruner deletes terminal leads (and their ledger rows) a few
seconds after they finish, as ``leaseq serve`` does with ``LEASEQ_PRUNE_AFTER_S``.
Every few seconds a sampler records the size of ``leads`` and ``lead_events``
(heap and indexes) and the latency of ``lease_next`` in that window.

It checks at the end that every lead pushed was completed exactly once (the
workers' own record) and that nothing is left queued or leased, then prints
the samples and compares the first and the last windows: sizes must stay
bounded and lease latency at the end must match the start. A failed check
exits 1 without a figure.

Usage, from the repo root::

    .venv/bin/python bench/soak.py                 # 200,000 leads at 1,000/s, 8 workers
    .venv/bin/python bench/soak.py --leads 20000   # a quick look
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import text

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core import DEFAULT_SERVER_URL, engine_for, fresh_database, machine, percentile

from app.model import CompleteItem, NewLead
from app.queue import Queue

SESSION = "soak"
PUSH_BATCH = 1000
SIZES_SQL = text("""
SELECT pg_table_size('leads') AS leads_heap,
       pg_indexes_size('leads') AS leads_indexes,
       pg_table_size('lead_events') AS events_heap,
       pg_indexes_size('lead_events') AS events_indexes,
       (SELECT count(*) FROM leads) AS rows
""")


@dataclass
class Sample:
    at_s: float
    done: int
    rows: int
    leads_heap_kb: int
    leads_indexes_kb: int
    events_heap_kb: int
    events_indexes_kb: int
    lease_p50_ms: float
    lease_p99_ms: float


@dataclass
class Soak:
    leads: int
    workers: int
    batch: int
    backlog: int
    prune_after_s: float
    completed: set[int] = field(default_factory=set)
    doubles: int = 0
    lease_times: list[float] = field(default_factory=list)
    pushed: int = 0
    pruned: int = 0
    producing: bool = True


async def produce(queue: Queue, soak: Soak, rate: float) -> None:
    """Push in batches at ``rate`` leads/s, keeping at most ``backlog`` not yet completed.

    A steady rate makes the run last long enough for autovacuum (which wakes
    every ``autovacuum_naptime``, a minute by default) to show what it keeps.
    """
    started = time.monotonic()
    while soak.pushed < soak.leads:
        behind_schedule = soak.pushed < (time.monotonic() - started) * rate
        if not behind_schedule or soak.pushed - len(soak.completed) >= soak.backlog:
            await asyncio.sleep(0.01)
            continue
        n = min(PUSH_BATCH, soak.leads - soak.pushed)
        await queue.push(SESSION, [NewLead({"i": soak.pushed + i}) for i in range(n)])
        soak.pushed += n
    soak.producing = False


async def work(queue: Queue, soak: Soak, owner: str) -> None:
    while True:
        started = time.perf_counter()
        leases = await queue.lease_next(SESSION, owner, max=soak.batch, ttl_s=300)
        soak.lease_times.append(time.perf_counter() - started)
        if not leases:
            if not soak.producing and len(soak.completed) >= soak.pushed:
                return
            await asyncio.sleep(0.01)
            continue
        items = [CompleteItem(lease.lead.id, lease.token) for lease in leases]
        for item, answer in zip(items, await queue.complete_many(items), strict=True):
            if not answer.ok:
                raise SystemExit(f"lead {item.lead_id}: completion refused ({answer.code})")
            if item.lead_id in soak.completed:
                soak.doubles += 1
            soak.completed.add(item.lead_id)


async def prune(queue: Queue, soak: Soak, every_s: float) -> None:
    while soak.producing or len(soak.completed) < soak.pushed:
        soak.pruned += await queue.prune(soak.prune_after_s)
        await asyncio.sleep(every_s)


async def sample(queue: Queue, soak: Soak, every_s: float, samples: list[Sample]) -> None:
    started = time.monotonic()
    seen = 0
    while True:
        await asyncio.sleep(every_s)
        async with queue.engine.connect() as conn:
            row = (await conn.execute(SIZES_SQL)).one()
        window = soak.lease_times[seen:] or [0.0]
        seen = len(soak.lease_times)
        samples.append(
            Sample(
                at_s=round(time.monotonic() - started, 1),
                done=len(soak.completed),
                rows=row.rows,
                leads_heap_kb=row.leads_heap // 1024,
                leads_indexes_kb=row.leads_indexes // 1024,
                events_heap_kb=row.events_heap // 1024,
                events_indexes_kb=row.events_indexes // 1024,
                lease_p50_ms=round(percentile(window, 50), 2),
                lease_p99_ms=round(percentile(window, 99), 2),
            )
        )


async def run(args: argparse.Namespace) -> dict[str, Any]:
    soak = Soak(args.leads, args.workers, args.batch, args.backlog, args.prune_after)
    samples: list[Sample] = []
    with fresh_database(args.database_url) as url:
        engine = engine_for(url, pool_size=args.workers + 3)
        queue = Queue(engine)
        sampler = asyncio.create_task(sample(queue, soak, args.sample_every, samples))
        started = time.monotonic()
        try:
            await asyncio.gather(
                produce(queue, soak, args.rate),
                prune(queue, soak, args.prune_every),
                *(work(queue, soak, f"w{i}") for i in range(args.workers)),
            )
            elapsed = time.monotonic() - started
            leftover = await queue.stats(SESSION)
        finally:
            sampler.cancel()
            await asyncio.gather(sampler, return_exceptions=True)
            await engine.dispose()
    problems = []
    if soak.doubles:
        problems.append(f"{soak.doubles} leads completed twice")
    if len(soak.completed) != soak.leads:
        problems.append(f"{len(soak.completed)} of {soak.leads} leads completed")
    if leftover.pending:
        problems.append(f"{leftover.pending} leads left queued or leased")
    if len(samples) < 4:
        problems.append("too few samples; lower --sample-every")
    if problems:
        raise SystemExit("soak failed: " + "; ".join(problems))
    return {
        "machine": machine(args.database_url),
        "load_avg": os.getloadavg()[0],
        "leads": soak.leads,
        "workers": soak.workers,
        "batch": soak.batch,
        "backlog": soak.backlog,
        "rate": args.rate,
        "prune_after_s": soak.prune_after_s,
        "elapsed_s": round(elapsed, 1),
        "leads_per_s": round(soak.leads / elapsed),
        "pruned": soak.pruned,
        "samples": [asdict(s) for s in samples],
    }


def summary(result: dict[str, Any]) -> str:
    samples = [Sample(**s) for s in result["samples"]]
    # The first and last quarter of the run: warm-up excluded, the wind-down included.
    quarter = max(1, len(samples) // 4)
    first, last = samples[1 : 1 + quarter], samples[-quarter - 1 : -1] or samples[-quarter:]

    def mean(values: Sequence[float]) -> float:
        return round(sum(values) / len(values), 2)

    peak = max(samples, key=lambda s: s.leads_heap_kb + s.leads_indexes_kb)
    lines = [
        f"{result['leads']:,} leads, {result['workers']} workers, batch {result['batch']}, "
        f"pushed at {result['rate']:,.0f}/s, backlog ≤ {result['backlog']:,}, "
        f"pruned {result['prune_after_s']} s after finishing: "
        f"{result['elapsed_s']} s, {result['leads_per_s']:,} leads/s, {result['pruned']:,} pruned",
        "",
        "| at s | done | rows | leads heap kB | leads indexes kB | events heap kB "
        "| events indexes kB | lease p50 ms | lease p99 ms |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {s.at_s} | {s.done:,} | {s.rows:,} | {s.leads_heap_kb:,} | {s.leads_indexes_kb:,} "
        f"| {s.events_heap_kb:,} | {s.events_indexes_kb:,} | {s.lease_p50_ms} | {s.lease_p99_ms} |"
        for s in samples
    ]
    lines += [
        "",
        f"lease p50, first quarter {mean([s.lease_p50_ms for s in first])} ms, "
        f"last quarter {mean([s.lease_p50_ms for s in last])} ms",
        f"largest leads table + indexes: {peak.leads_heap_kb + peak.leads_indexes_kb:,} kB "
        f"at {peak.at_s} s ({peak.rows:,} rows)",
    ]
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("LEASEQ_DATABASE_URL", DEFAULT_SERVER_URL),
        help="a server the benchmark may create a database on",
    )
    parser.add_argument("--leads", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100, help="leases per lease_next call")
    parser.add_argument("--backlog", type=int, default=20_000, help="most leads queued at once")
    parser.add_argument("--rate", type=float, default=1000.0, help="leads pushed per second")
    parser.add_argument("--prune-after", type=float, default=5.0, help="seconds after finishing")
    parser.add_argument("--prune-every", type=float, default=1.0)
    parser.add_argument("--sample-every", type=float, default=3.0)
    parser.add_argument("--json", type=Path, help="also write the raw result here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
