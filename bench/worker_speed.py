"""The worker at the speed of the wire: ``leaseq worker -- true`` and the SDK, before and after.

``python -m bench.worker_speed -n 1000 --before /tmp/before`` (``/tmp/before``:
``git archive <commit> | tar -x``, an older checkout) measures, for this
checkout and the one given, each on a fresh copy of leaseq's schema and one
``leaseq serve`` process of the same checkout on 127.0.0.1 (a user upgrades
both):

- **start**: ``leaseq worker --wait 0 -- true`` on an empty queue, to its exit
  (the interpreter, the imports, one empty lease);
- **cli-true W=1, 4**: ``leaseq worker -c W --wait 0.5 -q -- true`` draining N
  leads, to its exit (its start and its last empty half-second poll included),
  and its CPU per lead (the worker, its guards and the commands);
- **sdk W=1, 4, 16**: ``leaseq.Worker`` with its defaults (``concurrency`` W) and a
  no-op async handler, timed
  from the run's start to the last lead finished;
- **bare**: a bare ``httpx.AsyncClient`` loop sending the SDK's requests, ``POST /lease`` once, then
  ``/complete`` with ``next``: the most the REST hop gives a Python client;

and, once, **xargs W=1, 4**: ``seq N | xargs -P W -n 1 true``, the spawn
ceiling of this machine. The rounds interleave (before, after, before, after
…); the load average is read before and after each run. Results go to
``bench/results/<name>.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common import Templates, fresh_copy, load_avg
from bench.contenders import install
from bench.service import Service

ROOT = Path(__file__).resolve().parent.parent
SESSION = "speed"
CHILD_TIMEOUT_S = 300


def source_env(source: Path) -> dict[str, str]:
    """The environment that runs ``source``'s leaseq (its app and its client first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEQ_")}
    paths = [str(source), str(source / "clients" / "python")]
    if extra := os.environ.get("BENCH_EXTRA_PATH"):  # e.g. sniffio where it is not installed
        paths.append(extra)
    env["PYTHONPATH"] = os.pathsep.join(paths)
    return env


def push(url: str, n: int) -> None:
    with httpx.Client(base_url=url, timeout=30) as client:
        for start in range(0, n, 1000):
            leads = [{"payload": {"n": i}} for i in range(start, min(n, start + 1000))]
            client.post(f"/sessions/{SESSION}/leads", json={"leads": leads}).raise_for_status()


def done(url: str) -> int:
    with httpx.Client(base_url=url, timeout=30) as client:
        counts = client.get(f"/sessions/{SESSION}/stats").json()
    return int(counts["done"])


def timed_child(argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Run ``argv`` to its end: its wall seconds, its CPU seconds (with its children), stdout."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    began = time.perf_counter()
    finished = subprocess.run(
        argv, env=env, cwd=ROOT, capture_output=True, timeout=CHILD_TIMEOUT_S, check=False
    )
    wall = time.perf_counter() - began
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"{argv[:4]} exited {finished.returncode}: {finished.stderr[-2000:]!r}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, finished.stdout.decode()


def worker_argv(url: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "leaseq.cli", "worker", "--url", url, "-s", SESSION, *args]


def run_one(
    kind: str, workers: int, source: Path, server: str, template: str, n: int
) -> dict[str, Any]:
    """One run of ``kind`` on a fresh database and a service of its own."""
    with fresh_copy(server, template) as url:
        service = Service(url, 1, source=None if source == ROOT else source)
        try:
            service.wait_ready()
            base = service.base_url
            env = source_env(source)
            load = load_avg()
            if kind == "start":
                wall, cpu, _ = timed_child(
                    worker_argv(base, "--wait", "0", "-q", "--", "true"), env
                )
                return {"kind": kind, "seconds": wall, "cpu_s": cpu, "load": [load, load_avg()]}
            push(base, n)
            if kind == "cli-true":
                argv = worker_argv(base, "-c", str(workers), "--wait", "0.5", "-q", "--", "true")
                wall, cpu, _ = timed_child(argv, env)
                seconds = wall
            else:
                child = ["--child", kind, base, str(n), str(workers)]
                argv = [sys.executable, "-m", "bench.worker_speed", *child]
                wall, cpu, out = timed_child(argv, env)
                seconds, cpu = map(float, out.strip().splitlines()[-1].split())  # the drain's
            finished = done(base)
            if finished != n:
                raise RuntimeError(f"{kind}: {finished} of {n} leads done")
            return {
                "kind": kind,
                "workers": workers,
                "leads": n,
                "seconds": seconds,
                "leads_per_s": n / seconds,
                "cpu_ms_per_lead": cpu * 1000 / n,
                "load": [load, load_avg()],
            }
        finally:
            service.stop()


def xargs(workers: int, n: int) -> dict[str, Any]:
    load = load_avg()
    began = time.perf_counter()
    seq = subprocess.Popen(["seq", str(n)], stdout=subprocess.PIPE)
    subprocess.run(["xargs", "-P", str(workers), "-n", "1", "true"], stdin=seq.stdout, check=True)
    seq.wait()
    seconds = time.perf_counter() - began
    return {
        "kind": "xargs",
        "workers": workers,
        "leads": n,
        "seconds": seconds,
        "leads_per_s": n / seconds,
        "load": [load, load_avg()],
    }


# -- the in-process contenders, run as ``--child KIND URL N`` ------------------------------


async def sdk_child(url: str, n: int, concurrency: int) -> float:
    """Timed to the n-th completion (counted as its metrics are: no polling); the run then
    ends after its idle long poll, which is not the drain's."""
    from leaseq import AsyncClient
    from leaseq.worker import Job, Worker
    from leaseq.worker.metrics import Metrics

    class LastCompletion(Metrics):
        count, at = 0, 0.0

        def completed(self, status: Any) -> None:
            self.count += 1
            if self.count == n:
                self.at = time.perf_counter()

    async def noop(job: Job) -> None:
        return None

    counted = LastCompletion()
    async with AsyncClient(url) as client:
        worker = Worker(client, SESSION, noop, concurrency=concurrency, metrics=counted)
        began = time.perf_counter()
        await worker.run()
    return (counted.at or time.perf_counter()) - began


async def bare_child(url: str, n: int, keyed: bool = True) -> float:
    """The SDK's requests without the SDK: each completion's ``next`` keyed as the SDK keys it
    (``keyed``; the service then stores the lease it took, for a retry to get it again)."""
    ask = {"session": SESSION, "owner": "bare", "max": 1, "wait_s": 0}
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        began = time.perf_counter()
        leases = (await http.post("/lease", json=ask)).json()["leases"]
        finished = 0
        while leases:
            lease = leases[0]
            body = {
                "lead_id": lease["lead"]["id"],
                "token": lease["token"],
                "status": "done",
                "result": None,
                "next": ask,
            }
            headers = {"Idempotency-Key": str(uuid.uuid4())} if keyed else None
            answer = await http.post("/complete", json=body, headers=headers)
            answer.raise_for_status()
            finished += 1
            leases = answer.json()["leases"]
        assert finished == n, finished
        return time.perf_counter() - began


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.worker_speed")
    parser.add_argument("-n", "--leads", type=int, default=1000)
    parser.add_argument("-r", "--repeats", type=int, default=2)
    parser.add_argument("--before", type=Path, help="an older checkout to measure beside this one")
    parser.add_argument("--database-url", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--name", default="worker-speed")
    parser.add_argument(
        "--child", nargs=4, metavar=("KIND", "URL", "N", "W"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    if args.child:
        kind, url, n, w = args.child
        cpu = time.process_time()
        if kind == "sdk":
            seconds = asyncio.run(sdk_child(url, int(n), int(w)))
        else:
            seconds = asyncio.run(bare_child(url, int(n), keyed=kind == "bare"))
        print(seconds, time.process_time() - cpu)
        return
    sources = {"after": ROOT} | ({"before": args.before.resolve()} if args.before else {})
    templates = Templates(args.database_url)
    runs: list[dict[str, Any]] = []
    try:
        template = templates.get("leaseq", lambda url: install("leaseq", url))
        plan = [("start", 1), ("cli-true", 1), ("cli-true", 4)]
        plan += [("sdk", 1), ("sdk", 4), ("sdk", 16), ("bare", 1), ("bare-unkeyed", 1)]
        for _ in range(args.repeats):
            for kind, workers in plan:
                for label, source in sources.items():
                    run = run_one(kind, workers, source, args.database_url, template, args.leads)
                    run["source"] = label
                    print(json.dumps(run), flush=True)
                    runs.append(run)
        for workers in (1, 4):
            runs.append(xargs(workers, args.leads))
            print(json.dumps(runs[-1]), flush=True)
    finally:
        templates.close()
    summary: dict[str, float] = {}
    for run in runs:
        key = f"{run.get('source', 'machine')} {run['kind']} W={run.get('workers', 1)}"
        summary.setdefault(key, [])  # type: ignore[arg-type]
    for key in summary:
        values = [
            r.get("leads_per_s", r["seconds"])
            for r in runs
            if f"{r.get('source', 'machine')} {r['kind']} W={r.get('workers', 1)}" == key
        ]
        summary[key] = round(statistics.median(values), 3)
    out = ROOT / "bench" / "results" / f"{args.name}.json"
    out.write_text(json.dumps({"runs": runs, "median": summary}, indent=2) + "\n")
    for key, value in summary.items():
        print(f"{key:32} {value}")


if __name__ == "__main__":
    main()
