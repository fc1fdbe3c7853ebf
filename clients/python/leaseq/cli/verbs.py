"""``leaseq push``, ``stats`` and ``sweep``: the client verbs against a running service."""

from __future__ import annotations

import dataclasses
import json
import time
from typing import Any

import typer
from rich.live import Live
from rich.markup import escape
from rich.table import Table

from leaseq.cli.output import EXIT_USAGE, CliError, fail, one_line_errors, out, plural, say
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.cli.service import Service, id_ranges
from leaseq.model import STATUSES, Counts, Lead, PushResult
from leaseq.timefmt import rfc3339

COUNT_COLUMNS = (*STATUSES, "pending")
AGE = "oldest_available_age_s"


@app.command(
    epilog=(
        'Each line a lead:  {"payload": {"url": "https://example.com"}, "key": "example.com", '
        '"priority": 5}  (fields: payload, priority, key, depth, parent_id, max_attempts, '
        "delay_s; payload a JSON object)\n\n"
        "From a file:  leaseq push --session crawl leads.jsonl\n\n"
        'Each line a payload:  echo \'{"url": "https://example.com"}\' | '
        "leaseq push --session crawl --payloads\n\n"
        "Every line is checked before anything is pushed: a bad line anywhere pushes nothing. "
        "--stream pushes as it reads (endless input); a bad line then stops it, and the "
        "error names the lines that were pushed. Exit status: 0 pushed; 1 a bad line, or "
        "the service refused or could not be reached (the line says what was pushed); "
        "2 a usage error.\n\n"
        "Wait for the results:  leaseq push --session crawl --wait leads.jsonl  prints a JSON "
        "line per lead as it ends (id, status, result, error)."
    )
)
def push(
    session: str = typer.Option(
        ..., "--session", "-s", metavar="NAME", help="The session to push to."
    ),
    file: typer.FileText = typer.Argument(
        "-", help="JSON lines, each a lead (with --payloads, each a payload); - for stdin."
    ),
    payloads: bool = typer.Option(
        False, "--payloads", help="Each line is a payload (a JSON object), pushed as it is."
    ),
    stream: bool = typer.Option(
        False,
        "--stream",
        help="Push as lines arrive instead of checking them all first (for endless input).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the ids and counts as JSON."),
    wait: bool = typer.Option(
        False,
        "--wait",
        help="Then wait for each lead to end, printing its result as a JSON line as it does.",
    ),
    wait_for_room: float = typer.Option(
        0.0,
        "--wait-for-room",
        min=0.0,
        metavar="SECONDS",
        help="A call refused because the session is at its max_queued (429) is sent again "
        "after the service's Retry-After, for up to SECONDS; 0 (the default) fails at once.",
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Push leads from JSON lines, in calls of up to 1,000; every line checked first."""
    service = Service(url, token)
    with one_line_errors():
        pushed = service.push(
            session, file, payloads=payloads, stream=stream, wait_for_room_s=wait_for_room
        )
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(pushed)))
    else:
        _pushed_summary(session, pushed)
    if wait:
        with one_line_errors():
            service.wait_for_all(pushed.ids, _print_outcome)


def _print_outcome(lead: Lead) -> None:
    """One JSON line for a lead that ended, as ``push --wait`` prints it."""
    line = {"id": lead.id, "status": lead.status, "result": lead.result, "error": lead.error}
    typer.echo(json.dumps(line))


def _pushed_summary(session: str, pushed: PushResult) -> None:
    summary = (
        f"{plural(len(pushed.ids), 'lead')} to session {session}: "
        f"{pushed.created} created, {plural(pushed.duplicates, 'duplicate')}"
    )
    if pushed.ids:
        summary += f"; ids {id_ranges(pushed.ids)}"
    say(summary)


@app.command(
    epilog=(
        "Every session:  leaseq stats\n\nOne, as JSON:  leaseq stats --session crawl --json\n\n"
        "Keep watching, as the dashboard does:  leaseq stats --watch 2  (Ctrl-C to stop)"
    )
)
def stats(
    session: str | None = typer.Option(
        None, "--session", "-s", metavar="NAME", help="One session only."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the counts as JSON."),
    watch: float | None = typer.Option(
        None,
        "--watch",
        metavar="SECONDS",
        min=0.2,
        help="Refresh every SECONDS with the dashboard's numbers, until Ctrl-C.",
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Show lead counts by status, per session, with each one's oldest available lead's age."""
    service = Service(url, token)
    if watch is not None:
        if as_json:
            fail("--watch and --json do not go together", EXIT_USAGE)
        _watch(service, session, watch)
        return
    with one_line_errors():
        if session is not None:
            rows, total = {session: service.stats(session)}, None
        else:
            every = service.stats_all()
            rows, total = every.sessions, every.total
    if as_json:
        counts = {name: counts_json(c) for name, c in rows.items()}
        if total is None:
            typer.echo(json.dumps(next(iter(counts.values()))))
        else:
            typer.echo(json.dumps({"sessions": counts, "total": counts_json(total)}))
        return
    table = Table("session", *COUNT_COLUMNS, "oldest available", box=None, header_style="bold")
    for column in table.columns[1:]:
        column.justify = "right"
    for name, c in rows.items():
        table.add_row(name, *map(str, _counts(c).values()), age_text(c.oldest_available_age_s))
    if total is not None:
        table.add_section()
        table.add_row(
            "total",
            *map(str, _counts(total).values()),
            age_text(total.oldest_available_age_s),
            style="bold",
        )
    out.print(table)


def age_text(seconds: float | None) -> str:
    """An age for a person: ``42 s``, ``12 min``, ``3 h``; ``-`` for none."""
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    return f"{s} s" if s < 120 else f"{round(s / 60)} min" if s < 7200 else f"{round(s / 3600)} h"


def watch_table(data: dict[str, Any], session: str | None = None) -> Table:
    """The dashboard's numbers (``GET /dashboard/data``) as one table."""
    columns = (*COUNT_COLUMNS, "oldest available", "done/min", "wasted")
    minutes = data["window_minutes"]
    table = Table(
        "session",
        *columns,
        box=None,
        header_style="bold",
        caption=f"done/min: the last minute; wasted: expired or released, last {minutes} min",
    )
    for column in table.columns[1:]:
        column.justify = "right"

    def row(view: dict[str, Any]) -> list[str]:
        return [
            escape(view["name"]),
            *(str(view[c]) for c in COUNT_COLUMNS),
            age_text(view["oldest_available_age_s"]),
            str(view["completed_per_minute"][-1]),
            str(view["wasted"]),
        ]

    for view in data["sessions"]:
        if session is None or view["name"] == session:
            table.add_row(*row(view))
    if session is None:
        table.add_section()
        table.add_row(*row(data["total"]), style="bold")
    return table


def _watch(service: Service, session: str | None, every_s: float) -> None:
    """Redraw ``watch_table`` every ``every_s`` seconds until Ctrl-C."""
    try:
        with Live(console=out, auto_refresh=False) as live:
            while True:
                try:
                    live.update(watch_table(service.dashboard(), session), refresh=True)
                except CliError as exc:
                    live.update(f"[red]error:[/red] {escape(str(exc))}", refresh=True)
                time.sleep(every_s)
    except KeyboardInterrupt:
        pass


def counts_json(counts: Counts) -> dict[str, Any]:
    """``counts`` as ``GET /stats`` answers them: every field, in the service's order, so a
    script reads ``leaseq stats --json`` as it would read the service."""
    paused = counts.paused_until
    return {
        **{status: getattr(counts, status) for status in STATUSES},
        "blocked": counts.blocked,
        "pending": counts.pending,
        AGE: counts.oldest_available_age_s,
        "paused_until": None if paused is None else rfc3339(paused),
    }


def _counts(counts: Counts) -> dict[str, int]:
    return {column: getattr(counts, column) for column in COUNT_COLUMNS}


@app.command(
    epilog="One session:  leaseq sweep --session crawl\n\nEvery session:  leaseq sweep --all"
)
def sweep(
    session: str | None = typer.Option(
        None, "--session", "-s", metavar="NAME", help="The session to sweep."
    ),
    all_sessions: bool = typer.Option(False, "--all", help="Sweep every session."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Requeue expired leases now (failed once out of attempts)."""
    if (session is not None) == all_sessions:
        fail("give --session NAME or --all (one of them)", EXIT_USAGE)
    with one_line_errors():
        swept = Service(url, token).sweep(session)
    where = f"session {session}" if session is not None else "every session"
    say(f"swept {where}: {swept.requeued} requeued, {swept.failed} failed")
