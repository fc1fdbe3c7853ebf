"""``leaseq report``: the ledger's audit of a session, from the service or the database itself.

Registered as the ``report`` command of ``leaseq`` (entry point ``leaseq.commands``).
On a worker's machine, with the service's URL (``--url`` / ``LEASEQ_URL``), it asks
the service, as the client's verbs do (``leaseq.cli.report``); an operator's
database (``--database-url`` / ``LEASEQ_DATABASE_URL``, ``--data-dir`` /
``LEASEQ_DATA_DIR``, or the default embedded one when nothing is named) is read
directly, so it also audits a ledger whose service is gone. A flag wins over a
variable; with both kinds of variable set, the database's (an operator's shell).
Exit status: 0 no broken promise, 1 a broken promise (a double completion or an
overlapping lease) or a failure, 2 a usage error, 3 no leaseq database where it
looked, 4 nothing to audit: the session has no leads (a typo, or all pruned), or
has leads but no ledger rows (the service runs with ``LEASEQ_LEDGER=false``). An
audit of nothing never reads as a clean one.
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Any

import typer

from app.cli.database import DatabaseUrl, DataDir, opened_queue, settings_of
from app.config import Settings
from app.domain.report import report
from leaseq.cli import report as client_report
from leaseq.cli.output import EXIT_USAGE, CliError, one_line_errors
from leaseq.cli.root import Token, service_url
from leaseq.model import STATUSES

cli = typer.Typer(add_completion=False)


def _url(value: str | None) -> str | None:
    return None if value is None else service_url(value)


ReportUrl = typer.Option(
    None,
    "--url",
    envvar="LEASEQ_URL",
    metavar="URL",
    callback=_url,
    help="Ask the leaseq service at URL (http:// or https://) instead of reading a database.",
)


@cli.command(
    name="report",
    epilog=(
        f"{client_report.SERVICE_EXAMPLE}\n\n"
        "The service's embedded PostgreSQL:  leaseq report --session crawl\n\n"
        "Another data folder:  leaseq report --session crawl --data-dir /srv/leaseq/pgdata\n\n"
        "Your own PostgreSQL:  "
        "leaseq report --session crawl --database-url postgresql://app@db/leaseq\n\n"
        "A flag wins over a variable; with LEASEQ_URL and a database variable both set, "
        "the database is read.\n\n"
        f"{client_report.EXIT_STATUS}"
    ),
)
def audit(
    ctx: typer.Context,
    session: str = client_report.Session,
    as_json: bool = client_report.AsJson,
    url: str | None = ReportUrl,
    token: str | None = Token,
    database_url: str | None = DatabaseUrl,
    data_dir: Path | None = DataDir,
) -> None:
    """Audit a session from the lead_events ledger (from the service, or the database)."""
    with one_line_errors():
        if _from_service(ctx, url):
            assert url is not None
            found = client_report.from_service(url, token, session)
        else:
            settings = settings_of(database_url=database_url, data_dir=data_dir)
            found = dataclasses.asdict(asyncio.run(_read(settings, session)))
    client_report.show(session, found, as_json=as_json)


def _from_service(ctx: typer.Context, url: str | None) -> bool:
    """Whether to ask the service: ``--url`` given, or ``LEASEQ_URL`` and no database named.

    Raises CliError (usage) when both a URL and a database are given as flags.
    """
    if url is None:
        return False

    def source(name: str) -> str:
        """Where the parameter came from: COMMANDLINE, ENVIRONMENT, DEFAULT (click's names;
        typer carries a click of its own, so its enum is compared by name)."""
        found = ctx.get_parameter_source(name)
        return "" if found is None else str(found.name)

    databases = {source("database_url"), source("data_dir")}
    if source("url") == "COMMANDLINE":
        if "COMMANDLINE" in databases:
            raise CliError(
                "give --url or a database (--database-url, --data-dir), not both", EXIT_USAGE
            )
        return True
    return not databases & {"COMMANDLINE", "ENVIRONMENT"}


async def _read(settings: Settings, session: str) -> Any:
    """The session's audit; raises CliError (exit 4) when there is nothing to audit."""
    async with opened_queue(settings) as queue:
        found = await report(queue, session)
        if found.leads == 0:
            counts = await queue.stats(session)
            raise client_report.nothing_to_audit(
                session, sum(getattr(counts, status) for status in STATUSES)
            )
        return found
