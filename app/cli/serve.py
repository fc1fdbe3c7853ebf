"""``leaseq serve``: the service's flags; ``app.api.serve`` runs it.

Registered as the ``serve`` command of ``leaseq`` (entry point ``leaseq.commands``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import typer

from app.cli.database import DATABASE, DatabaseUrl, DataDir, setting_option, settings_of
from app.config import Settings
from leaseq.cli.output import EXIT_USAGE, fail, one_line_errors, say

cli = typer.Typer(add_completion=False)

SERVICE, QUEUE = "Service", "Queue"
LOG_LEVELS = ("critical", "error", "warning", "info", "debug", "trace")
# On SIGTERM, requests in flight get this long to finish (long polls end at
# once, with no leases). Well inside the 30 s a process manager usually waits
# before SIGKILL.
GRACEFUL_TIMEOUT_S = 10


@cli.command(
    epilog=(
        "Embedded PostgreSQL, data kept in the user data folder:  leaseq serve\n\n"
        "Your own PostgreSQL, schema migrated first:  "
        "leaseq serve --database-url postgresql://app@db/leaseq --migrate\n\n"
        "Four processes behind a token:  leaseq serve --host 0.0.0.0 --workers 4 --token s3cret\n\n"
        "Every flag can also be set by its LEASEQ_* variable; a flag wins over the variable. "
        "Tuning without flags: LEASEQ_POOL_SIZE, LEASEQ_POOL_TIMEOUT_S, "
        "LEASEQ_STATEMENT_TIMEOUT_MS, LEASEQ_CONNECT_TIMEOUT_S, LEASEQ_MAX_BODY_BYTES, "
        "LEASEQ_MAX_WAITERS, LEASEQ_POLL_INTERVAL_S, LEASEQ_HEAD_TIMEOUT_S, "
        "LEASEQ_BODY_TIMEOUT_S. Behind PgBouncer in transaction mode: "
        "LEASEQ_DATABASE_POOLED=true, with the direct URL as --listen-database-url."
    )
)
def serve(
    ctx: typer.Context,
    host: str | None = setting_option(
        "host", metavar="HOST", panel=SERVICE, help="Address to listen on (default {default})."
    ),
    port: int | None = setting_option(
        "port", metavar="PORT", panel=SERVICE, help="Port to listen on (default {default})."
    ),
    workers: int | None = setting_option(
        "workers", metavar="N", panel=SERVICE, help="Server processes (default {default})."
    ),
    database_url: str | None = DatabaseUrl,
    listen_database_url: str | None = setting_option(
        "listen_database_url",
        metavar="URL",
        panel=DATABASE,
        help="A direct connection for LISTEN when --database-url goes through a pooler.",
    ),
    data_dir: Path | None = DataDir,
    lease_ttl_s: float | None = setting_option(
        "lease_ttl_s",
        "--lease-ttl",
        metavar="SECONDS",
        panel=QUEUE,
        help="Lease seconds when a worker asks for none (default {default}).",
    ),
    api_tokens: str | None = setting_option(
        "api_tokens",
        metavar="TOKENS",
        panel=SERVICE,
        help="Comma-separated bearer tokens (default: no auth).",
    ),
    token: list[str] | None = typer.Option(
        None,
        "--token",
        metavar="TOKEN",
        rich_help_panel=SERVICE,
        help="A bearer token the service accepts; repeat for several.",
    ),
    allowed_hosts: str | None = setting_option(
        "allowed_hosts",
        metavar="NAMES",
        panel=SERVICE,
        help=(
            "Comma-separated Host names served without tokens besides loopback ones "
            "(DNS rebinding guard); * serves any."
        ),
    ),
    sweep_interval_s: float | None = setting_option(
        "sweep_interval_s",
        "--sweep-interval",
        metavar="SECONDS",
        panel=QUEUE,
        help="Seconds between background sweeps (default {default}).",
    ),
    ledger: bool | None = setting_option(
        "ledger",
        "--ledger/--no-ledger",
        panel=QUEUE,
        help="Write the lead_events audit log (default on); off trades it for speed.",
        show_default=False,
    ),
    group_commit: bool | None = setting_option(
        "group_commit",
        "--group-commit/--no-group-commit",
        panel=QUEUE,
        help=(
            "Send the renewals, completions and leases that arrive while one of their kind "
            "runs together, as one statement (default on)."
        ),
        show_default=False,
    ),
    fair_by: str | None = setting_option(
        "fair_by",
        metavar="count|time",
        panel=QUEUE,
        help=(
            "How a lease across sessions shares the workers by weight: by leases (count, the "
            "default) or by the time they last (time)."
        ),
    ),
    tracing: bool | None = setting_option(
        "tracing",
        "--tracing/--no-tracing",
        panel=SERVICE,
        help=(
            "Start an OpenTelemetry server span per request, a child of its traceparent "
            "header (default off; the spans go to the process's tracer provider)."
        ),
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
    from app.api.serve import ServeError, ServeOptions, run  # uvicorn and the rest, only to serve

    if log_level.lower() not in LOG_LEVELS:
        fail(f"--log-level must be one of {', '.join(LOG_LEVELS)}", EXIT_USAGE)
    source = ctx.get_parameter_source("api_tokens")
    if token and source is not None and source.name == "ENVIRONMENT":
        api_tokens = None  # --token flags win over LEASEQ_API_TOKENS
    tokens = [t for t in [*(api_tokens or "").split(","), *(token or [])] if t.strip()]
    # Every flag named after a Settings field is that setting (None: not given).
    given: dict[str, Any] = {
        name: value for name, value in ctx.params.items() if name in Settings.model_fields
    }
    given["api_tokens"] = ",".join(tokens) if api_tokens is not None or token else None
    with one_line_errors():
        settings = settings_of(**given)
    options = ServeOptions(
        migrate=migrate_first,
        log_level=log_level.lower(),
        access_log=access_log,
        graceful_timeout_s=graceful_timeout,
    )
    try:
        run(settings, options, os.environ, announce=say)
    except ServeError as exc:
        fail(str(exc), exc.exit_code)
