"""The contenders users run, for ``python -m bench``: the SDK's ``Worker``, ``leaseq worker --
true``, and ``xargs -P W -n 1 true`` beside it (the spawn ceiling of the machine).

* ``sdk``: one process of ``leaseq.Worker(client, session, handler, concurrency=W)``
  with every other option at its default (leases keyed, each completion leasing the
  next lead with ``next``) and a no-op async handler, on ``leaseq.AsyncClient`` with
  its default transport, as its users run it (the peers spread W over min(W, CPUs)
  processes: on two CPUs, one worker process shares them better with the service and
  PostgreSQL). Its drain ends at its last completion (counted as the worker's metrics
  count, no polling); the worker's own stop, after an empty lease of its whole
  ``wait_s``, is left out, as a peer's shutdown is.
* ``cli``: one ``leaseq worker -c W --wait 0.5 -q -- true`` process, as a user types it:
  a guard per slot, ``true`` forked and executed per lead. Its drain is read from the
  ledger, from its first lease to its last completion (its interpreter's start and its
  last idle poll are its ``exit_s``, recorded beside); its CPU is its process tree's
  (the worker, its guards and the commands).
* ``go``: one process of leaseq's Go ``Worker`` of concurrency W with every other option
  at its default and a handler that does nothing (clients/go/examples/noop, built once per
  run with the machine's ``go``, offline), stopping once a lease's wait of 0.5 s finds
  nothing. Its drain is read from the ledger, as the cli's is, and its CPU is its process's.
* ``xargs``: ``seq N | xargs -P W -n 1 true``: no queue at all, what spawning N processes
  costs here.
* ``ts``: one ``node`` process of the TypeScript client's ``Worker`` (clients/typescript,
  built with ``npm ci && npm run build``) of concurrency W, every other option at its
  default (prefetch, coalesced completions), a no-op handler. Its drain is read from the
  ledger, as ``cli``'s; its CPU is the node process's.

Each leaseq run checks that every lead was completed exactly once (the ledger's
completions, and the leads' status).
"""

from __future__ import annotations

import functools
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg

from app.store.pool import libpq_url
from bench.common import SESSION, WorkerReport
from leaseq import AsyncClient
from leaseq.model import FinalStatus
from leaseq.worker import Job, Worker
from leaseq.worker.metrics import Metrics

CLI_WAIT_S = 0.5  # the cli worker's long poll: its exit comes this long after its last lead
TS_DRAIN = Path(__file__).resolve().parents[1] / "clients/typescript/dist/bench/drain.js"
GO_CLIENT = Path(__file__).resolve().parents[1] / "clients" / "go"
CHILD_TIMEOUT_S = 600.0


async def sdk_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    """One process of the ``sdk`` contender: a ``Worker`` of concurrency ``tasks``, defaults."""
    report = WorkerReport()

    class LastCompletion(Metrics):
        def completed(self, status: FinalStatus) -> None:
            report.finished_at = time.monotonic()

    async def noop(job: Job) -> None:
        report.done_ids.append(job.lead.id)

    async with AsyncClient(spec["base_url"]) as client:
        worker = Worker(client, SESSION, noop, concurrency=tasks, metrics=LastCompletion())
        ready()
        await worker.run()
    return report


def cli_worker(base_url: str, workers: int) -> tuple[float, float]:
    """``leaseq worker -c W -- true`` to its exit: its wall seconds (start to exit) and the
    CPU seconds of its process tree."""
    argv = [sys.executable, "-m", "leaseq.cli", "worker", "--url", base_url, "-s", SESSION]
    argv += ["-c", str(workers), "--wait", str(CLI_WAIT_S), "-q", "--", "true"]
    return timed_child(argv)


def ts_worker(base_url: str, workers: int) -> tuple[float, float]:
    """The TypeScript ``Worker`` of concurrency W to its exit: its wall seconds and CPU."""
    if not TS_DRAIN.exists():
        raise RuntimeError(f"{TS_DRAIN} is missing: npm ci && npm run build in clients/typescript")
    return timed_child(["node", str(TS_DRAIN), base_url, SESSION, str(workers), str(CLI_WAIT_S)])


@functools.cache
def go_program() -> str:
    """clients/go/examples/noop, built once per run by the machine's ``go`` (offline: the
    client needs the standard library alone); the binary's path."""
    go = shutil.which("go")
    if go is None:
        raise RuntimeError("go is not installed (apt-get install golang-go); or --skip go")
    binary = Path(tempfile.mkdtemp(prefix="leaseq-bench-go-")) / "noop"
    env = {**os.environ, "GOPROXY": "off", "GOTOOLCHAIN": "local"}
    built = subprocess.run(
        [go, "build", "-o", str(binary), "./examples/noop"],
        cwd=GO_CLIENT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    if built.returncode != 0:
        raise RuntimeError(f"go build ./examples/noop failed: {built.stderr[-2000:]}")
    return str(binary)


def go_worker(base_url: str, workers: int) -> tuple[float, float]:
    """The Go ``Worker`` of concurrency W, defaults, to its exit (a lease's wait of
    CLI_WAIT_S after its last lead): its wall seconds and CPU seconds."""
    argv = [go_program(), "-url", base_url, "-session", SESSION, "-concurrency", str(workers)]
    return timed_child([*argv, "-wait", f"{CLI_WAIT_S}s"])


def timed_child(argv: list[str]) -> tuple[float, float]:
    """Run ``argv`` to its exit: its wall seconds and the CPU seconds of its process tree."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    finished = subprocess.run(argv, capture_output=True, timeout=CHILD_TIMEOUT_S, check=False)
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {finished.returncode}: {finished.stderr[-2000:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def ledger_drain(url: str) -> tuple[list[int], float]:
    """The leads the ledger saw completed (once each, or more: the checks say), and the
    seconds from the first lease to the last completion, on the database's clock."""
    with psycopg.connect(libpq_url(url)) as conn:
        done = [
            row[0]
            for row in conn.execute(
                "SELECT lead_id FROM lead_events WHERE event = 'completed' AND session = %s",
                (SESSION,),
            )
        ]
        row = conn.execute(
            "SELECT extract(epoch FROM max(at) FILTER (WHERE event = 'completed')"
            " - min(at) FILTER (WHERE event = 'leased')) FROM lead_events WHERE session = %s",
            (SESSION,),
        ).fetchone()
    assert row is not None and row[0] is not None, "the ledger saw no lease and no completion"
    return done, float(row[0])


def xargs(n: int, workers: int) -> float:
    """Seconds to run ``true`` N times, W at a time, by ``xargs``."""
    began = time.perf_counter()
    with subprocess.Popen(["seq", str(n)], stdout=subprocess.PIPE) as seq:
        argv = ["xargs", "-P", str(workers), "-n", "1", "true"]
        subprocess.run(argv, stdin=seq.stdout, check=True)
    if seq.returncode != 0:
        raise RuntimeError("seq failed")
    return time.perf_counter() - began
