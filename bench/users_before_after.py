"""What users run, before and after a change, interleaved: ``python -m bench`` run round by
round from two checkouts, alternately, and their ratios.

    .venv/bin/python -m bench.users_before_after --before ../before --after . \\
        -n 2000 -r 3 --name users-batching [--peers]

Each round runs ``python -m bench -r 1`` with the ``sdk``, ``cli-true`` and ``xargs-true``
contenders from the ``--before`` checkout, then from ``--after`` (the order swapped every
other round), each with its own checkout first on ``PYTHONPATH``: its SDK, its ``leaseq
worker`` and its service. On a shared, loaded machine only what runs side by side can be
compared, so the table gives each round's after / before ratio and their median, beside
the medians of the leads/s and the CPU per lead. ``--peers`` also runs procrastinate's
and pgqueuer's own workers and raw REST with ``next`` at batch 10 in each after-round,
for the targets of the issue in the same run. Results: ``bench/results/<name>.json`` and
``.md``.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import typer

RESULTS = Path(__file__).resolve().parent / "results"
USERS = ["sdk", "cli-true", "xargs-true"]
PEERS = ["procrastinate", "pgqueuer-b1", "rawrest-next-b10"]

app = typer.Typer(add_completion=False)


def one_round(checkout: Path, only: list[str], leads: int, workers: list[int], name: str) -> Path:
    """``python -m bench -r 1`` from ``checkout``; the path of its results."""
    env = {**os.environ, "PYTHONPATH": f"{checkout}:{checkout / 'clients' / 'python'}"}
    argv = [sys.executable, "-m", "bench", "-n", str(leads), "-r", "1", "--no-scale"]
    argv += [x for w in workers for x in ("-w", str(w))]
    argv += [x for o in only for x in ("--only", o)]
    argv += ["--skip", "pgqueuer-b100"]  # "pgqueuer-b1" names it too; batch 1 is the peer
    argv += ["--name", name]
    subprocess.run(argv, cwd=checkout, env=env, check=True)
    return checkout / "bench" / "results" / f"{name}.json"


def runs_of(path: Path) -> list[dict[str, Any]]:
    runs: list[dict[str, Any]] = json.loads(path.read_text())["runs"]
    return runs


@app.command()
def main(
    before: Path = typer.Option(..., "--before", exists=True, file_okay=False, resolve_path=True),
    after: Path = typer.Option(..., "--after", exists=True, file_okay=False, resolve_path=True),
    leads: int = typer.Option(2000, "--leads", "-n"),
    workers: list[int] = typer.Option([1, 4, 16], "--workers", "-w"),
    repeats: int = typer.Option(3, "--repeats", "-r"),
    peers: bool = typer.Option(False, "--peers", help="the peers' own workers in after-rounds"),
    name: str = typer.Option("users-before-after", "--name"),
) -> None:
    """Interleaved rounds from two checkouts; each round's ratios, their medians."""
    found: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    loads: list[tuple[float, ...]] = [os.getloadavg()]
    for repeat in range(repeats):
        sides = [("before", before), ("after", after)]
        for side, checkout in sides if repeat % 2 == 0 else sides[::-1]:
            only = USERS + (PEERS if peers and side == "after" else [])
            path = one_round(checkout, only, leads, workers, f"_{name}-{side}-{repeat}")
            for run in runs_of(path):
                found[side].append({**run, "round": repeat})
            path.unlink()
            path.with_suffix(".md").unlink(missing_ok=True)
            loads.append(os.getloadavg())
    rows = table(found, workers)
    document = {
        "before": commit_of(before),
        "after": commit_of(after),
        "leads": leads,
        "workers": workers,
        "repeats": repeats,
        "load_avg": loads,
        "summary": rows,
        "runs": found,
    }
    out = RESULTS / f"{name}.json"
    out.write_text(json.dumps(document, indent=2) + "\n")
    out.with_suffix(".md").write_text(markdown(rows, document) + "\n")
    print(markdown(rows, document))


def commit_of(checkout: Path) -> str:
    return subprocess.run(
        ["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()


def table(found: dict[str, list[dict[str, Any]]], workers: list[int]) -> list[dict[str, Any]]:
    """Per contender and W: medians of each side, and each round's after / before."""
    rows = []
    names = sorted({r["contender"] for r in found["after"]}, key=lambda n: (n not in USERS, n))
    for contender in names:
        for w in workers:
            key = (contender, w)
            side = {
                s: {r["round"]: r for r in found[s] if (r["contender"], r["workers"]) == key}
                for s in ("before", "after")
            }
            row: dict[str, Any] = {"contender": contender, "workers": w}
            for s, runs in side.items():
                if runs:
                    row[f"{s}_per_s"] = statistics.median(r["drain_per_s"] for r in runs.values())
                    row[f"{s}_cpu_ms"] = statistics.median(
                        r["client_cpu_ms_per_lead"] for r in runs.values()
                    )
                    service = [r["service_cpu_ms_per_lead"] for r in runs.values()]
                    if all(x is not None for x in service):
                        row[f"{s}_service_cpu_ms"] = statistics.median(service)
            ratios = [
                round(a["drain_per_s"] / side["before"][k]["drain_per_s"], 3)
                for k, a in side["after"].items()
                if k in side["before"]
            ]
            if ratios:
                row["ratios"] = ratios
                row["ratio"] = statistics.median(ratios)
            rows.append(row)
    return rows


def markdown(rows: list[dict[str, Any]], document: dict[str, Any]) -> str:
    def num(value: float | None, digits: int = 0) -> str:
        return "" if value is None else f"{value:,.{digits}f}"

    lines = [
        f"Before {document['before'][:10]}, after {document['after'][:10]}; "
        f"N = {document['leads']:,}, {document['repeats']} interleaved rounds; "
        f"load average {', '.join(f'{x[0]:.1f}' for x in document['load_avg'])}.",
        "",
        "| contender | W | before leads/s | after leads/s | after / before (rounds) "
        "| worker CPU ms/lead before → after | service CPU ms/lead before → after |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        rounds = ", ".join(f"{x:.2f}" for x in r.get("ratios", []))
        ratio = f"{r['ratio']:.2f} ({rounds})" if "ratio" in r else ""
        lines.append(
            f"| {r['contender']} | {r['workers']} | {num(r.get('before_per_s'))} "
            f"| {num(r.get('after_per_s'))} | {ratio} "
            f"| {num(r.get('before_cpu_ms'), 2)} → {num(r.get('after_cpu_ms'), 2)} "
            f"| {num(r.get('before_service_cpu_ms'), 2)} "
            f"→ {num(r.get('after_service_cpu_ms'), 2)} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    app()
