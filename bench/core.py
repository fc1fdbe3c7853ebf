"""Benchmark of the queue core (``app.domain.queue.Queue``) straight on PostgreSQL, no HTTP.

For each run it creates a fresh database on the server, migrates it, pushes N
leads in batches, drains them with W concurrent workers, checks that every lead
was leased once and completed once, and drops the database. Runs:

* batch 1:   ``lease_next(max=1)`` then ``complete``
* batch 100: ``lease_next(max=100)`` then ``complete_many``

each with the ledger on, off, or both (``--ledger``). Workers are asyncio tasks
sharing one pool (``app.store.pool.Database``, pool_size = W), or with ``--processes``
one OS process each (one pool and one connection per process).

A run whose checks fail prints what is wrong and exits 1 without a figure.

Besides leads/s and the p50/p99 latency of ``lease_next``, each run reports
the CPU time its workers and their PostgreSQL backends spent per lead (read
from /proc when the server is on this machine): on a shared machine that
figure holds steady while throughput moves.

``--round-trips`` instead counts, for every queue operation, the statements
sent and the network round trips libpq makes (both from libpq's protocol
trace), on a small run.

Usage, from the repo root::

    .venv/bin/python bench/core.py                       # N=20000, W=8, ledger on
    .venv/bin/python bench/core.py --ledger both --processes
    .venv/bin/python bench/core.py --round-trips
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import re
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from datetime import timedelta
from importlib import metadata
from pathlib import Path
from typing import Any

import psycopg
from sqlalchemy.engine import make_url

from app.config import Settings
from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import Connection, Database, libpq_url
from bench import common
from leaseq.model import CompleteItem, NewLead, RenewItem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import admin, cpu_model  # bench/common.py, shared with python -m bench

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
SESSION = "bench"
LEASE_TTL_S = 300.0


# -- the machine --------------------------------------------------------------


def machine(server_url: str) -> dict[str, Any]:
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version'), version()").fetchone()
        settings: dict[str, str] = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('shared_buffers', 'synchronous_commit', 'fsync', 'max_connections')"
            ).fetchall()
        )
    assert row is not None
    return {
        "nproc": len(os.sched_getaffinity(0)),
        "cpu": cpu_model(),
        "postgresql": row[0],
        "postgresql_full": row[1],
        "postgresql_settings": settings,
        "python": platform.python_version(),
        "psycopg_pool": metadata.version("psycopg-pool"),
        "psycopg": f"{psycopg.__version__} ({psycopg.pq.__impl__}, libpq {psycopg.pq.version()})",
    }


def cpu_seconds(pid: int, name: str | None = None) -> float | None:
    """CPU seconds process ``pid`` has used (from /proc), or None when it is not there.

    With ``name``, also None when the process is called otherwise (a pid from
    a database server on another machine means nothing here).
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    comm, rest = stat.split("(", 1)[1].rsplit(")", 1)
    if name is not None and comm != name:
        return None
    fields = rest.split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def backend_cpu_s(pids: Sequence[int]) -> float | None:
    """CPU seconds the PostgreSQL backends ``pids`` have used, or None (not a local server)."""
    seconds = [cpu_seconds(pid, "postgres") for pid in pids]
    return None if None in seconds else sum(s or 0.0 for s in seconds)


async def backend_pids(db: Database, *, but_the_asker: bool = False) -> list[int]:
    """The client backends connected to this pool's (benchmark-only) database.

    ``but_the_asker`` leaves out the connection asking (a pool of its own).
    """
    asker = "AND pid <> pg_backend_pid()" if but_the_asker else ""
    rows = await db.rows(
        "SELECT pid FROM pg_stat_activity "
        f"WHERE datname = current_database() AND backend_type = 'client backend' {asker}"
    )
    return [row["pid"] for row in rows]


# -- fresh databases ----------------------------------------------------------


@contextmanager
def fresh_database(server_url: str) -> Iterator[str]:
    """A new, migrated database on the server, dropped on the way out."""
    name = f"leaseq_bench_{uuid.uuid4().hex[:12]}"
    with admin(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(server_url).set(database=name).render_as_string(hide_password=False)
    try:
        migrate.upgrade(url)
        yield url
    finally:
        with admin(server_url) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def database_for(url: str, pool_size: int) -> Database:
    """The service's own pool (app.store.pool) on ``url``, with a generous statement timeout."""
    return Database.from_settings(Settings(statement_timeout_ms=60_000), url, pool_size=pool_size)


# -- one run ------------------------------------------------------------------


@dataclass
class RunResult:
    batch: int
    ledger: bool
    runner: str
    leads: int
    workers: int
    push_s: float
    drain_s: float
    leads_per_s: int
    push_leads_per_s: int
    lease_calls: int
    client_cpu: float  # CPU seconds of the benchmark's workers per second: 1.0 is one core
    server_cpu: float | None  # the same for their PostgreSQL backends (local server only)
    cpu_ms_per_lead: float | None  # client + backends: what a lead costs, whatever the load
    load_avg: float  # 1-minute load average after the run: others' work shows here
    repeats: list[int]  # leads/s of every repetition; this run is their median
    lease_p50_ms: float
    lease_p99_ms: float
    complete_p50_ms: float
    complete_p99_ms: float


def percentile(samples: Sequence[float], pct: float) -> float:
    """Nearest-rank percentile (pct from 0 to 100) of seconds, in milliseconds."""
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1] * 1000


@dataclass
class WorkerOutcome:
    lease_latencies: list[float]
    complete_latencies: list[float]
    done_ids: list[int]
    finished_at: float  # time.monotonic(), comparable across processes
    cpu_s: float = 0.0  # CPU seconds of the worker's process while draining (processes only)
    server_cpu_s: float | None = None  # ... and of its PostgreSQL backend (processes only)


async def drain(queue: Queue, owner: str, batch: int, session: str = SESSION) -> WorkerOutcome:
    """Lease and complete until nothing is left; every refusal is an error."""
    lease_lat: list[float] = []
    complete_lat: list[float] = []
    done: list[int] = []
    while True:
        started = time.perf_counter()
        leases = await common.leasing_of(queue).lease_next(
            session, owner, max=batch, ttl_s=LEASE_TTL_S
        )
        leased = time.perf_counter()
        if not leases:
            return WorkerOutcome(lease_lat, complete_lat, done, time.monotonic())
        lease_lat.append(leased - started)
        if batch == 1:
            lead = await queue.complete(leases[0].lead.id, leases[0].token)
            done.append(lead.id)
        else:
            answers = await queue.complete_many(
                [CompleteItem(lease.lead.id, lease.token) for lease in leases]
            )
            if lost := [answer.lead_id for answer in answers if not answer.ok]:
                raise RuntimeError(f"{owner}: complete_many refused leads {lost[:5]}")
            done.extend(answer.lead_id for answer in answers)
        complete_lat.append(time.perf_counter() - leased)


async def push_all(
    queue: Queue, n: int, batch: int, session: str = SESSION
) -> tuple[list[int], float]:
    ids: list[int] = []
    started = time.perf_counter()
    for first in range(0, n, batch):
        leads = [NewLead(payload={"n": i}) for i in range(first, min(n, first + batch))]
        ids.extend((await queue.push(session, leads)).ids)
    return ids, time.perf_counter() - started


async def drain_with_tasks(
    url: str, ledger: bool, batch: int, workers: int
) -> tuple[list[WorkerOutcome], float, float, float | None]:
    """The outcomes, the start (time.monotonic()), and the CPU seconds of this process
    and of its PostgreSQL backends while draining."""
    db = database_for(url, pool_size=workers)
    try:
        queue = Queue(db, ledger=ledger)
        await asyncio.gather(*(queue.db_now() for _ in range(workers)))  # open W connections
        pids = await backend_pids(db)
        server_cpu = backend_cpu_s(pids)
        started, cpu = time.monotonic(), time.process_time()
        outcomes = await asyncio.gather(*(drain(queue, f"w{i}", batch) for i in range(workers)))
        cpu_s = time.process_time() - cpu
        server_after = backend_cpu_s(pids)
        server_cpu_s = (
            None if server_cpu is None or server_after is None else server_after - server_cpu
        )
        return list(outcomes), started, cpu_s, server_cpu_s
    finally:
        await db.close()


def _process_worker(
    url: str, ledger: bool, batch: int, owner: str, start: Any, results: Any
) -> None:
    async def main() -> WorkerOutcome:
        db = database_for(url, pool_size=1)
        try:
            queue = Queue(db, ledger=ledger)
            await queue.db_now()  # connected before the clock starts
            [row] = await db.rows("SELECT pg_backend_pid() AS pid")
            pid = row["pid"]
            start.wait()
            cpu, server_cpu = time.process_time(), backend_cpu_s([pid])
            outcome = await drain(queue, owner, batch)
            outcome.cpu_s = time.process_time() - cpu
            server_after = backend_cpu_s([pid])
            if server_cpu is not None and server_after is not None:
                outcome.server_cpu_s = server_after - server_cpu
            return outcome
        finally:
            await db.close()

    try:
        results.put(asdict(asyncio.run(main())))
    except BaseException as exc:
        results.put({"error": f"{owner}: {type(exc).__name__}: {exc}"})
        raise


def drain_with_processes(
    url: str, ledger: bool, batch: int, workers: int
) -> tuple[list[WorkerOutcome], float]:
    ctx = mp.get_context("spawn")
    start = ctx.Barrier(workers + 1)
    results = ctx.Queue()
    procs = [
        ctx.Process(target=_process_worker, args=(url, ledger, batch, f"p{i}", start, results))
        for i in range(workers)
    ]
    for proc in procs:
        proc.start()
    try:
        start.wait(timeout=120)
        started = time.monotonic()
        raw = [results.get(timeout=600) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
    if errors := [r["error"] for r in raw if "error" in r]:
        raise RuntimeError("; ".join(errors))
    return [WorkerOutcome(**r) for r in raw], started


async def verify(
    url: str, n: int, ids: list[int], done_ids: list[int], ledger: bool, session: str = SESSION
) -> list[str]:
    """Everything that says this run was not 'every lead done exactly once'."""
    problems: list[str] = []
    if len(ids) != n or len(set(ids)) != n:
        problems.append(f"push returned {len(ids)} ids ({len(set(ids))} distinct), expected {n}")
    dupes = [lead for lead, k in Counter(done_ids).items() if k > 1]
    if dupes:
        problems.append(f"{len(dupes)} leads completed more than once by workers, e.g. {dupes[:5]}")
    if set(done_ids) != set(ids):
        problems.append(
            f"workers completed {len(set(done_ids))} distinct leads; "
            f"{len(set(ids) - set(done_ids))} pushed leads never completed"
        )
    db = database_for(url, pool_size=1)
    try:
        counts = await Queue(db).stats(session)
        found = (counts.done, counts.queued, counts.leased, counts.failed, counts.cached)
        if found != (n, 0, 0, 0, 0):
            problems.append(f"stats in the database: {counts}, expected done={n} and nothing else")
        [row] = await db.rows(
            "SELECT count(*) AS leads, count(*) FILTER (WHERE attempts <> 1) AS reattempted "
            "FROM leads WHERE session = %(s)s",
            {"s": session},
        )
        if row["leads"] != n or row["reattempted"]:
            problems.append(
                f"{row['leads']} leads in the table, {row['reattempted']} leased more than once"
            )
        events = {
            r["event"]: (r["n"], r["leads"])
            for r in await db.rows(
                "SELECT event, count(*) AS n, count(DISTINCT lead_id) AS leads "
                "FROM lead_events WHERE session = %(s)s GROUP BY event",
                {"s": session},
            )
        }
        expected = {e: (n, n) for e in ("pushed", "leased", "completed")} if ledger else {}
        if events != expected:
            problems.append(f"ledger (event: rows, leads) is {events}, expected {expected}")
    finally:
        await db.close()
    return problems


async def one_run(
    server_url: str,
    *,
    n: int,
    push_batch: int,
    workers: int,
    batch: int,
    ledger: bool,
    processes: bool,
) -> RunResult:
    with fresh_database(server_url) as url:
        db = database_for(url, pool_size=1)
        try:
            ids, push_s = await push_all(Queue(db, ledger=ledger), n, push_batch)
        finally:
            await db.close()
        if processes:
            outcomes, started = await asyncio.to_thread(
                drain_with_processes, url, ledger, batch, workers
            )
            cpu_s = sum(o.cpu_s for o in outcomes)
            backends = [o.server_cpu_s for o in outcomes]
            server_cpu_s = None if None in backends else sum(b or 0.0 for b in backends)
        else:
            outcomes, started, cpu_s, server_cpu_s = await drain_with_tasks(
                url, ledger, batch, workers
            )
        drain_s = max(o.finished_at for o in outcomes) - started
        done_ids = [lead for o in outcomes for lead in o.done_ids]
        lease_lat = [s for o in outcomes for s in o.lease_latencies]
        complete_lat = [s for o in outcomes for s in o.complete_latencies]
        if problems := await verify(url, n, ids, done_ids, ledger):
            raise SystemExit(
                f"FAILED batch={batch} ledger={'on' if ledger else 'off'}: "
                + "; ".join(problems)
                + " — no figure reported"
            )
    return RunResult(
        batch=batch,
        ledger=ledger,
        runner="processes" if processes else "tasks",
        leads=n,
        workers=workers,
        push_s=round(push_s, 3),
        drain_s=round(drain_s, 3),
        leads_per_s=round(n / drain_s),
        push_leads_per_s=round(n / push_s),
        lease_calls=len(lease_lat),
        client_cpu=round(cpu_s / drain_s, 2),
        server_cpu=None if server_cpu_s is None else round(server_cpu_s / drain_s, 2),
        cpu_ms_per_lead=(
            None if server_cpu_s is None else round((cpu_s + server_cpu_s) / n * 1000, 3)
        ),
        load_avg=round(os.getloadavg()[0], 2),
        repeats=[round(n / drain_s)],
        lease_p50_ms=round(percentile(lease_lat, 50), 2),
        lease_p99_ms=round(percentile(lease_lat, 99), 2),
        complete_p50_ms=round(percentile(complete_lat, 50), 2),
        complete_p99_ms=round(percentile(complete_lat, 99), 2),
    )


def table(results: Sequence[RunResult]) -> str:
    lines = [
        "| mode | ledger | workers | leads/s (median, range) | lease_next p50 ms "
        "| lease_next p99 ms | CPU ms per lead (client + server) | push leads/s |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        spread = f" ({min(r.repeats):,} to {max(r.repeats):,})" if len(r.repeats) > 1 else ""
        verbs = "lease + complete" if r.batch == 1 else "lease + complete_many"
        cpu = "n/a" if r.cpu_ms_per_lead is None else f"{r.cpu_ms_per_lead:.3f}"
        lines.append(
            f"| batch {r.batch} ({verbs}) | {'on' if r.ledger else 'off'} | {r.workers} {r.runner} "
            f"| {r.leads_per_s:,}{spread} | {r.lease_p50_ms:.2f} | {r.lease_p99_ms:.2f} | {cpu} "
            f"| {r.push_leads_per_s:,} |"
        )
    return "\n".join(lines)


# -- round trips --------------------------------------------------------------

_MARK = "leaseq-bench-mark"


def count_round_trips(trace: str) -> tuple[dict[str, int], dict[str, int]]:
    """Round trips (a run of F lines, then B lines) and statements (a ``Query`` or
    ``Bind`` message) per marked section of a libpq trace."""
    sections: dict[str, int] = {}
    statements: Counter[str] = Counter()
    current: str | None = None
    previous = "B"
    for line in trace.splitlines():
        parts = line.split("\t")
        if len(parts) < 3 or parts[0] not in ("F", "B"):
            continue
        direction = parts[0]
        if direction == "F" and (found := re.search(_MARK + r" ([\w.-]+)", line)):
            current = found.group(1)
            sections[current] = -1  # the marker's own round trip is not counted
            statements[current] = -1
        if direction == "F" and previous == "B" and current is not None:
            sections[current] += 1
        if direction == "F" and parts[2] in ("Query", "Bind") and current is not None:
            statements[current] += 1
        previous = direction
    return sections, dict(statements)


async def measure_round_trips(server_url: str, ledger: bool) -> list[dict[str, Any]]:
    """Each queue operation once, on one traced connection: statements and round trips."""
    trace_file = Path(tempfile.mkstemp(prefix="leaseq-trace-", suffix=".txt")[1])
    fd = os.open(trace_file, os.O_WRONLY | os.O_TRUNC)
    traced: list[Any] = []
    current = ["-"]
    rows: list[dict[str, Any]] = []
    with fresh_database(server_url) as url:
        # One connection (pool_size 1), traced once: every step below runs on it.
        db = database_for(url, pool_size=1)

        async def trace(conn: Connection) -> None:
            conn.pgconn.trace(fd)
            conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS)
            traced.append(conn.pgconn)

        await db.run(trace)
        queue = Queue(db, ledger=ledger)
        future = (await queue.db_now()) + timedelta(hours=1)
        state: dict[str, Any] = {}

        async def lease_one() -> None:
            [state["lease"]] = await common.leasing_of(queue).lease_next(SESSION, "w", max=1)

        async def lease_many() -> None:
            state["leases"] = await common.leasing_of(queue).lease_next(SESSION, "w", max=100)

        async def push_keyed_dupes() -> None:
            await queue.push(SESSION, [NewLead({"k": 1}, key="a"), NewLead({"k": 2}, key="b")])

        steps: list[tuple[str, Callable[[], Awaitable[Any]]]] = [
            ("push.1", lambda: queue.push(SESSION, [NewLead({"i": 0})])),
            ("push.1000", lambda: queue.push(SESSION, [NewLead({"i": i}) for i in range(1000)])),
            ("push.keys-new", push_keyed_dupes),
            ("push.keys-dup", push_keyed_dupes),
            ("lease_next.1", lease_one),
            ("renew", lambda: queue.renew(state["lease"].lead.id, state["lease"].token)),
            ("release", lambda: queue.release(state["lease"].lead.id, state["lease"].token)),
            ("lease_next.1-again", lease_one),
            ("complete", lambda: queue.complete(state["lease"].lead.id, state["lease"].token)),
            ("lease_next.100", lease_many),
            (
                "renew_many.100",
                lambda: queue.renew_many([RenewItem(x.lead.id, x.token) for x in state["leases"]]),
            ),
            (
                "complete_many.100",
                lambda: queue.complete_many(
                    [CompleteItem(x.lead.id, x.token) for x in state["leases"]]
                ),
            ),
            ("lease_next.100-to-expire", lease_many),
            ("sweep", lambda: queue.sweep(SESSION, now=future)),
            ("sweep_all", lambda: queue.sweep_all(now=future)),
            ("cancel", lambda: queue.cancel(state["leases"][0].lead.id)),
            ("retry", lambda: queue.retry(state["leases"][0].lead.id)),
            ("get", lambda: queue.get(state["leases"][0].lead.id)),
            ("stats", lambda: queue.stats(SESSION)),
            ("stats_all", queue.stats_all),
        ]
        try:
            for name, step in steps:
                await db.rows(f"SELECT '{_MARK} {name}'")
                current[0] = name
                started = time.perf_counter()
                await step()
                elapsed_ms = round((time.perf_counter() - started) * 1000, 2)
                rows.append({"operation": name, "ms": elapsed_ms})
                current[0] = "-"
        finally:
            for pgconn in traced:
                pgconn.untrace()  # flushes libpq's buffered trace
            await db.close()
            os.close(fd)
    trips, statements = count_round_trips(await asyncio.to_thread(trace_file.read_text))
    await asyncio.to_thread(trace_file.unlink)
    for row in rows:
        row["statements"] = statements.get(row["operation"])
        row["round_trips"] = trips.get(row["operation"])
    return rows


# -- command line -------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("LEASEQ_DATABASE_URL") or DEFAULT_SERVER_URL,
        help="server to create the benchmark databases on (default: LEASEQ_DATABASE_URL, "
        f"else {DEFAULT_SERVER_URL})",
    )
    parser.add_argument("-n", "--leads", type=int, default=20_000)
    parser.add_argument("--push-batch", type=int, default=1000)
    parser.add_argument("-w", "--workers", type=int, default=8)
    parser.add_argument(
        "--batch",
        type=int,
        action="append",
        choices=range(1, 101),
        metavar="{1..100}",
        help="lease batch size; repeat for several (default: 1 and 100)",
    )
    parser.add_argument("--ledger", choices=("on", "off", "both"), default="on")
    parser.add_argument(
        "--processes", action="store_true", help="one OS process per worker, not asyncio tasks"
    )
    parser.add_argument(
        "--repeat", type=int, default=1, help="run each mode this often and report the median run"
    )
    parser.add_argument(
        "--round-trips", action="store_true", help="count statements and round trips instead"
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    info = machine(args.database_url)
    print(
        f"# {info['nproc']} CPUs ({info['cpu']}), PostgreSQL {info['postgresql']}, "
        f"Python {info['python']}, psycopg {info['psycopg']}, psycopg-pool {info['psycopg_pool']}",
        flush=True,
    )
    ledgers = {"on": [True], "off": [False], "both": [True, False]}[args.ledger]
    output: dict[str, Any] = {"machine": info}
    if args.round_trips:
        output["round_trips"] = {}
        for ledger in ledgers:
            rows = await measure_round_trips(args.database_url, ledger)
            output["round_trips"]["on" if ledger else "off"] = rows
            print(f"\nledger {'on' if ledger else 'off'}:")
            print("| operation | statements | round trips | ms |")
            print("| --- | ---: | ---: | ---: |")
            for row in rows:
                cells = (row["operation"], row["statements"], row["round_trips"], row["ms"])
                print("| " + " | ".join(str(cell) for cell in cells) + " |")
    else:
        results: list[RunResult] = []
        for ledger in ledgers:
            for batch in args.batch or [1, 100]:
                runs = []
                for _ in range(args.repeat):
                    run = await one_run(
                        args.database_url,
                        n=args.leads,
                        push_batch=args.push_batch,
                        workers=args.workers,
                        batch=batch,
                        ledger=ledger,
                        processes=args.processes,
                    )
                    runs.append(run)
                    print(
                        f"batch {batch:>3}, ledger {'on ' if ledger else 'off'}: "
                        f"{run.leads_per_s:>6,} leads/s ({run.drain_s:.2f} s), "
                        f"lease_next p50 {run.lease_p50_ms:.2f} ms p99 {run.lease_p99_ms:.2f} ms "
                        f"over {run.lease_calls} calls; push {run.push_leads_per_s:,} leads/s; "
                        f"CPU: client {run.client_cpu:.2f} server {run.server_cpu} "
                        f"= {run.cpu_ms_per_lead} ms/lead; load {run.load_avg:.1f}; "
                        "checked: every lead done exactly once",
                        flush=True,
                    )
                runs.sort(key=lambda r: r.leads_per_s)
                median = runs[len(runs) // 2]
                median.repeats = [r.leads_per_s for r in runs]
                results.append(median)
        output["runs"] = [asdict(r) for r in results]
        print()
        print(table(results))
    if args.json:
        args.json.write_text(json.dumps(output, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
