"""The ``leaseq`` command line: serve, db upgrade, push, stats, report, sweep, worker, prune.

Argument parsing and output only: serving lives in ``app.serve``, the calls
to a running service in ``app.cli_client``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from pathlib import Path
from typing import Any, NoReturn

import typer
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from app.cli_client import DEFAULT_URL, CliError, Service, id_ranges
from app.config import Settings
from app.model import Counts

app = typer.Typer(
    help="leaseq: a lease queue service on PostgreSQL.",
    epilog=(
        "Start the service:  leaseq serve\n\n"
        "Push work:  leaseq push --session crawl leads.jsonl\n\n"
        "Watch it:  leaseq stats"
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Manage the database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

err = Console(stderr=True)
out = Console()

COUNT_COLUMNS = ("queued", "leased", "done", "failed", "cached", "pending")
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# On SIGTERM, requests in flight get this long to finish (long polls end at
# once, with no leases). Well inside the 30 s a process manager usually waits
# before SIGKILL.
GRACEFUL_TIMEOUT_S = 10
SERVICE, DATABASE, QUEUE = "Service", "Database", "Queue"


def fail(message: str, code: int = 1) -> NoReturn:
    """Print a one-line error and exit non-zero."""
    err.print(f"[red]error:[/red] {escape(message)}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def _default(name: str) -> str:
    """A Settings default, for help texts (named once, in app.config)."""
    field = Settings.model_fields[name]
    value = field.get_default(call_default_factory=True)
    return str(value)


DatabaseUrl = typer.Option(
    None,
    "--database-url",
    envvar="LEASEQ_DATABASE_URL",
    metavar="URL",
    rich_help_panel=DATABASE,
    help="PostgreSQL URL (unset: an embedded PostgreSQL in --data-dir).",
)
ServiceUrl = typer.Option(
    DEFAULT_URL, "--url", envvar="LEASEQ_URL", metavar="URL", help="The leaseq service."
)
Token = typer.Option(
    None, "--token", envvar="LEASEQ_TOKEN", metavar="TOKEN", help="Bearer token for the service."
)


# -- serve -------------------------------------------------------------------


@app.command(
    epilog=(
        "Embedded PostgreSQL, data kept in the user data folder:  leaseq serve\n\n"
        "Your own PostgreSQL, schema migrated first:  "
        "leaseq serve --database-url postgresql://app@db/leaseq --migrate\n\n"
        "Four processes behind a token:  leaseq serve --host 0.0.0.0 --workers 4 --token s3cret\n\n"
        "Every flag can also be set by its LEASEQ_* variable; a flag wins over the variable. "
        "Tuning without flags: LEASEQ_POOL_SIZE, LEASEQ_POOL_TIMEOUT_S, "
        "LEASEQ_STATEMENT_TIMEOUT_MS, LEASEQ_CONNECT_TIMEOUT_S, LEASEQ_MAX_BODY_BYTES, "
        "LEASEQ_MAX_WAITERS, LEASEQ_POLL_INTERVAL_S. Behind PgBouncer in transaction mode: "
        "LEASEQ_DATABASE_POOLED=true, with the direct URL as --listen-database-url."
    )
)
def serve(
    ctx: typer.Context,
    host: str | None = typer.Option(
        None,
        envvar="LEASEQ_HOST",
        metavar="HOST",
        rich_help_panel=SERVICE,
        help=f"Address to listen on (default {_default('host')}).",
    ),
    port: int | None = typer.Option(
        None,
        envvar="LEASEQ_PORT",
        metavar="PORT",
        rich_help_panel=SERVICE,
        help=f"Port to listen on (default {_default('port')}).",
    ),
    workers: int | None = typer.Option(
        None,
        envvar="LEASEQ_WORKERS",
        metavar="N",
        rich_help_panel=SERVICE,
        help=f"Server processes (default {_default('workers')}).",
    ),
    database_url: str | None = DatabaseUrl,
    listen_database_url: str | None = typer.Option(
        None,
        envvar="LEASEQ_LISTEN_DATABASE_URL",
        metavar="URL",
        rich_help_panel=DATABASE,
        help="A direct connection for LISTEN when --database-url goes through a pooler.",
    ),
    data_dir: Path | None = typer.Option(
        None,
        envvar="LEASEQ_DATA_DIR",
        metavar="DIR",
        rich_help_panel=DATABASE,
        help=f"The embedded PostgreSQL's data (default {_default('data_dir')}).",
    ),
    lease_ttl: float | None = typer.Option(
        None,
        envvar="LEASEQ_LEASE_TTL_S",
        metavar="SECONDS",
        rich_help_panel=QUEUE,
        help=f"Lease seconds when a worker asks for none (default {_default('lease_ttl_s')}).",
    ),
    api_tokens: str | None = typer.Option(
        None,
        envvar="LEASEQ_API_TOKENS",
        metavar="TOKENS",
        rich_help_panel=SERVICE,
        help="Comma-separated bearer tokens (default: no auth).",
    ),
    token: list[str] | None = typer.Option(
        None,
        "--token",
        metavar="TOKEN",
        rich_help_panel=SERVICE,
        help="A bearer token the service accepts; repeat for several.",
    ),
    sweep_interval: float | None = typer.Option(
        None,
        envvar="LEASEQ_SWEEP_INTERVAL_S",
        metavar="SECONDS",
        rich_help_panel=QUEUE,
        help=f"Seconds between background sweeps (default {_default('sweep_interval_s')}).",
    ),
    ledger: bool | None = typer.Option(
        None,
        "--ledger/--no-ledger",
        envvar="LEASEQ_LEDGER",
        rich_help_panel=QUEUE,
        help="Write the lead_events audit log (default on); off trades it for speed.",
        show_default=False,
    ),
    migrate_first: bool = typer.Option(
        False,
        "--migrate",
        envvar="LEASEQ_MIGRATE",
        rich_help_panel=DATABASE,
        help="Migrate the database to the newest schema before serving.",
    ),
    log_level: str = typer.Option(
        "info",
        envvar="LEASEQ_LOG_LEVEL",
        metavar="LEVEL",
        rich_help_panel=SERVICE,
        help=f"One of {', '.join(LOG_LEVELS)}.",
        show_default=True,
    ),
    access_log: bool = typer.Option(
        False,
        "--access-log",
        envvar="LEASEQ_ACCESS_LOG",
        rich_help_panel=SERVICE,
        help="Log every request.",
    ),
    graceful_timeout: int = typer.Option(
        GRACEFUL_TIMEOUT_S,
        envvar="LEASEQ_GRACEFUL_TIMEOUT_S",
        metavar="SECONDS",
        rich_help_panel=SERVICE,
        min=0,
        help="On SIGTERM, seconds for requests in flight to finish (long polls end at once).",
        show_default=True,
    ),
) -> None:
    """Serve the REST API (an embedded PostgreSQL when no database URL is set)."""
    from app.serve import ServeError, ServeOptions, run  # the server's imports, only to serve

    if log_level.lower() not in LOG_LEVELS:
        fail(f"--log-level must be one of {', '.join(LOG_LEVELS)}", 2)
    source = ctx.get_parameter_source("api_tokens")
    if token and source is not None and source.name == "ENVIRONMENT":
        api_tokens = None  # --token flags win over LEASEQ_API_TOKENS
    tokens = [t for t in [*(api_tokens or "").split(","), *(token or [])] if t.strip()]
    given: dict[str, Any] = {
        "host": host,
        "port": port,
        "workers": workers,
        "database_url": database_url,
        "listen_database_url": listen_database_url,
        "data_dir": data_dir,
        "lease_ttl_s": lease_ttl,
        "api_tokens": ",".join(tokens) if api_tokens is not None or token else None,
        "sweep_interval_s": sweep_interval,
        "ledger": ledger,
    }
    try:
        settings = Settings(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        fail(f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}", 2)
    options = ServeOptions(
        migrate=migrate_first,
        log_level=log_level.lower(),
        access_log=access_log,
        graceful_timeout_s=graceful_timeout,
    )
    try:
        run(
            settings,
            options,
            os.environ,
            announce=lambda line: out.print(line, highlight=False, markup=False, soft_wrap=True),
        )
    except ServeError as exc:
        fail(str(exc), exc.exit_code)


# -- db ----------------------------------------------------------------------


@db_app.command("upgrade")
def db_upgrade(database_url: str | None = DatabaseUrl) -> None:
    """Migrate the database to the newest schema (harmless when already there)."""
    from app import migrate
    from app.embedded import resolve_database_url

    settings = Settings()
    url = resolve_database_url(database_url or settings.database_url, settings.data_dir)
    try:
        migrate.upgrade(url)
    except Exception as exc:  # one line, not a traceback
        fail(f"migration failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    out.print(f"schema at {migrate.head()}")


# -- verbs against a running service -----------------------------------------


@app.command(
    epilog=(
        "From a file:  leaseq push --session crawl leads.jsonl\n\n"
        'From stdin:  echo \'{"url": "https://example.com"}\' | leaseq push --session crawl\n\n'
        'A line may be a lead:  {"payload": {"url": "…"}, "priority": 5, "key": "example.com"}'
    )
)
def push(
    session: str = typer.Option(
        ..., "--session", "-s", metavar="NAME", help="The session to push to."
    ),
    file: typer.FileText = typer.Argument(
        "-",
        help="JSON lines: each a lead object, or any object taken as the payload (- for stdin).",
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the ids and counts as JSON."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Push leads from JSON lines, in batches of up to 1,000."""
    try:
        pushed = Service(url, token).push(session, file)
    except CliError as exc:
        fail(str(exc))
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(pushed)))
        return
    summary = (
        f"{_n(len(pushed.ids), 'lead')} to session {session}: "
        f"{pushed.created} created, {_n(pushed.duplicates, 'duplicate')}"
    )
    if pushed.ids:
        summary += f"; ids {id_ranges(pushed.ids)}"
    out.print(summary, highlight=False, markup=False, soft_wrap=True)


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


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
    """Show lead counts by status, per session."""
    service = Service(url, token)
    if watch is not None:
        if as_json:
            fail("--watch and --json do not go together", 2)
        _watch(service, session, watch)
        return
    try:
        if session is not None:
            rows, total = {session: service.stats(session)}, None
        else:
            every = service.stats_all()
            rows, total = every.sessions, every.total
    except CliError as exc:
        fail(str(exc))
    if as_json:
        counts = {name: _counts(c) for name, c in rows.items()}
        if total is None:
            typer.echo(json.dumps(next(iter(counts.values()))))
        else:
            typer.echo(json.dumps({"sessions": counts, "total": _counts(total)}))
        return
    table = Table("session", *COUNT_COLUMNS, box=None, header_style="bold")
    for column in table.columns[1:]:
        column.justify = "right"
    for name, c in rows.items():
        table.add_row(name, *map(str, _counts(c).values()))
    if total is not None:
        table.add_section()
        table.add_row("total", *map(str, _counts(total).values()), style="bold")
    out.print(table)


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    s = max(0, round(seconds))
    return f"{s} s" if s < 120 else f"{round(s / 60)} min" if s < 7200 else f"{round(s / 3600)} h"


def watch_table(data: dict[str, Any], session: str | None = None) -> Table:
    """The dashboard's numbers (``GET /dashboard/data``) as one table."""
    columns = (*COUNT_COLUMNS, "oldest queued", "done/min", "wasted")
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
            _age(view["oldest_queued_s"]),
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
    import time

    from rich.live import Live

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
        fail("give --session NAME or --all (one of them)", 2)
    try:
        swept = Service(url, token).sweep(session)
    except CliError as exc:
        fail(str(exc))
    where = f"session {session}" if session is not None else "every session"
    out.print(f"swept {where}: {swept.requeued} requeued, {swept.failed} failed", highlight=False)


# -- prune -------------------------------------------------------------------

DURATION_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_duration_re = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhd])\s*$")


def parse_duration(value: str) -> float:
    """Seconds in a duration such as 90s, 30m, 12h or 7d. Raises ValueError."""
    match = _duration_re.match(value)
    if match is None:
        raise ValueError(f"{value!r} is not a duration such as 30m, 12h or 7d")
    return float(match[1]) * DURATION_UNITS[match[2]]


@app.command(
    epilog=(
        "Finished over a week ago:  leaseq prune --older-than 7d\n\n"
        "One session:  leaseq prune --older-than 12h --session crawl\n\n"
        "Reads the database directly, as `leaseq db upgrade` does. "
        "The service can prune by itself too: LEASEQ_PRUNE_AFTER_S."
    )
)
def prune(
    older_than: str = typer.Option(
        ...,
        "--older-than",
        metavar="DURATION",
        help="Prune terminal leads unchanged this long: 30m, 12h, 7d.",
    ),
    session: str | None = typer.Option(
        None, "--session", "-s", metavar="NAME", help="Only this session (default: every one)."
    ),
    database_url: str | None = DatabaseUrl,
) -> None:
    """Delete done, failed and cached leads (and their events); queued and leased stay.

    A pruned lead's key can be pushed again.
    """
    import asyncio

    from app.db import create_engine
    from app.embedded import resolve_database_url
    from app.errors import LeaseqError
    from app.queue import Queue

    try:
        older_than_s = parse_duration(older_than)
    except ValueError as exc:
        fail(f"--older-than: {exc}", 2)
    settings = Settings()
    url = resolve_database_url(database_url or settings.database_url, settings.data_dir)

    async def run() -> int:
        engine = create_engine(settings, url, pool_size=1)
        try:
            return await Queue(engine).prune(older_than_s, session)
        finally:
            await engine.dispose()

    try:
        pruned = asyncio.run(run())
    except LeaseqError as exc:
        fail(exc.detail)
    except Exception as exc:  # one line, not a traceback
        fail(f"prune failed: {type(exc).__name__}: {(str(exc).splitlines() or [''])[0]}")
    where = f"session {session}" if session is not None else "every session"
    out.print(f"pruned {_n(pruned, 'lead')} from {where}", highlight=False)


# -- report ------------------------------------------------------------------


@app.command(
    epilog=(
        "Against the embedded PostgreSQL:  leaseq report --session crawl\n\n"
        "Against your own:  leaseq report --session crawl --database-url postgresql://app@db/leaseq"
        "\n\nExit status 1 when the ledger shows a double completion or an overlapping lease."
    )
)
def report(
    session: str = typer.Option(
        ..., "--session", "-s", metavar="NAME", help="The session to audit."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    database_url: str | None = DatabaseUrl,
) -> None:
    """Audit a session from the lead_events ledger (read from the database directly)."""
    import asyncio

    from app import report as audit
    from app.db import create_engine
    from app.embedded import resolve_database_url
    from app.errors import LeaseqError
    from app.queue import Queue

    settings = Settings()
    url = resolve_database_url(database_url or settings.database_url, settings.data_dir)

    async def read() -> audit.Report:
        engine = create_engine(settings, url, pool_size=1)
        try:
            return await audit.report(Queue(engine), session)
        finally:
            await engine.dispose()

    try:
        found = asyncio.run(read())
    except LeaseqError as exc:
        fail(f"{exc.code}: {exc.detail}")
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(found)))
    else:
        _print_report(session, found)
    if found.breached:
        raise typer.Exit(1)


def _print_report(session: str, found: Any) -> None:
    from app.report import COUNTERS

    must_be_zero = {"double_completions", "overlapping_leases"}
    table = Table("ledger", "count", title=f"session {session}", box=None, header_style="bold")
    table.columns[1].justify = "right"
    for name in COUNTERS:
        value = getattr(found, name)
        style = "bold red" if name in must_be_zero and value else None
        table.add_row(name.replace("_", " "), str(value), style=style)
    out.print(table)
    attempts = Table("leases", "leads", title="attempts per lead", box=None, header_style="bold")
    for column in attempts.columns:
        column.justify = "right"
    for leases, leads in found.attempts_per_lead.items():
        attempts.add_row(str(leases), str(leads))
    out.print(attempts)
    owners = Table(
        "owner", "leases", "completions", "wasted", title="per owner", box=None, header_style="bold"
    )
    for column in owners.columns[1:]:
        column.justify = "right"
    for row in found.owners:
        owners.add_row(
            escape(row.owner or "-"), str(row.leases), str(row.completions), str(row.wasted)
        )
    out.print(owners)
    if found.breached:
        err.print("[bold red]the ledger shows a broken promise[/bold red]")
    else:
        out.print("no double completion, no overlapping lease")


# -- worker ------------------------------------------------------------------


@app.command(
    context_settings={"allow_interspersed_args": False},
    epilog=(
        "A program per lead, payload as JSON on stdin, result as JSON on stdout:  "
        "leaseq worker --session crawl --concurrency 8 -- python handle.py\n\n"
        "A Python function (async or not) that takes an app.worker.Job:  "
        "leaseq worker --session crawl --handler handle:run\n\n"
        "The program sees LEASEQ_LEAD_ID, LEASEQ_ATTEMPT and LEASEQ_SESSION. Exit 0: done; "
        "non-zero: retried later while attempts remain, else failed. A lost lease or "
        "--max-runtime kills its process group. SIGTERM or Ctrl-C: no new leases, --grace "
        "seconds for those in flight, then they are released; twice: released at once."
    ),
)
def worker(
    command: list[str] | None = typer.Argument(
        None,
        metavar="[-- COMMAND ...]",
        help="The program to run for each lead.",
        show_default=False,
    ),
    session: str = typer.Option(
        ..., "--session", "-s", metavar="NAME", help="The session to work."
    ),
    handler: str | None = typer.Option(
        None, "--handler", metavar="MODULE:FUNCTION", help="A Python callable instead of a program."
    ),
    concurrency: int = typer.Option(1, "--concurrency", "-c", min=1, help="Leads run at once."),
    owner: str | None = typer.Option(
        None, "--owner", metavar="NAME", help="The name leases are taken under (default host-pid)."
    ),
    ttl: float = typer.Option(
        60.0, "--ttl", metavar="SECONDS", help="Lease length; renewed every third of it."
    ),
    wait: float = typer.Option(
        10.0, "--wait", metavar="SECONDS", help="Long-poll wait for work (0-30)."
    ),
    max_runtime: float | None = typer.Option(
        None, "--max-runtime", metavar="SECONDS", help="Kill a lead's handler after this long."
    ),
    grace: float = typer.Option(
        10.0, "--grace", metavar="SECONDS", help="On SIGTERM, time for leads in flight to finish."
    ),
    retry_delay: float = typer.Option(
        1.0, "--retry-delay", metavar="SECONDS", help="First backoff after a failure (doubles)."
    ),
    forever: bool = typer.Option(False, "--forever", help="Keep waiting when the queue is empty."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Log lines only, no progress line."),
    metrics_port: int | None = typer.Option(
        None, "--metrics-port", metavar="PORT", help="Serve Prometheus metrics on 127.0.0.1:PORT."
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Lease leads and run a program (or a Python function) on each until the queue is empty."""
    import asyncio
    import functools
    import logging

    from rich.live import Live
    from rich.logging import RichHandler
    from rich.text import Text

    from app import worker_metrics
    from app.client import AsyncClient
    from app.errors import LeaseqError
    from app.worker import Command, Handler, Worker, default_retry_delay, load_handler

    if bool(command) == (handler is not None):
        fail("give a command after -- or --handler MODULE:FUNCTION (one of them)", 2)
    try:
        handle: Handler = load_handler(handler) if handler is not None else Command(command or [])
    except (ImportError, AttributeError, ValueError) as exc:
        fail(f"--handler {handler}: {exc}", 2)
    if quiet:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    else:
        handler_ = RichHandler(console=err, show_path=False, markup=False)
        logging.basicConfig(level=logging.WARNING, format="%(message)s", handlers=[handler_])
    client = AsyncClient(url, token=token)
    try:
        work = Worker(
            client,
            session,
            handle,
            owner=owner,
            concurrency=concurrency,
            ttl_s=ttl,
            wait_s=wait,
            max_runtime_s=max_runtime,
            grace_s=grace,
            forever=forever,
            retry_delay=functools.partial(default_retry_delay, base_s=retry_delay),
        )
    except ValueError as exc:
        fail(str(exc), 2)
    if metrics_port is not None:
        try:
            worker_metrics.serve(metrics_port)
        except OSError as exc:
            fail(f"--metrics-port {metrics_port}: {exc.strerror or exc}")

    def line() -> Text:
        s = work.stats
        return Text(
            f"{session}: leased {s.leased} · done {s.done + s.cached} · failed {s.failed} · "
            f"lost {s.lost} · in flight {s.in_flight} · {s.rate():.1f}/s"
        )

    async def run() -> None:
        async with client:
            await work.run(handle_signals=True)

    try:
        if quiet:
            asyncio.run(run())
        else:
            with Live(get_renderable=line, console=err, refresh_per_second=4):
                asyncio.run(run())
    except LeaseqError as exc:
        fail(f"{exc.code}: {exc.detail}")
    s = work.stats
    logging.getLogger("leaseq.worker").info(
        "finished: leased %d, done %d, cached %d, failed %d, released %d, lost %d",
        s.leased,
        s.done,
        s.cached,
        s.failed,
        s.released,
        s.lost,
    )


def main() -> None:
    app()


if __name__ == "__main__":
    main()
