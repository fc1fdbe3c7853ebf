"""leaseq on a Citus cluster beside one PostgreSQL, in one run: throughput, the nodes each
call reaches, and each node's CPU per lead, from which ``model`` says how throughput grows
with worker nodes.

The same drain three times: ``SESSIONS`` sessions of leads, pushed through the queue, then
W worker tasks in processes (the core, ``app.domain.queue.Queue``, ledger on, batch 1: a
lease, then its completion), each task leasing from its own session first and moving on
when a session is empty:

- ``one PostgreSQL``: a database of the server at ``--database-url``;
- ``cluster, one door``: a database of a coordinator and two workers started on this
  machine (``tests/citus/cluster.py``, on free ports, stopped at the end), every task
  given the coordinator's URL;
- ``cluster, every node a door``: the same cluster, the tasks' URLs spread over its three
  nodes (Citus syncs its metadata to the workers; docs/scaling.md, "Any node is a door").

For each: leads/s; each node's CPU seconds per lead (its postmaster's processes, read with
psutil before and after the drain); each node's transactions per call
(``pg_stat_database.xact_commit`` of the database: a call routed to one shard commits on
one worker node, one that fans out commits on each). Which shards each statement's plan
reaches is checked, statement by statement, by ``tests/citus/test_routing.py`` (``Task
Count: 1``). Figures in ``results/citus.json`` and ``.md``.

`python -m bench.citus -n 4000 -w 4`, or `python -m bench --citus-only` (needs Citus:
`bash ../shared/citus/build.sh` as root)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from rich.console import Console

from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import libpq_url
from bench import common
from bench.common import WorkerReport
from bench.contenders import database, merge
from leaseq.model import NewLead
from tests.citus.cluster import Cluster, citus_installed

RESULTS = Path(__file__).parent / "results"
SESSIONS = 20
PUSH_BATCH = 500
TTL_S = 300.0


# -- the drain --------------------------------------------------------------------------


async def _task(queue: Queue, sessions: list[str], first: int, owner: str) -> WorkerReport:
    """Lease and complete one lead at a time, from ``sessions[first]`` until it is empty,
    then from the next, until a whole round of them is empty."""
    report = WorkerReport()
    leasing = common.leasing_of(queue)
    empty_in_a_row = 0
    at = first
    while empty_in_a_row < len(sessions):
        started = time.perf_counter()
        leases = await leasing.lease_next(sessions[at], owner, max=1, ttl_s=TTL_S)
        if not leases:
            empty_in_a_row += 1
            at = (at + 1) % len(sessions)
            continue
        empty_in_a_row = 0
        leased = time.perf_counter()
        report.lease_s.append(leased - started)
        lead = await queue.complete(leases[0].lead.id, leases[0].token)
        report.complete_s.append(time.perf_counter() - leased)
        report.done_ids.append(lead.id)
    report.finished_at = time.monotonic()
    return report


async def drain_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    """``tasks`` tasks of one process, task i of process p on ``urls[(p * tasks + i) % n]``
    (a pool of one connection each)."""
    urls: list[str] = spec["urls"]
    sessions: list[str] = spec["sessions"]
    index = int(name.removeprefix("p")) * tasks
    dbs = [database(urls[(index + i) % len(urls)], 1) for i in range(tasks)]
    try:
        queues = [Queue(db, ledger=True) for db in dbs]
        await asyncio.gather(*(queue.db_now() for queue in queues))
        ready()
        reports = await asyncio.gather(
            *(
                _task(queue, sessions, (index + i) % len(sessions), f"{name}t{i}")
                for i, queue in enumerate(queues)
            )
        )
    finally:
        for db in dbs:
            await db.close()
    return merge(reports)


async def _push(url: str, sessions: list[str], leads: int) -> None:
    db = database(url, 1)
    try:
        queue = Queue(db, ledger=True)
        per_session = leads // len(sessions)
        for session in sessions:
            for lo in range(0, per_session, PUSH_BATCH):
                batch = [
                    NewLead(payload={"n": n}) for n in range(lo, min(per_session, lo + PUSH_BATCH))
                ]
                await queue.push(session, batch)
    finally:
        await db.close()


# -- what each node spent ---------------------------------------------------------------


def _commits(url: str) -> int:
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        [(commits,)] = conn.execute(
            "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"
        ).fetchall()
    return int(commits)


def drain(nodes: dict[str, str], doors: list[str], leads: int, workers: int) -> dict[str, Any]:
    """Push ``leads`` over the sessions through ``doors[0]``, drain them through ``doors``;
    the figures of each node of ``nodes`` (its name: the URL of the database there)."""
    sessions = [f"s{i:02d}" for i in range(SESSIONS)]
    asyncio.run(_push(doors[0], sessions, leads))
    postmasters = {node: common.postmaster(url) for node, url in nodes.items()}
    cpu_before = {node: common.server_cpu_s(p) for node, p in postmasters.items()}
    commits_before = {node: _commits(url) for node, url in nodes.items()}
    reports, started = common.run_workers(
        drain_worker, {"urls": doors, "sessions": sessions}, workers
    )
    finished = max(r.finished_at for r in reports)
    cpu = {node: common.server_cpu_s(p) - cpu_before[node] for node, p in postmasters.items()}
    commits = {node: _commits(url) - commits_before[node] for node, url in nodes.items()}
    done = sum(len(r.done_ids) for r in reports)
    ids = [i for r in reports for i in r.done_ids]
    assert done == (leads // SESSIONS) * SESSIONS == len(set(ids)), "a lead lost or done twice"
    calls = 2 * done  # a lease and a completion per lead
    return {
        "leads": done,
        "workers": workers,
        "doors": len(doors),
        "drain_per_s": round(done / max(finished - started, 1e-9), 1),
        "lease_p50_ms": common.percentile_ms([s for r in reports for s in r.lease_s], 50),
        "complete_p50_ms": common.percentile_ms([s for r in reports for s in r.complete_s], 50),
        "client_cpu_ms_per_lead": round(1000 * sum(r.cpu_s for r in reports) / done, 3),
        "node_cpu_ms_per_lead": {n: round(1000 * s / done, 3) for n, s in cpu.items()},
        "node_commits_per_call": {n: round(c / calls, 3) for n, c in commits.items()},
    }


# -- the run ----------------------------------------------------------------------------


def measure(server_url: str, leads: int, workers: int, console: Console) -> dict[str, Any]:
    """The three drains (module doc) and the model drawn from them."""
    if not citus_installed():
        raise SystemExit("Citus is not installed: bash ../shared/citus/build.sh (as root)")
    runs: dict[str, Any] = {}
    name = common.new_name("citus")
    single = common.create_database(server_url, name)
    try:
        migrate.upgrade(single)
        console.print("one PostgreSQL …")
        runs["one PostgreSQL"] = drain({"server": single}, [single], leads, workers)
    finally:
        common.drop_database(server_url, name)
    cluster = Cluster.start()
    try:
        for label, everywhere in (
            ("cluster, one door", False),
            ("cluster, every node a door", True),
        ):
            cluster.create_database(name)
            try:
                migrate.upgrade(cluster.url(name))
                nodes = {"coordinator": cluster.url(name)} | {
                    f"worker {i}": node.url(name) for i, node in enumerate(cluster.workers, 1)
                }
                doors = list(nodes.values()) if everywhere else [cluster.url(name)]
                console.print(f"{label} …")
                runs[label] = drain(nodes, doors, leads, workers)
            finally:
                cluster.drop_database(name)
    finally:
        cluster.stop()
    return {
        "sessions": SESSIONS,
        "runs": runs,
        "model": model(runs["cluster, one door"], runs["cluster, every node a door"]),
        "machine": common.machine(server_url),
        "load_after": common.load_avg(),
    }


def model(one_door: dict[str, Any], everywhere: dict[str, Any]) -> dict[str, Any]:
    """Leads/s a cluster could carry with K worker nodes of the same CPUs as this machine,
    from the CPU each node spent per lead here: through one door the coordinator's share
    stays on one node while the workers' divides over K; with every node a door, every
    node's share divides over all of them."""
    cores = common.cpus()
    cpu = one_door["node_cpu_ms_per_lead"]
    coordinator_ms = cpu["coordinator"]
    workers_ms = sum(v for k, v in cpu.items() if k != "coordinator")
    all_ms = sum(everywhere["node_cpu_ms_per_lead"].values())
    rows = []
    for k in (2, 4, 8, 16):
        coordinator_bound = 1000 * cores / coordinator_ms
        workers_bound = 1000 * cores * k / workers_ms
        rows.append(
            {
                "worker_nodes": k,
                "one_door_per_s": round(min(coordinator_bound, workers_bound)),
                "one_door_bound_by": "coordinator"
                if coordinator_bound < workers_bound
                else "workers",
                "every_node_a_door_per_s": round(1000 * cores * (k + 1) / all_ms),
            }
        )
    return {
        "cores_per_node": cores,
        "coordinator_ms_per_lead": coordinator_ms,
        "workers_ms_per_lead": round(workers_ms, 3),
        "every_node_ms_per_lead": round(all_ms, 3),
        "rows": rows,
    }


def markdown(result: dict[str, Any]) -> str:
    lines = [
        "| setup | leads/s | lease p50 | node CPU ms per lead | node commits per call |",
        "| --- | ---: | ---: | --- | --- |",
    ]
    for label, run in result["runs"].items():
        cpu = ", ".join(f"{n} {v}" for n, v in run["node_cpu_ms_per_lead"].items())
        commits = ", ".join(f"{n} {v}" for n, v in run["node_commits_per_call"].items())
        rate = f"{run['drain_per_s']:,.0f}"
        lines.append(f"| {label} | {rate} | {run['lease_p50_ms']} ms | {cpu} | {commits} |")
    m = result["model"]
    lines += [
        "",
        f"Model ({m['cores_per_node']} cores a node; per lead: coordinator "
        f"{m['coordinator_ms_per_lead']} ms, workers {m['workers_ms_per_lead']} ms through one "
        f"door; {m['every_node_ms_per_lead']} ms over all nodes with every node a door):",
        "",
        "| worker nodes | one door, leads/s | bound by | every node a door, leads/s |",
        "| ---: | ---: | --- | ---: |",
    ]
    for row in m["rows"]:
        lines.append(
            f"| {row['worker_nodes']} | {row['one_door_per_s']:,} | {row['one_door_bound_by']} "
            f"| {row['every_node_a_door_per_s']:,} |"
        )
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.citus", description=__doc__)
    parser.add_argument("--database-url", default=common.DEFAULT_SERVER_URL)
    parser.add_argument("-n", "--leads", type=int, default=4000)
    parser.add_argument("-w", "--workers", type=int, default=4)
    args = parser.parse_args(argv)
    console = Console()
    result = measure(args.database_url, args.leads, args.workers, console)
    (RESULTS / "citus.json").write_text(json.dumps(result, indent=2) + "\n")
    table = markdown(result)
    (RESULTS / "citus.md").write_text(table + "\n")
    console.print(table, markup=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
