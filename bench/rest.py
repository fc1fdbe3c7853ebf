"""Benchmark of the REST path: ``leaseq serve`` and HTTP workers, beside the core path.

In one run, on a fresh database it creates (and drops at the end):

* the core path: the same drain straight on ``app.domain.queue.Queue`` with C
  asyncio tasks, as a reference measured in the same conditions;
* the REST path: for each ``--server-workers`` K, a ``leaseq serve --workers K``
  subprocess (stopped by its pid, and its worker processes by theirs, at the
  end) and C concurrent HTTP workers (asyncio tasks, one keep-alive httpx
  client with C connections), each doing

  * batch 1:  ``POST /lease`` (max 1), then ``POST /complete``
  * batch 10: ``POST /lease`` (max 10), then ``POST /complete/batch``

Each drain uses a session of its own, and is checked as in ``bench/core.py``:
every lead leased once and completed once, or the run fails without a figure.
The service runs with its defaults (pool_size 10 per process, ledger on unless
``--ledger off``).

Usage, from the repo root::

    .venv/bin/python bench/rest.py                   # N=5000, C=16, K=1 and 2
    .venv/bin/python bench/rest.py -n 5000 --server-workers 2
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx

from app.domain.queue import Queue

sys.path.insert(0, str(Path(__file__).resolve().parent))
import core  # bench/core.py: the fresh databases, the drain and its checks
from service import RawPoster, Service  # bench/service.py: leaseq serve and a raw client


@dataclass
class PathResult:
    path: str  # "core" or "rest, K server processes"
    batch: int
    leads: int
    concurrency: int
    drain_s: float
    leads_per_s: int
    lease_calls: int
    lease_p50_ms: float
    lease_p99_ms: float
    client_cpu: float  # the benchmark process's CPU seconds per wall second while draining
    service_cpu: float | None  # the same for the leaseq serve processes (REST only)
    postgres_cpu: float | None  # the same for the PostgreSQL backends of the database
    cpu_ms_per_lead: float | None  # all of them: what a lead costs, whatever else runs


# -- the service --------------------------------------------------------------


# -- CPU accounting ---------------------------------------------------------------


class CpuMeter:
    """CPU seconds used by a set of processes (found again at the end) between start and stop."""

    def __init__(self, find: Callable[[], Awaitable[list[int]]], name: str | None) -> None:
        self.find, self.name = find, name
        self.before: dict[int, float] = {}

    def _read(self, pids: Sequence[int]) -> dict[int, float]:
        found = {pid: core.cpu_seconds(pid, self.name) for pid in pids}
        return {pid: cpu for pid, cpu in found.items() if cpu is not None}

    async def start(self) -> None:
        self.before = self._read(await self.find())

    async def stop(self) -> float | None:
        """The CPU seconds used, or None when none of the processes could be read."""
        after = self._read(sorted({*self.before, *(await self.find())}))
        if not after:
            return None
        return sum(cpu - self.before.get(pid, 0.0) for pid, cpu in after.items())


def postgres_meter(url: str) -> CpuMeter:
    """The client backends of the benchmark database, but the one asking."""

    async def find() -> list[int]:
        db = core.database_for(url, pool_size=1)
        try:
            return await core.backend_pids(db, but_the_asker=True)
        finally:
            await db.close()

    return CpuMeter(find, "postgres")


def per_second(seconds: float | None, wall_s: float) -> float | None:
    return None if seconds is None else round(seconds / wall_s, 2)


# -- drains -------------------------------------------------------------------


class HttpxPoster:
    """POSTs JSON through the shared httpx client (what a Python worker using httpx pays)."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def connect(self) -> None:
        pass  # the shared client's connections were opened by the caller

    async def post(self, path: str, body: Any) -> Any:
        answer = await self.client.post(path, json=body)
        answer.raise_for_status()
        return answer.json()

    async def close(self) -> None:
        pass


Poster = HttpxPoster | RawPoster


async def http_worker(http: Poster, session: str, owner: str, batch: int) -> core.WorkerOutcome:
    lease_lat: list[float] = []
    complete_lat: list[float] = []
    done: list[int] = []
    body = {"session": session, "owner": owner, "max": batch, "ttl_s": core.LEASE_TTL_S}
    try:
        while True:
            started = time.perf_counter()
            leases = (await http.post("/lease", body))["leases"]
            leased = time.perf_counter()
            if not leases:
                return core.WorkerOutcome(lease_lat, complete_lat, done, time.monotonic())
            lease_lat.append(leased - started)
            if batch == 1:
                lease = leases[0]
                item = {"lead_id": lease["lead"]["id"], "token": lease["token"]}
                done.append((await http.post("/complete", item))["lead"]["id"])
            else:
                items = [{"lead_id": x["lead"]["id"], "token": x["token"]} for x in leases]
                results = (await http.post("/complete/batch", {"items": items}))["results"]
                if lost := [r["lead_id"] for r in results if not r["ok"]]:
                    raise RuntimeError(f"{owner}: /complete/batch refused leads {lost[:5]}")
                done.extend(r["lead_id"] for r in results)
            complete_lat.append(time.perf_counter() - leased)
    finally:
        await http.close()


async def push_http(client: httpx.AsyncClient, session: str, n: int, batch: int) -> list[int]:
    ids: list[int] = []
    for first in range(0, n, batch):
        leads = [{"payload": {"n": i}} for i in range(first, min(n, first + batch))]
        answer = await client.post(f"/sessions/{session}/leads", json={"leads": leads})
        answer.raise_for_status()
        ids.extend(answer.json()["ids"])
    return ids


def summarize(
    path: str,
    batch: int,
    n: int,
    concurrency: int,
    outcomes: list[core.WorkerOutcome],
    started: float,
    cpu: dict[str, float | None],
) -> tuple[PathResult, list[int]]:
    drain_s = max(o.finished_at for o in outcomes) - started
    lease_lat = [s for o in outcomes for s in o.lease_latencies]
    parts = list(cpu.values())
    result = PathResult(
        path=path,
        batch=batch,
        leads=n,
        concurrency=concurrency,
        drain_s=round(drain_s, 3),
        leads_per_s=round(n / drain_s),
        lease_calls=len(lease_lat),
        lease_p50_ms=round(core.percentile(lease_lat, 50), 2),
        lease_p99_ms=round(core.percentile(lease_lat, 99), 2),
        client_cpu=per_second(cpu["client"], drain_s) or 0.0,
        service_cpu=per_second(cpu.get("service"), drain_s),
        postgres_cpu=per_second(cpu["postgres"], drain_s),
        cpu_ms_per_lead=(
            None if None in parts else round(sum(p or 0.0 for p in parts) / n * 1000, 3)
        ),
    )
    return result, [lead for o in outcomes for lead in o.done_ids]


async def core_drain(
    url: str, session: str, n: int, batch: int, c: int, ledger: bool
) -> PathResult:
    db = core.database_for(url, pool_size=c)
    try:
        queue = Queue(db, ledger=ledger)
        ids, _ = await core.push_all(queue, n, 1000, session=session)
        await asyncio.gather(*(queue.db_now() for _ in range(c)))
        postgres = postgres_meter(url)
        await postgres.start()
        started, client = time.monotonic(), time.process_time()
        outcomes = await asyncio.gather(
            *(core.drain(queue, f"w{i}", batch, session=session) for i in range(c))
        )
        cpu = {"client": time.process_time() - client, "postgres": await postgres.stop()}
    finally:
        await db.close()
    result, done = summarize("core", batch, n, c, list(outcomes), started, cpu)
    await check(url, n, ids, done, ledger, session)
    return result


async def rest_drain(
    url: str,
    service: Service,
    k: int,
    session: str,
    n: int,
    batch: int,
    c: int,
    ledger: bool,
    client_kind: str,
) -> PathResult:
    limits = httpx.Limits(max_connections=c, max_keepalive_connections=c)
    async with httpx.AsyncClient(base_url=service.base_url, limits=limits, timeout=60) as http:
        ids = await push_http(http, session, n, 1000)
        await asyncio.gather(*(http.get("/healthz") for _ in range(c)))  # open C connections
        postgres, serving = postgres_meter(url), CpuMeter(service.pids, None)
        await postgres.start()
        await serving.start()
        started, client = time.monotonic(), time.process_time()
        posters: list[Poster] = [
            HttpxPoster(http) if client_kind == "httpx" else RawPoster("127.0.0.1", service.port)
            for _ in range(c)
        ]
        await asyncio.gather(*(p.connect() for p in posters))  # before the clock starts
        outcomes = await asyncio.gather(
            *(http_worker(p, session, f"h{i}", batch) for i, p in enumerate(posters))
        )
        cpu = {
            "client": time.process_time() - client,
            "service": await serving.stop(),
            "postgres": await postgres.stop(),
        }
    path = f"REST ({client_kind} client), {k} server process{'es' if k > 1 else ''}"
    result, done = summarize(path, batch, n, c, list(outcomes), started, cpu)
    await check(url, n, ids, done, ledger, session)
    return result


async def check(
    url: str, n: int, ids: list[int], done: list[int], ledger: bool, session: str
) -> None:
    if problems := await core.verify(url, n, ids, done, ledger, session=session):
        raise SystemExit(f"FAILED {session}: " + "; ".join(problems) + " (no figure reported)")


# -- command line -------------------------------------------------------------


def table(results: Sequence[PathResult]) -> str:
    lines = [
        "| path | mode | concurrency | leads/s | /lease p50 ms | /lease p99 ms "
        "| CPU ms per lead (client + service + PostgreSQL) |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        verbs = "lease + complete" if r.batch == 1 else "lease + complete/batch"
        lines.append(
            f"| {r.path} | batch {r.batch} ({verbs}) | {r.concurrency} | {r.leads_per_s:,} "
            f"| {r.lease_p50_ms:.2f} | {r.lease_p99_ms:.2f} | {r.cpu_ms_per_lead} |"
        )
    return "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--database-url",
        default=os.environ.get("LEASEQ_DATABASE_URL") or core.DEFAULT_SERVER_URL,
        help="server to create the benchmark database on (default: LEASEQ_DATABASE_URL, "
        f"else {core.DEFAULT_SERVER_URL})",
    )
    parser.add_argument("-n", "--leads", type=int, default=5_000)
    parser.add_argument("-c", "--concurrency", type=int, default=16, help="HTTP workers")
    parser.add_argument(
        "--server-workers", type=int, action="append", help="leaseq serve --workers (default 1, 2)"
    )
    parser.add_argument("--batch", type=int, action="append", help="default: 1 and 10")
    parser.add_argument("--ledger", choices=("on", "off"), default="on")
    parser.add_argument(
        "--client",
        action="append",
        choices=("raw", "httpx"),
        help="HTTP client of the workers: raw (a minimal keep-alive HTTP/1.1 client, so the "
        "figures are the service's) and/or httpx (default: both)",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    return parser.parse_args(argv)


async def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    args.client = args.client or ["raw", "httpx"]
    info = core.machine(args.database_url)
    print(
        f"# {info['nproc']} CPUs ({info['cpu']}), PostgreSQL {info['postgresql']}, "
        f"Python {info['python']}, httpx {httpx.__version__}",
        flush=True,
    )
    ledger = args.ledger == "on"
    batches = args.batch or [1, 10]
    results: list[PathResult] = []

    def report(result: PathResult) -> None:
        results.append(result)
        print(
            f"{result.path}, batch {result.batch}: {result.leads_per_s:,} leads/s "
            f"({result.drain_s:.2f} s), /lease p50 {result.lease_p50_ms:.2f} ms "
            f"p99 {result.lease_p99_ms:.2f} ms; CPU: client {result.client_cpu} "
            f"service {result.service_cpu} PostgreSQL {result.postgres_cpu} "
            f"= {result.cpu_ms_per_lead} ms/lead; load {os.getloadavg()[0]:.1f}; "
            "checked: every lead done exactly once",
            flush=True,
        )

    with core.fresh_database(args.database_url) as url:
        for batch in batches:
            report(
                await core_drain(url, f"core-b{batch}", args.leads, batch, args.concurrency, ledger)
            )
        for k in args.server_workers or [1, 2]:
            service = Service(url, k, ["--ledger" if ledger else "--no-ledger"])
            try:
                await asyncio.to_thread(service.wait_ready)
                for client_kind, batch in itertools.product(args.client, batches):
                    session = f"rest-{client_kind}-k{k}-b{batch}"
                    report(
                        await rest_drain(
                            url,
                            service,
                            k,
                            session,
                            args.leads,
                            batch,
                            args.concurrency,
                            ledger,
                            client_kind,
                        )
                    )
            finally:
                await asyncio.to_thread(service.stop)
    print()
    print(table(results))
    if args.json:
        output = {"machine": info, "runs": [asdict(r) for r in results]}
        args.json.write_text(json.dumps(output, indent=2, default=str) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
