"""Operations on a dependency graph against its size, over REST: ``python -m bench.graphs``.

For each size N (``--sizes``), on a real ``leaseq serve`` (its default statement timeout):

- ``fan_out_cancel``: a parent with N dependents (pushed 1,000 a call), cancelled; every
  dependent fails in the same statement (``dependency <id> failed``).
- ``fan_out_complete``: the same graph, the parent leased and completed; every dependent
  becomes available in the same statement.
- ``chain_cancel``: a chain N deep (each lead after the one before), its root cancelled;
  the whole chain fails.
- ``fan_in_complete``: N leads each waiting on the same 100 parents (the most ``after``
  takes), the 100 completed in one ``/complete/batch``; all N become available (N up to
  5,000: half a million edges).
- ``fan_out_fail``: a parent with N dependents, leased on its last attempt and completed
  as ``failed`` by its worker; every dependent fails in the same statement.
- ``fan_out_retry``: the failed graph of a cancelled parent queued again by an operator,
  the parent by ``POST /leads/{id}/retry`` and its dependents by
  ``POST /sessions/{s}/leads/retry`` with a filter, a page after another until ``more``
  is false (the figure: the slowest of those requests).
- ``fan_out_prune``: the failed graph of a cancelled parent pruned by ``leaseq prune``
  (N + 1 leads, their ledger rows and N edges, in the pruner's batches; the figure: the
  whole command, its process's start included).

The figure is the seconds of the one request that changes the graph, with the counts it
left checked (a timeout or a wrong count fails the run). Results go to
``bench/results/graphs.json`` and ``graphs.md``; ``--explain N`` writes the plans of the
trigger's statement for a fan-out and a chain of N to ``graphs-plans.txt``
(``auto_explain`` of the nested statement, sent to the client as a message).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psycopg

from app.store import migrate
from bench import common
from bench.service import Service

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
PUSH_BATCH = 1000
FAN_IN = 100
LEASEQ = str(Path(sys.executable).parent / "leaseq")
MAX_FAN_IN_BELOW = 5000  # the largest N of the fan-in: its edges are N x FAN_IN


def _push(http: httpx.Client, session: str, leads: list[dict[str, Any]]) -> list[int]:
    ids: list[int] = []
    for start in range(0, len(leads), PUSH_BATCH):
        answer = http.post(
            f"/sessions/{session}/leads", json={"leads": leads[start : start + PUSH_BATCH]}
        )
        assert answer.status_code == 201, answer.text
        ids += answer.json()["ids"]
    return ids


def _stats(http: httpx.Client, session: str) -> dict[str, Any]:
    answer = http.get(f"/sessions/{session}/stats")
    assert answer.status_code == 200, answer.text
    found: dict[str, Any] = answer.json()
    return found


def _timed(call: Callable[[], httpx.Response]) -> float:
    started = time.perf_counter()
    answer = call()
    took = time.perf_counter() - started
    assert answer.status_code == 200, (answer.status_code, answer.text[:300])
    return took


def _fan_out(http: httpx.Client, session: str, n: int, **parent: Any) -> int:
    """A parent (its fields ``parent``) with ``n`` dependents: the parent's id."""
    [parent_id] = _push(http, session, [{"payload": {}, **parent}])
    _push(http, session, [{"payload": {"i": i}, "after": [parent_id]} for i in range(n)])
    return parent_id


def _chain(http: httpx.Client, session: str, n: int) -> list[int]:
    """``n`` leads, each after the one before (by key within a push, by id across): their ids."""
    ids: list[int] = []
    for start in range(0, n, PUSH_BATCH):
        leads = []
        for i in range(start, min(n, start + PUSH_BATCH)):
            lead: dict[str, Any] = {"payload": {}, "key": f"c{i}"}
            if i:
                lead["after"] = [{"key": f"c{i - 1}"}] if i > start else [ids[-1]]
            leads.append(lead)
        ids += _push(http, session, leads)
    return ids


def fan_out(http: httpx.Client, session: str, n: int, *, complete: bool) -> float:
    parent = _fan_out(http, session, n)
    assert _stats(http, session)["blocked"] == n
    if complete:
        [lease] = http.post("/lease", json={"session": session, "owner": "b"}).json()["leases"]
        took = _timed(
            lambda: http.post("/complete", json={"lead_id": parent, "token": lease["token"]})
        )
        stats = _stats(http, session)
        assert (stats["blocked"], stats["queued"], stats["done"]) == (0, n, 1), stats
    else:
        took = _timed(lambda: http.post(f"/leads/{parent}/cancel"))
        stats = _stats(http, session)
        assert (stats["blocked"], stats["failed"]) == (0, n + 1), stats
    return took


def chain(http: httpx.Client, session: str, n: int) -> float:
    ids = _chain(http, session, n)
    assert _stats(http, session)["blocked"] == n - 1
    took = _timed(lambda: http.post(f"/leads/{ids[0]}/cancel"))
    stats = _stats(http, session)
    assert (stats["blocked"], stats["failed"]) == (0, n), stats
    return took


def fan_in(http: httpx.Client, session: str, n: int) -> float:
    parents = _push(http, session, [{"payload": {}} for _ in range(FAN_IN)])
    _push(http, session, [{"payload": {}, "after": parents} for _ in range(n)])
    leases = http.post("/lease", json={"session": session, "owner": "b", "max": FAN_IN}).json()[
        "leases"
    ]
    assert len(leases) == FAN_IN
    items = [{"lead_id": lease["lead"]["id"], "token": lease["token"]} for lease in leases]
    took = _timed(lambda: http.post("/complete/batch", json={"items": items}))
    stats = _stats(http, session)
    assert (stats["blocked"], stats["queued"], stats["done"]) == (0, n, FAN_IN), stats
    return took


def fan_out_fail(http: httpx.Client, session: str, n: int) -> float:
    parent = _fan_out(http, session, n, max_attempts=1)
    [lease] = http.post("/lease", json={"session": session, "owner": "b"}).json()["leases"]
    done = {"lead_id": parent, "token": lease["token"], "status": "failed", "error": "bench"}
    took = _timed(lambda: http.post("/complete", json=done))
    stats = _stats(http, session)
    assert (stats["blocked"], stats["failed"]) == (0, n + 1), stats
    return took


def fan_out_retry(http: httpx.Client, session: str, n: int) -> float:
    parent = _cancelled_fan_out(http, session, n)
    slowest = _timed(lambda: http.post(f"/leads/{parent}/retry"))
    more = True
    while more:
        started = time.perf_counter()
        answer = http.post(
            f"/sessions/{session}/leads/retry", json={"filter": {"status": ["failed"]}}
        )
        slowest = max(slowest, time.perf_counter() - started)
        assert answer.status_code == 200, (answer.status_code, answer.text[:300])
        more = answer.json()["more"]
    stats = _stats(http, session)
    assert (stats["failed"], stats["queued"], stats["blocked"]) == (0, n + 1, 0), stats
    return slowest


def fan_out_prune(http: httpx.Client, session: str, n: int, database_url: str) -> float:
    _cancelled_fan_out(http, session, n)
    started = time.perf_counter()
    said = subprocess.run(
        [LEASEQ, "prune", "--older-than", "0s", "--session", session],
        env={**os.environ, "LEASEQ_DATABASE_URL": database_url},
        capture_output=True,
        text=True,
        check=False,
    )
    took = time.perf_counter() - started
    assert said.returncode == 0, said.stderr
    assert f"pruned {n + 1} leads" in said.stdout, said.stdout
    stats = _stats(http, session)
    assert (stats["failed"], stats["queued"]) == (0, 0), stats
    return took


def _cancelled_fan_out(http: httpx.Client, session: str, n: int) -> int:
    """A parent with ``n`` dependents, cancelled: ``n + 1`` failed leads."""
    parent = _fan_out(http, session, n)
    answer = http.post(f"/leads/{parent}/cancel")
    assert answer.status_code == 200, answer.text
    return parent


Shape = Callable[[httpx.Client, str, int, str], float]
SHAPES: dict[str, Shape] = {
    "fan_out_cancel": lambda http, s, n, _: fan_out(http, s, n, complete=False),
    "fan_out_complete": lambda http, s, n, _: fan_out(http, s, n, complete=True),
    "chain_cancel": lambda http, s, n, _: chain(http, s, n),
    "fan_in_complete": lambda http, s, n, _: fan_in(http, s, n),
    "fan_out_fail": lambda http, s, n, _: fan_out_fail(http, s, n),
    "fan_out_retry": lambda http, s, n, _: fan_out_retry(http, s, n),
    "fan_out_prune": fan_out_prune,
}


@contextmanager
def _served(server_url: str) -> Iterator[tuple[str, httpx.Client]]:
    """A migrated database of its own and a ``leaseq serve`` on it: its URL and a client."""
    name = common.new_name("graphs")
    url = common.create_database(server_url, name)
    try:
        migrate.upgrade(url)
        service = Service(url, workers=1, extra_args=["--sweep-interval", "3600"])
        try:
            service.wait_ready()
            with httpx.Client(base_url=service.base_url, timeout=120) as http:
                yield url, http
        finally:
            service.stop()
    finally:
        common.drop_database(server_url, name)


def run(server_url: str, sizes: Sequence[int], shapes: Sequence[str]) -> dict[str, Any]:
    timings: dict[str, dict[str, float]] = {shape: {} for shape in shapes}
    refused: dict[str, dict[str, str]] = {shape: {} for shape in shapes}
    with _served(server_url) as (url, http):
        for n in sizes:
            for shape in shapes:
                if shape == "fan_in_complete" and n > MAX_FAN_IN_BELOW:
                    continue  # N x 100 edges: 2,000,000 at 20,000
                try:
                    took = SHAPES[shape](http, f"{shape}-{n}", n, url)
                except AssertionError as failed:  # a timeout: its answer, kept
                    refused[shape][str(n)] = str(failed)[:200]
                    print(f"{shape:18} N={n:>6}: {failed}", flush=True)
                    continue
                timings[shape][str(n)] = round(took, 3)
                print(f"{shape:18} N={n:>6}: {took:.3f} s", flush=True)
    return {
        "sizes": list(sizes),
        "seconds": timings,
        "refused": refused,
        "machine": common.machine(server_url),
        "load_after": common.load_avg(),
    }


def explain(server_url: str, n: int) -> str:
    """The plans of the trigger's statement when a parent of ``n`` dependents and the root of
    a chain ``n`` deep fail, as ``EXPLAIN ANALYZE`` of the nested statement (``auto_explain``
    sent to this connection: ``client_min_messages = log``)."""
    with _served(server_url) as (url, http):
        parent = _fan_out(http, "fan-out", n)
        [root, *_] = _chain(http, "chain", n + 1)
        plans: list[str] = []
        with psycopg.connect(url, autocommit=True) as connection:
            connection.add_notice_handler(lambda notice: plans.append(notice.message_primary or ""))
            connection.execute("LOAD 'auto_explain'")
            for setting in (
                "auto_explain.log_min_duration = 5",  # ms: the statements of each row leave out
                "auto_explain.log_analyze = on",
                "auto_explain.log_buffers = on",
                "auto_explain.log_timing = on",
                "auto_explain.log_nested_statements = on",
                "client_min_messages = log",
            ):
                connection.execute(f"SET {setting}")
            shown = []
            for title, lead in (("fan-out", parent), ("chain", root)):
                plans.clear()
                connection.execute(
                    "UPDATE leads SET status = 'failed', error = 'cancelled' WHERE id = %s",
                    [lead],
                )
                shown.append(f"## {title}: N = {n:,}, its root failed\n\n" + "\n\n".join(plans))
    return "\n\n".join(shown) + "\n"


def markdown(result: dict[str, Any]) -> str:
    sizes = [str(n) for n in result["sizes"]]
    lines = ["| operation | " + " | ".join(f"N = {int(n):,}" for n in sizes) + " |"]
    lines.append("| --- |" + " ---: |" * len(sizes))
    for shape, by_size in result["seconds"].items():
        refused = result["refused"].get(shape, {})
        shown = [
            f"{by_size[n]:.3f} s" if n in by_size else ("refused" if n in refused else "")
            for n in sizes
        ]
        lines.append(f"| `{shape}` | " + " | ".join(shown) + " |")
    return "\n".join(lines) + "\n"


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.graphs", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_SERVER)
    parser.add_argument("--sizes", default="1000,2000,5000,10000,20000")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--name", default="graphs")
    parser.add_argument("--explain", type=int, metavar="N", help="write the plans at N instead")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.explain:
        (RESULTS / f"{args.name}-plans.txt").write_text(explain(args.database_url, args.explain))
        return 0
    sizes = [int(n) for n in args.sizes.split(",")]
    result = run(args.database_url, sizes, args.shapes.split(","))
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
