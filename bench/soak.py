"""Soak benchmark: push and drain many leads with pruning on; the table must stay small.

A producer keeps a bounded backlog queued, W workers lease in batches and
complete, and a pruner deletes terminal leads (and their ledger rows) a few
seconds after they finish, as ``leaseq serve`` does with ``LEASEQ_PRUNE_AFTER_S``.
Every few seconds a sampler records the size of ``leads`` and ``lead_events``
(heap and indexes) and the latency of ``lease_next`` in that window.

Each sample also keeps every index's size, the dead and live tuple counts
and how many times autovacuum has run, so growth can be traced to its cause.
With ``--json`` the file is rewritten after every sample (``"finished":
false`` until the end), so a long run can be read while it goes.

It checks at the end that every lead pushed was completed exactly once (the
workers' own record) and that nothing is left queued or leased, then prints
the samples and compares the first and the last windows: sizes must stay
bounded and lease latency at the end must match the start. A failed check
exits 1 without a figure.

Usage, from the repo root::

    .venv/bin/python bench/soak.py                 # 200,000 leads at 1,000/s, 8 workers
    .venv/bin/python bench/soak.py --leads 20000   # a quick look
    .venv/bin/python bench/soak.py --embedded /tmp/soak-pg --rate 150 --duration 3900 \
        --workers 4 --batch 10 --backlog 2000 --prune-after 30 --sample-every 30 \
        --json bench/results/soak-long.json   # an hour on a server of its own
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import psycopg

sys.path.insert(0, str(Path(__file__).resolve().parent))

from core import DEFAULT_SERVER_URL, database_for, fresh_database, machine, percentile

from app.domain.queue import Queue
from app.store.pool import libpq_url
from bench import common
from leaseq.model import CompleteItem, NewLead

SESSION = "soak"
PUSH_BATCH = 1000
SIZES_SQL = """
SELECT pg_table_size('leads') AS leads_heap,
       pg_indexes_size('leads') AS leads_indexes,
       pg_table_size('lead_events') AS events_heap,
       pg_indexes_size('lead_events') AS events_indexes,
       (SELECT count(*) FROM leads) AS rows
"""
INDEX_SIZES_SQL = """
SELECT indexrelname AS name, pg_relation_size(indexrelid) AS size
FROM pg_stat_user_indexes WHERE relname IN ('leads', 'lead_events')
"""
INDEX_ENTRIES_SQL = """
SELECT c.relname AS name, c.reltuples AS entries
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid IN (CAST('leads' AS regclass), CAST('lead_events' AS regclass))
"""
TABLE_STATS_SQL = """
SELECT relname AS name, n_live_tup AS live, n_dead_tup AS dead,
       autovacuum_count AS autovacuums, autoanalyze_count AS autoanalyzes
FROM pg_stat_user_tables WHERE relname IN ('leads', 'lead_events')
"""


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
    lease_calls: int = 0
    prune_p50_ms: float = 0.0
    prune_p99_ms: float = 0.0
    index_kb: dict[str, int] = field(default_factory=dict)
    index_entries: dict[str, int] = field(default_factory=dict)  # as of the last (auto)vacuum
    load_avg: float = 0.0  # the machine's 1-minute load: others' work shows here
    dead_tuples: dict[str, int] = field(default_factory=dict)
    autovacuums: dict[str, int] = field(default_factory=dict)


@dataclass
class Soak:
    leads: int
    workers: int
    batch: int
    backlog: int
    prune_after_s: float
    idle_sleep_s: float = 0.01
    completed: set[int] = field(default_factory=set)
    doubles: int = 0
    lease_times: list[float] = field(default_factory=list)
    prune_times: list[float] = field(default_factory=list)
    pushed: int = 0
    pruned: int = 0
    producing: bool = True


async def produce(queue: Queue, soak: Soak, rate: float) -> None:
    """Push what is due at ``rate`` leads/s, keeping at most ``backlog`` not yet completed.

    A steady rate makes the run last long enough for autovacuum (which wakes
    every ``autovacuum_naptime``, a minute by default) to show what it keeps.
    Each push carries what fell due since the last one (up to ``PUSH_BATCH``),
    so a slow rate is a trickle of small pushes, not a burst every few seconds.
    """
    started = time.monotonic()
    while soak.pushed < soak.leads:
        due = int((time.monotonic() - started) * rate) - soak.pushed
        if due <= 0 or soak.pushed - len(soak.completed) >= soak.backlog:
            await asyncio.sleep(0.02)
            continue
        n = min(PUSH_BATCH, due, soak.leads - soak.pushed)
        await queue.push(SESSION, [NewLead({"i": soak.pushed + i}) for i in range(n)])
        soak.pushed += n
    soak.producing = False


async def work(queue: Queue, soak: Soak, owner: str) -> None:
    while True:
        started = time.perf_counter()
        leases = await common.leasing_of(queue).lease_next(
            SESSION, owner, max=soak.batch, ttl_s=300
        )
        soak.lease_times.append(time.perf_counter() - started)
        if not leases:
            if not soak.producing and len(soak.completed) >= soak.pushed:
                return
            await asyncio.sleep(soak.idle_sleep_s)
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
        started = time.perf_counter()
        soak.pruned += await queue.prune(soak.prune_after_s)
        soak.prune_times.append(time.perf_counter() - started)
        await asyncio.sleep(every_s)


async def sample(
    queue: Queue,
    soak: Soak,
    every_s: float,
    samples: list[Sample],
    on_sample: Callable[[], None] = lambda: None,
) -> None:
    started = time.monotonic()
    seen = pruned_seen = 0
    while True:
        await asyncio.sleep(every_s)
        [row] = await queue.db.rows(SIZES_SQL)
        indexes = {r["name"]: r["size"] // 1024 for r in await queue.db.rows(INDEX_SIZES_SQL)}
        entries = {r["name"]: round(r["entries"]) for r in await queue.db.rows(INDEX_ENTRIES_SQL)}
        tables = await queue.db.rows(TABLE_STATS_SQL)
        window = soak.lease_times[seen:] or [0.0]
        seen = len(soak.lease_times)
        prunes = soak.prune_times[pruned_seen:] or [0.0]
        pruned_seen = len(soak.prune_times)
        samples.append(
            Sample(
                at_s=round(time.monotonic() - started, 1),
                done=len(soak.completed),
                rows=row["rows"],
                leads_heap_kb=row["leads_heap"] // 1024,
                leads_indexes_kb=row["leads_indexes"] // 1024,
                events_heap_kb=row["events_heap"] // 1024,
                events_indexes_kb=row["events_indexes"] // 1024,
                lease_p50_ms=round(percentile(window, 50), 2),
                lease_p99_ms=round(percentile(window, 99), 2),
                lease_calls=len(window),
                prune_p50_ms=round(percentile(prunes, 50), 2),
                prune_p99_ms=round(percentile(prunes, 99), 2),
                index_kb=dict(sorted(indexes.items())),
                index_entries=dict(sorted(entries.items())),
                load_avg=round(os.getloadavg()[0], 2),
                dead_tuples={t["name"]: t["dead"] for t in tables},
                autovacuums={t["name"]: t["autovacuums"] for t in tables},
            )
        )
        on_sample()


def autovacuum_settings(url: str) -> dict[str, str]:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        rows = conn.execute(
            "SELECT name, setting FROM pg_settings WHERE name = 'autovacuum' "
            "OR name LIKE 'autovacuum\\_%' ORDER BY name"
        ).fetchall()
    return dict(rows)


def report(
    args: argparse.Namespace, soak: Soak, samples: list[Sample], server: dict[str, Any]
) -> dict[str, Any]:
    """What the run has shown so far (``finished`` is set by the caller at the end)."""
    return {
        "finished": False,
        **server,
        "load_avg": os.getloadavg()[0],
        "leads": soak.leads,
        "workers": soak.workers,
        "batch": soak.batch,
        "backlog": soak.backlog,
        "rate": args.rate,
        "prune_after_s": soak.prune_after_s,
        "pushed": soak.pushed,
        "completed": len(soak.completed),
        "pruned": soak.pruned,
        "samples": [asdict(s) for s in samples],
    }


async def run(args: argparse.Namespace) -> dict[str, Any]:
    soak = Soak(
        args.leads, args.workers, args.batch, args.backlog, args.prune_after, args.idle_sleep
    )
    samples: list[Sample] = []
    server = {
        "machine": machine(args.database_url),
        "autovacuum": autovacuum_settings(args.database_url),
    }

    def write_partial() -> None:
        if args.json:
            partial = report(args, soak, samples, server)
            args.json.write_text(json.dumps(partial, indent=1, default=str) + "\n")

    with fresh_database(args.database_url) as url:
        db = database_for(url, pool_size=args.workers + 3)
        queue = Queue(db)
        sampler = asyncio.create_task(
            sample(queue, soak, args.sample_every, samples, write_partial)
        )
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
            await db.close()
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
    return report(args, soak, samples, server) | {
        "finished": True,
        "elapsed_s": round(elapsed, 1),
        "leads_per_s": round(soak.leads / elapsed),
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
    parser.add_argument(
        "--embedded",
        type=Path,
        metavar="DIR",
        help="start an embedded PostgreSQL of its own in DIR and soak that (default: the URL)",
    )
    parser.add_argument("--leads", type=int, default=200_000)
    parser.add_argument(
        "--duration",
        type=float,
        metavar="S",
        help="push for S seconds at --rate (sets --leads to rate * duration)",
    )
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--batch", type=int, default=100, help="leases per lease_next call")
    parser.add_argument("--backlog", type=int, default=20_000, help="most leads queued at once")
    parser.add_argument("--rate", type=float, default=1000.0, help="leads pushed per second")
    parser.add_argument("--prune-after", type=float, default=5.0, help="seconds after finishing")
    parser.add_argument("--prune-every", type=float, default=1.0)
    parser.add_argument(
        "--idle-sleep", type=float, default=0.01, help="a worker's pause after an empty lease"
    )
    parser.add_argument("--sample-every", type=float, default=3.0)
    parser.add_argument("--json", type=Path, help="also write the raw result here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    # SIGTERM, and SIGINT even when started in the background (where the shell
    # ignores it), stop the run the way Ctrl-C does: the database is dropped and
    # an embedded server stopped; the JSON keeps the samples taken so far.
    for stop in (signal.SIGTERM, signal.SIGINT):
        signal.signal(stop, signal.default_int_handler)
    if args.duration is not None:
        args.leads = round(args.rate * args.duration)
    if args.embedded is not None:
        from app.store import embedded

        args.database_url = embedded.start(args.embedded)
    result = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2, default=str) + "\n")
    print(summary(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
