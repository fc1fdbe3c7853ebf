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

The figure is the seconds of the one request that changes the graph, with the counts it
left checked (a timeout or a wrong count fails the run). Results go to
``bench/results/graphs.json`` and ``graphs.md``; ``--explain`` adds the plans of the
trigger's statement for the largest fan-out (``auto_explain`` of the nested statement).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import httpx

from app.store import migrate
from bench import common
from bench.service import Service

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
PUSH_BATCH = 1000
FAN_IN = 100
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


def fan_out(http: httpx.Client, session: str, n: int, *, complete: bool) -> float:
    [parent] = _push(http, session, [{"payload": {}}])
    _push(http, session, [{"payload": {"i": i}, "after": [parent]} for i in range(n)])
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
    ids: list[int] = []
    for start in range(0, n, PUSH_BATCH):
        leads = []
        for i in range(start, min(n, start + PUSH_BATCH)):
            lead: dict[str, Any] = {"payload": {}, "key": f"c{i}"}
            if i:
                lead["after"] = [{"key": f"c{i - 1}"}] if i > start else [ids[-1]]
            leads.append(lead)
        ids += _push(http, session, leads)
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


SHAPES: dict[str, Callable[[httpx.Client, str, int], float]] = {
    "fan_out_cancel": lambda http, s, n: fan_out(http, s, n, complete=False),
    "fan_out_complete": lambda http, s, n: fan_out(http, s, n, complete=True),
    "chain_cancel": chain,
    "fan_in_complete": fan_in,
}


def run(server_url: str, sizes: Sequence[int], shapes: Sequence[str]) -> dict[str, Any]:
    name = common.new_name("graphs")
    url = common.create_database(server_url, name)
    timings: dict[str, dict[str, float]] = {shape: {} for shape in shapes}
    refused: dict[str, dict[str, str]] = {shape: {} for shape in shapes}
    try:
        migrate.upgrade(url)
        service = Service(url, workers=1, extra_args=["--sweep-interval", "3600"])
        try:
            service.wait_ready()
            with httpx.Client(base_url=service.base_url, timeout=120) as http:
                for n in sizes:
                    for shape in shapes:
                        if shape == "fan_in_complete" and n > MAX_FAN_IN_BELOW:
                            continue  # N x 100 edges: 2,000,000 at 20,000
                        try:
                            took = SHAPES[shape](http, f"{shape}-{n}", n)
                        except AssertionError as failed:  # a timeout: its answer, kept
                            refused[shape][str(n)] = str(failed)[:200]
                            print(f"{shape:18} N={n:>6}: {failed}", flush=True)
                            continue
                        timings[shape][str(n)] = round(took, 3)
                        print(f"{shape:18} N={n:>6}: {took:.3f} s", flush=True)
        finally:
            service.stop()
    finally:
        common.drop_database(server_url, name)
    return {
        "sizes": list(sizes),
        "seconds": timings,
        "refused": refused,
        "machine": common.machine(server_url),
        "load_after": common.load_avg(),
    }


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
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(n) for n in args.sizes.split(",")]
    result = run(args.database_url, sizes, args.shapes.split(","))
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    (RESULTS / f"{args.name}.md").write_text(markdown(result))
    print(markdown(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
