"""What every contender of ``python -m bench`` shares: databases, worker processes, figures.

* Databases: one template database per schema (leaseq's migrations, pgqueuer's
  and procrastinate's own installs), made once per invocation; each contender
  run gets a fresh copy (``CREATE DATABASE … TEMPLATE``), dropped after it. Only
  databases named ``leaseq_bench_*`` are created or dropped.
* Workers: W workers run as asyncio tasks spread over P = min(W, CPUs)
  processes (W = 1: one process, one task; W = 16 on two CPUs: two processes of
  eight tasks). Every contender is run so, each worker task with a connection of
  its own, so no contender is capped by one interpreter's GIL and none pays for
  more processes than there are CPUs.
* Figures: drain leads/s from the moment all workers are connected and waiting
  to the moment the last one stops; latencies per call, p50 and p99.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import platform
import time
import traceback
import uuid
import weakref
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

import psutil
import psycopg
from sqlalchemy.engine import make_url

from app.domain.queue import Queue
from app.leasing.entry import Leasing
from app.store.pool import libpq_url

DEFAULT_SERVER_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
PREFIX = "leaseq_bench_"
SESSION = "bench"
LEASE_TTL_S = 300.0
WORKER_TIMEOUT_S = 900.0


# -- the machine --------------------------------------------------------------


def postmaster(url: str) -> psutil.Process | None:
    """The postmaster of the server at ``url`` (the parent of a backend of ours); None when
    it is not a process of this machine (a container's, another host's)."""
    with psycopg.connect(libpq_url(url)) as conn:  # the backend lives while it is open
        [(pid,)] = conn.execute("SELECT pg_backend_pid()").fetchall()
        try:
            backend = psutil.Process(pid)
            parent = backend.parent() if "postgres" in backend.name() else None
        except psutil.Error:
            parent = None
    return parent


def server_cpu_s(postmaster: psutil.Process | None) -> float:
    """CPU seconds of a PostgreSQL server's processes so far: the postmaster's own, its
    children's that have ended (the kernel adds them to it as it reaps them) and those
    running; 0 for a server not of this machine."""
    if postmaster is None:
        return 0.0
    own = postmaster.cpu_times()
    total = own.user + own.system + own.children_user + own.children_system
    for process in postmaster.children():
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:  # ended just now: counted in the postmaster's next read
            continue
        total += times.user + times.system
    return float(total)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cpus() -> int:
    return len(os.sched_getaffinity(0))


def _version(package: str) -> str | None:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return None


def machine(server_url: str) -> dict[str, Any]:
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        row = conn.execute("SELECT current_setting('server_version')").fetchone()
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN ('shared_buffers', "
                "'synchronous_commit', 'fsync', 'max_connections', 'autovacuum')"
            ).fetchall()
        )
    assert row is not None
    return {
        "nproc": cpus(),
        "cpu": cpu_model(),
        "postgresql": row[0],
        "postgresql_settings": settings,
        "python": platform.python_version(),
        "packages": {
            name: _version(name)
            for name in (
                "sqlalchemy",
                "psycopg",
                "fastapi",
                "uvicorn",
                "orjson",
                "pgqueuer",
                "procrastinate",
            )
        },
    }


def load_avg() -> float:
    return round(os.getloadavg()[0], 2)


# -- databases ----------------------------------------------------------------


def admin(server_url: str) -> psycopg.Connection[tuple[Any, ...]]:
    return psycopg.connect(libpq_url(server_url), autocommit=True)


def database_url(server_url: str, name: str) -> str:
    return make_url(server_url).set(database=name).render_as_string(hide_password=False)


def new_name(kind: str) -> str:
    return f"{PREFIX}{kind}_{uuid.uuid4().hex[:10]}"


def create_database(server_url: str, name: str, template: str | None = None) -> str:
    with admin(server_url) as conn:
        clause = f' TEMPLATE "{template}"' if template else ""
        conn.execute(f'CREATE DATABASE "{name}"{clause}')
    return database_url(server_url, name)


def drop_database(server_url: str, name: str) -> None:
    assert name.startswith(PREFIX), name
    with admin(server_url) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


class Templates:
    """One template database per schema kind, made on first use and dropped by ``close``."""

    def __init__(self, server_url: str) -> None:
        self.server_url = server_url
        self.names: dict[str, str] = {}

    def get(self, kind: str, install: Callable[[str], None]) -> str:
        if kind not in self.names:
            name = new_name(f"tpl_{kind}")
            url = create_database(self.server_url, name)
            self.names[kind] = name
            install(url)
            with admin(self.server_url) as conn:  # a template must have no connections
                conn.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                    (name,),
                )
        return self.names[kind]

    def close(self) -> None:
        for name in self.names.values():
            drop_database(self.server_url, name)
        self.names.clear()


@contextmanager
def fresh_copy(server_url: str, template: str) -> Iterator[str]:
    name = new_name("run")
    url = create_database(server_url, name, template)
    try:
        yield url
    finally:
        drop_database(server_url, name)


# -- workers in processes -------------------------------------------------------


@dataclass
class WorkerReport:
    """What one worker process sends back."""

    lease_s: list[float] = field(default_factory=list)
    complete_s: list[float] = field(default_factory=list)
    done_ids: list[int] = field(default_factory=list)
    done_count: int = 0
    finished_at: float = 0.0  # time.monotonic(): one clock for every process on the machine
    cpu_s: float = 0.0


def split(workers: int, processes: int | None = None) -> list[int]:
    """Tasks per process: W workers over ``processes`` (default min(W, CPUs)), as evenly as
    can be."""
    procs = max(1, min(workers, processes or cpus()))
    return [workers // procs + (1 if i < workers % procs else 0) for i in range(procs)]


WorkerMain = Callable[[dict[str, Any], int, str, Callable[[], None]], Awaitable[WorkerReport]]


def _child(
    target: WorkerMain, spec: dict[str, Any], tasks: int, name: str, barrier: Any, out: Any
) -> None:
    def ready() -> None:
        barrier.wait(timeout=WORKER_TIMEOUT_S)

    try:
        cpu = time.process_time()
        report = asyncio.run(target(spec, tasks, name, ready))
        report.cpu_s = time.process_time() - cpu
        out.put(report)
    except BaseException as exc:
        out.put(f"{name}: {type(exc).__name__}: {exc}\n{traceback.format_exc()}")
        with suppress(Exception):
            barrier.abort()


def run_workers(
    target: WorkerMain, spec: dict[str, Any], workers: int, processes: int | None = None
) -> tuple[list[WorkerReport], float]:
    """Start the worker processes (``processes``, default min(W, CPUs)), release them together;
    their reports and the start instant.

    ``target(spec, tasks, name, ready)`` runs in each process: it connects its
    ``tasks`` workers, calls ``ready()`` (which returns when every process is
    ready), drains, and returns its report.
    """
    ctx = mp.get_context("spawn")
    shares = split(workers, processes)
    barrier = ctx.Barrier(len(shares) + 1)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=_child, args=(target, spec, tasks, f"p{i}", barrier, out), daemon=True)
        for i, tasks in enumerate(shares)
    ]
    for proc in procs:
        proc.start()
    try:
        with suppress(Exception):  # a worker failed before it was ready: its message follows
            barrier.wait(timeout=WORKER_TIMEOUT_S)
        started = time.monotonic()
        raw = [out.get(timeout=WORKER_TIMEOUT_S) for _ in procs]
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
                proc.join(timeout=5)
    if errors := [r for r in raw if isinstance(r, str)]:
        raise RuntimeError("; ".join(errors))
    return list(raw), started


# -- figures ------------------------------------------------------------------


def percentile_ms(samples: Sequence[float], pct: float) -> float | None:
    """Nearest-rank percentile of seconds, in milliseconds (None without samples)."""
    if not samples:
        return None
    ordered = sorted(samples)
    rank = max(1, min(len(ordered), round(pct / 100 * len(ordered) + 0.5)))
    return round(ordered[rank - 1] * 1000, 2)


def median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def timed(started: float, n: int) -> float:
    """n per second since ``started`` (time.perf_counter())."""
    return round(n / max(time.perf_counter() - started, 1e-9), 1)


_leasing: weakref.WeakKeyDictionary[Queue, Leasing] = weakref.WeakKeyDictionary()


def leasing_of(queue: Queue) -> Leasing:
    """The leasing over ``queue``, one per queue as one process has (its groups, its hints)."""
    if queue not in _leasing:
        _leasing[queue] = Leasing(queue)
    return _leasing[queue]
