"""``python -m bench``: every contender, W workers, R interleaved repeats; a table and JSON."""

from __future__ import annotations

import json
import os
import subprocess
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from bench import citus, common, contenders, scale
from bench.contenders import Contender, RunResult
from bench.service import checkout_head

RESULTS = Path(__file__).resolve().parent / "results"
console = Console()
cli = typer.Typer(add_completion=False, help=__doc__)


def ceiling_for(c: Contender) -> str:
    """The ceiling row a contender is compared with: same batch size (procrastinate: 1)."""
    batch = c.batch if c.batch in (1, 10, 100) else 1
    return f"ceiling-b{batch}"


def summarize(
    results: list[RunResult], chosen: list[Contender], workers: list[int]
) -> list[dict[str, Any]]:
    rows = []
    by_key: dict[tuple[str, int], list[RunResult]] = {}
    for r in results:
        by_key.setdefault((r.contender, r.workers), []).append(r)

    def med(runs: list[RunResult], attr: str) -> float | None:
        values = [getattr(r, attr) for r in runs if getattr(r, attr) is not None]
        return round(common.median(values), 2) if values else None

    for c in chosen:
        for w in workers:
            runs = by_key.get((c.name, w), [])
            if not runs:
                continue
            drain = [r.drain_per_s for r in runs]
            ceiling = by_key.get((ceiling_for(c), w), [])
            ceiling_rate = common.median([r.drain_per_s for r in ceiling]) if ceiling else None
            rows.append(
                {
                    "contender": c.name,
                    "label": c.label,
                    "batch": c.batch,
                    "workers": w,
                    "runs": len(runs),
                    "drain_median": round(common.median(drain), 1),
                    "drain_min": min(drain),
                    "drain_max": max(drain),
                    "vs_ceiling": (
                        round(common.median(drain) / ceiling_rate, 2) if ceiling_rate else None
                    ),
                    "ceiling": ceiling_for(c),
                    "push_bulk": med(runs, "push_bulk_per_s"),
                    "push_single": med(runs, "push_single_per_s"),
                    "lease_p50_ms": med(runs, "lease_p50_ms"),
                    "lease_p99_ms": med(runs, "lease_p99_ms"),
                    "complete_p50_ms": med(runs, "complete_p50_ms"),
                    "complete_p99_ms": med(runs, "complete_p99_ms"),
                    "client_cpu_ms_per_lead": med(runs, "client_cpu_ms_per_lead"),
                    "service_cpu_ms_per_lead": med(runs, "service_cpu_ms_per_lead"),
                    "database_cpu_ms_per_lead": med(runs, "database_cpu_ms_per_lead"),
                }
            )
    return rows


def before_and_after(
    results: list[RunResult], chosen: list[Contender], workers: list[int]
) -> list[dict[str, Any]]:
    """Each contender served from ``--before`` beside the same served from here, at each W:
    both medians and ranges, the ratio of the medians (after / before) and the spread of
    the ratios round by round (each round's after over the same round's before)."""
    rows = []
    for older in (c for c in chosen if c.source is not None):
        now = replace(older, source=None)
        for w in workers:
            runs = {
                side: {r.repeat: r for r in results if r.contender == c.name and r.workers == w}
                for side, c in (("after", now), ("before", older))
            }
            if not runs["after"] or not runs["before"]:
                continue
            row: dict[str, Any] = {
                "contender": now.name,
                "label": now.label,
                "batch": now.batch,
                "workers": w,
            }
            for side, found in runs.items():
                drain = [r.drain_per_s for r in found.values()]
                lease = [r.lease_p50_ms for r in found.values() if r.lease_p50_ms is not None]
                row[f"{side}_median"] = round(common.median(drain), 1)
                row[f"{side}_min"], row[f"{side}_max"] = min(drain), max(drain)
                row[f"{side}_lease_p50_ms"] = round(common.median(lease), 2) if lease else None
            rounds = sorted(
                round(a.drain_per_s / runs["before"][k].drain_per_s, 3)
                for k, a in runs["after"].items()
                if k in runs["before"]
            )
            row["ratio"] = round(row["after_median"] / row["before_median"], 3)
            row["ratio_rounds"] = rounds
            rows.append(row)
    return rows


def before_and_after_markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| contender | batch | W | after leads/s median (min-max) "
        "| before leads/s median (min-max) | after / before | round by round "
        "| lease p50 ms after / before |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    lines += [
        f"| {r['label']} | {r['batch']} | {r['workers']} "
        f"| {_spread(r, 'after_')} | {_spread(r, 'before_')} "
        f"| {r['ratio']:.2f} | {', '.join(f'{x:.2f}' for x in r['ratio_rounds'])} "
        f"| {_ms(r['after_lease_p50_ms'])} / {_ms(r['before_lease_p50_ms'])} |"
        for r in rows
    ]
    return "\n".join(lines)


def checkout_of(source: Path) -> dict[str, Any]:
    """What ``--before`` served: its folder, its commit (when a git checkout), its schema."""
    commit = subprocess.run(
        ["git", "-C", str(source), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    return {"path": str(source), "commit": commit or None, "revision": checkout_head(source)}


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"


def _cpu(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}"


def _spread(row: dict[str, Any], prefix: str = "drain_") -> str:
    """A row's leads/s: median (min-max)."""
    return f"{row[prefix + 'median']:,.0f} ({row[prefix + 'min']:,.0f}-{row[prefix + 'max']:,.0f})"


def markdown(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| contender | batch | W | drain leads/s median (min-max) | x ceiling | push bulk /s "
        "| push 1-by-1 /s | lease p50 / p99 ms | complete p50 / p99 ms "
        "| CPU ms per lead: workers / service / PostgreSQL |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        ratio = "—" if r["vs_ceiling"] is None else f"{r['vs_ceiling']:.2f}"
        lines.append(
            f"| {r['label']} | {r['batch']} | {r['workers']} "
            f"| {_spread(r)} | {ratio} "
            f"| {r['push_bulk'] or 0:,.0f} | {r['push_single'] or 0:,.0f} "
            f"| {_ms(r['lease_p50_ms'])} / {_ms(r['lease_p99_ms'])} "
            f"| {_ms(r['complete_p50_ms'])} / {_ms(r['complete_p99_ms'])} "
            f"| {_cpu(r['client_cpu_ms_per_lead'])} / {_cpu(r.get('service_cpu_ms_per_lead'))} "
            f"/ {_cpu(r.get('database_cpu_ms_per_lead'))} |"
        )
    return "\n".join(lines)


def targets(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The performance targets, each with its figures and whether it was met.

    The REST hop's targets (``hop_targets``) come first and are always reported; the
    earlier comparisons follow, for the contenders the run measured.
    """
    rate = {(r["contender"], r["workers"]): r["drain_median"] for r in rows}
    p99 = {(r["contender"], r["workers"]): r["lease_p99_ms"] for r in rows}
    found = hop_targets(rate, p99)

    def check(name: str, keys: list[tuple[str, int]], ok: Any) -> None:
        if all(k in rate for k in keys):
            values = {f"{k[0]} W={k[1]}": rate[k] for k in keys}
            found.append({"target": name, "figures": values, "met": bool(ok())})

    for w in sorted({r["workers"] for r in rows}):
        for batch in (1, 100):
            for peer in ("pgqueuer", "procrastinate"):
                key = (f"{peer}-b{batch}", w)
                if key not in rate:
                    continue
                core = (f"core-b{batch}-ledger", w)
                check(
                    f"core b{batch} (ledger on) ahead of {peer} b{batch} at W={w}",
                    [core, key],
                    lambda core=core, key=key: rate[core] > rate[key],
                )
    for w in sorted({r["workers"] for r in rows}):
        check(
            f"REST b1 >= 0.5 x core b1 (ledger on) at W={w}",
            [("rest-1proc-b1", w), ("core-b1-ledger", w)],
            lambda w=w: rate[("rest-1proc-b1", w)] >= 0.5 * rate[("core-b1-ledger", w)],
        )
        check(
            f"REST b10 ahead of core b1 (ledger on) at W={w}",
            [("rest-1proc-b10", w), ("core-b1-ledger", w)],
            lambda w=w: rate[("rest-1proc-b10", w)] > rate[("core-b1-ledger", w)],
        )
    return found


Key = tuple[str, int]


# `leaseq worker -c 4 -- true`, leads/s, as issue 3/7 of round 3 measured it (its harness,
# this kind of machine): the figure its 5x target multiplies.
CLI_TRUE_BEFORE = 53


def hop_targets(rate: dict[Key, float], p99: dict[Key, float | None]) -> list[dict[str, Any]]:
    """The targets of the REST hop, every one reported: met, missed, or not measured
    (``met`` None, and ``missing``: the figures the run lacks)."""
    found: list[dict[str, Any]] = []

    def entry(name: str, figures: dict[str, Any], missing: list[str], met: Any) -> None:
        row: dict[str, Any] = {"target": name, "figures": figures, "met": None}
        if missing:
            row["missing"] = missing
        else:
            row["met"] = bool(met())
        row["stretch"] = name.startswith("stretch")
        found.append(row)

    def compare(name: str, mine: Key, other: Key, least: float, ahead: bool = False) -> None:
        """``mine`` >= ``least`` x ``other`` (``ahead``: strictly more than ``other``)."""
        figures: dict[str, Any] = {f"{k[0]} W={k[1]}": rate.get(k) for k in (mine, other)}
        missing = [f"{k[0]} W={k[1]}" for k in (mine, other) if k not in rate]
        if not missing:
            figures["ratio"] = round(rate[mine] / rate[other], 2)
        entry(
            name,
            figures,
            missing,
            lambda: rate[mine] > rate[other] if ahead else rate[mine] >= least * rate[other],
        )

    for b in (1, 10):
        compare(
            f"REST next b{b} >= 0.8 x raw REST next b{b} at W=4",
            (f"rest-1proc-next-b{b}", 4),
            (f"rawrest-next-b{b}", 4),
            0.8,
        )
    # REST with next, and what users run (bench/users.py): the SDK, beside the peers' own
    # workers and beside the bare loop sending its requests (each keyed); `leaseq worker --
    # true` beside xargs.
    for label, mine in (("REST next b1", "rest-1proc-next-b1"), ("sdk", "sdk")):
        for peer in ("procrastinate", "stretch: pgqueuer"):
            for w in (4, 16):
                stretch, _, name = peer.rpartition(" ")
                compare(
                    f"{stretch + ' ' if stretch else ''}{label} ahead of {name} b1 at W={w}",
                    (mine, w),
                    (f"{name}-b1", w),
                    1.0,
                    ahead=True,
                )
    for w in (1, 4, 16):
        compare(
            f"sdk >= 0.9 x bare REST loop (next, keyed) at W={w}",
            ("sdk", w),
            ("rest-1proc-next-keyed-b1", w),
            0.9,
        )
    for client in ("ts-worker", "go"):  # the other languages' workers, beside the SDK
        for w in (4, 16):
            compare(f"{client} >= 0.8 x sdk at W={w}", (client, w), ("sdk", w), 0.8)
    cli = ("cli-true", 4)
    entry(
        f"cli-true >= 5 x {CLI_TRUE_BEFORE} leads/s (leaseq worker before round 3) at W=4",
        {"cli-true W=4": rate.get(cli)},
        [] if cli in rate else ["cli-true W=4"],
        lambda: rate[cli] >= 5 * CLI_TRUE_BEFORE,
    )
    compare("cli-true >= 0.3 x xargs-true at W=4", cli, ("xargs-true", 4), 0.3)
    compare(
        "core b1 (ledger off) >= 0.9 x ceiling b1 at W=4",
        ("core-b1-noledger", 4),
        ("ceiling-b1", 4),
        0.9,
    )
    for name in ("rest-1proc-b1", "rest-1proc-next-b1"):
        value = p99.get((name, 16))
        entry(
            f"{name} lease p99 < 50 ms at W=16",
            {"lease_p99_ms": value},
            [] if value is not None else [f"{name} W=16"],
            lambda value=value: value < 50,
        )
    return found


def _verdict(met: bool | None) -> str:
    return {True: "MET", False: "MISSED", None: "NOT MEASURED"}[met]


def targets_markdown(found: list[dict[str, Any]]) -> str:
    lines = ["| target | figures | |", "| --- | --- | --- |"]
    for t in found:
        figures = ", ".join(
            f"{k} {v:,}" if isinstance(v, int | float) else f"{k} —"
            for k, v in t["figures"].items()
        )
        lines.append(f"| {t['target']} | {figures} | {_verdict(t['met'])} |")
    return "\n".join(lines)


def left_out_for_next(chosen: list[Contender], quick: bool) -> list[str]:
    """leaseq's ``next`` contenders this checkout cannot run: none when its service takes
    ``next``. Otherwise a full run stops here, before any run; ``--quick`` (a smoke test)
    leaves them out, and says so at the start and at the end."""
    wanting = [
        c.name
        for c in chosen
        if c.family == "rest" and c.next and not contenders.leaseq_takes_next(c.source)
    ]
    if not wanting:
        return []
    message = (
        "leaseq serve here (or from --before) does not take `next` on /complete and "
        f"/complete/batch (its OpenAPI document has no `next`), so {', '.join(wanting)} cannot run"
    )
    if not quick:
        console.print(f"{message}. Leave them out with --skip proc-next.", markup=False)
        raise typer.Exit(2)
    console.print(f"LEFT OUT: {message}.", markup=False)
    return wanting


def load_markdown(
    results: list[RunResult], start: tuple[float, float, float], end: tuple[float, float, float]
) -> str:
    """The machine's 1-minute load average over the run: at its start, each run's before and
    after (lowest, median, highest), at its end."""
    line = f"Load average (1, 5, 15 min): {start[0]:.2f} {start[1]:.2f} {start[2]:.2f} at the start"
    if results:
        loads = [x for r in results for x in (r.load_before, r.load_after)]
        line += (
            f"; 1-minute load before and after each run: {min(loads):.2f} lowest, "
            f"{common.median(loads):.2f} median, {max(loads):.2f} highest"
        )
    return line + f"; {end[0]:.2f} {end[1]:.2f} {end[2]:.2f} at the end."


@cli.command()
def run(
    leads: int = typer.Option(20_000, "--leads", "-n", help="leads pushed and drained per run"),
    workers: list[int] = typer.Option([1, 4, 16], "--workers", "-w", help="W; repeat for several"),
    repeats: int = typer.Option(3, "--repeats", "-r", help="runs of each contender, interleaved"),
    only: list[str] = typer.Option(
        [], "--only", help="contenders whose name contains this (repeat); e.g. core, rest-1proc"
    ),
    skip: list[str] = typer.Option(
        [], "--skip", help="leave out contenders whose name contains this (repeat); e.g. proc-next"
    ),
    database_url: str = typer.Option(
        os.environ.get("LEASEQ_DATABASE_URL") or common.DEFAULT_SERVER_URL,
        "--database-url",
        help="server for the benchmark's own databases (leaseq_bench_*), created and dropped",
    ),
    quick: bool = typer.Option(False, "--quick", help="N=1,000, W=1 and 4, one run each"),
    with_scale: bool = typer.Option(
        True, "--scale/--no-scale", help="also the lease latency scale table"
    ),
    scale_leads: int = typer.Option(
        1_000_000, "--scale-leads", help="largest queue of the scale table"
    ),
    scale_only: bool = typer.Option(False, "--scale-only", help="only the scale table"),
    with_citus: bool = typer.Option(
        False,
        "--citus/--no-citus",
        help="also the core on a Citus cluster beside one PostgreSQL (bench/citus.py)",
    ),
    citus_only: bool = typer.Option(False, "--citus-only", help="only the Citus table"),
    name: str = typer.Option("", "--name", help="results file name (default: bench-<time>)"),
    before: Path | None = typer.Option(
        None,
        "--before",
        exists=True,
        file_okay=False,
        resolve_path=True,
        help="an older checkout of leaseq: each leaseq REST contender also runs served from it",
    ),
) -> None:
    """Push N leads and drain them with W workers, for every contender; write bench/results/."""
    if quick:
        leads, workers, repeats, scale_leads = 1000, [1, 4], 1, 20_000
    chosen = [
        c
        for c in contenders.all_contenders()
        if (not only or any(o in c.name for o in only)) and not any(x in c.name for x in skip)
    ]
    if scale_only or citus_only:
        chosen, with_scale, with_citus = [], scale_only, with_citus or citus_only
    elif not chosen:
        raise typer.BadParameter(f"no contender matches --only {only} and --skip {skip}")
    if before is not None:
        if not (before / "alembic.ini").is_file():
            raise typer.BadParameter(f"{before} has no alembic.ini: not a checkout of leaseq")
        if not (before / "app" / "_migrations").exists():
            # Else this checkout's editable install answers its `app._migrations`, and the
            # older service would want this checkout's schema.
            raise typer.BadParameter(
                f"{before}/app/_migrations is missing: link it as its wheel installs it, "
                f"ln -s ../migrations {before}/app/_migrations"
            )
        chosen = contenders.with_before(chosen, before)
    left_out = left_out_for_next(chosen, quick)
    chosen = [c for c in chosen if c.name not in left_out]
    info = common.machine(database_url)
    load_start = os.getloadavg()
    console.print(
        f"{info['nproc']} CPUs ({info['cpu']}), PostgreSQL {info['postgresql']}, "
        f"Python {info['python']}; N={leads:,}, W={workers}, repeats={repeats}, "
        f"load {common.load_avg()}"
    )
    # A contender and its --before twin are one step of a round, the two run back to back.
    plan = [
        [(c, w) for c in group]
        for group in contenders.twins(chosen)
        for w in workers
        if not group[0].only_workers or w in group[0].only_workers
    ]
    results: list[RunResult] = []
    templates = common.Templates(database_url)
    started = time.monotonic()
    scale_rows: list[dict[str, Any]] = []
    on_citus: dict[str, Any] | None = None
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    out = RESULTS / f"{name or 'bench-' + stamp}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_suffix(".partial.json")  # every run so far, should the run stop early
    try:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=console,
        ) as progress:
            bar = progress.add_task("runs", total=sum(map(len, plan)) * repeats)
            for repeat in range(repeats):
                # Interleaved: every contender once per round, the order rotated each round.
                shift = (repeat * len(plan)) // max(repeats, 1)
                rotated = plan[shift:] + plan[:shift]
                # Twins take turns going first: the current one in even rounds.
                order = [x for step in rotated for x in (step[::-1] if repeat % 2 else step)]
                for contender, w in order:
                    progress.update(
                        bar, description=f"{repeat + 1}/{repeats} {contender.name} W={w}"
                    )
                    template = templates.get(
                        contender.schema,
                        lambda url, c=contender: contenders.install(c.schema, url, c.source),
                    )
                    result = contenders.run_once(
                        contender, database_url, template, leads, w, repeat
                    )
                    results.append(result)
                    partial.write_text(json.dumps([asdict(r) for r in results], indent=1) + "\n")
                    progress.console.print(
                        f"  {contender.name:<24} W={w:<2} {result.drain_per_s:>9,.0f} leads/s "
                        f"lease p50/p99 {_ms(result.lease_p50_ms)}/{_ms(result.lease_p99_ms)} ms "
                        f"push {result.push_bulk_per_s:,.0f}/{result.push_single_per_s:,.0f} "
                        f"CPU ms/lead {_cpu(result.client_cpu_ms_per_lead)}"
                        f"/{_cpu(result.service_cpu_ms_per_lead)}"
                        f"/{_cpu(result.database_cpu_ms_per_lead)} load {result.load_after}"
                    )
                    progress.advance(bar)
            if with_scale:
                progress.update(bar, description="scale table")
                template = templates.get("leaseq", lambda url: contenders.install("leaseq", url))
                scale_rows = scale.measure(database_url, template, scale_leads, console)
            if with_citus:
                progress.update(bar, description="on a Citus cluster")
                w = 4 if 4 in workers else workers[-1]
                on_citus = citus.measure(database_url, leads, w, progress.console)
    finally:
        templates.close()
    rows = summarize(results, chosen, workers)
    met = targets(rows)
    table = markdown(rows)
    pairs = before_and_after(results, chosen, workers)
    if left_out:
        console.print(f"LEFT OUT (leaseq serve ignores `next`): {', '.join(left_out)}")
    console.print()
    console.print(table, markup=False)
    if scale_rows:
        console.print()
        console.print(scale.markdown(scale_rows), markup=False)
    if pairs:
        console.print()
        console.print(before_and_after_markdown(pairs), markup=False)
    if on_citus is not None:
        console.print()
        console.print(citus.markdown(on_citus), markup=False)
    for t in met:
        console.print(f"{_verdict(t['met']):<12}  {t['target']}  {t['figures']}", markup=False)
    document = {
        "when": stamp,
        "machine": info,
        "settings": {
            "leads": leads,
            "workers": workers,
            "repeats": repeats,
            "quick": quick,
            "only": only,
            "skip": skip,
            "before": None if before is None else checkout_of(before),
        },
        "left_out": left_out,
        "wall_s": round(time.monotonic() - started, 1),
        "load_avg_start": load_start,
        "load_avg_end": os.getloadavg(),
        "summary": rows,
        "targets": met,
        "scale": scale_rows,
        "citus": on_citus,
        "before_and_after": pairs,
        "runs": [asdict(r) for r in results],
    }
    out.write_text(json.dumps(document, indent=2) + "\n")
    tables = [table] if rows else []
    if pairs:
        tables.append(before_and_after_markdown(pairs))
    if scale_rows:
        tables.append(scale.markdown(scale_rows))
    if on_citus is not None:
        tables.append(citus.markdown(on_citus))
    if rows:
        tables.append(targets_markdown(met))
    tables.append(load_markdown(results, load_start, os.getloadavg()))
    if left_out:
        tables.append(f"Left out (leaseq serve here ignores `next`): {', '.join(left_out)}.")
    out.with_suffix(".md").write_text("\n\n".join(tables) + "\n")
    partial.unlink(missing_ok=True)
    console.print(f"results: {out} (and .md); {document['wall_s']} s")
