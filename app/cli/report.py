"""``leaseq report``: the ledger's audit of a session, read from the database itself.

Registered as the ``report`` command of ``leaseq`` (entry point ``leaseq.commands``).
It reads the database, not the service, so it also audits a ledger whose
service is gone. Exit status: 0 no broken promise, 1 a broken promise (a
double completion or an overlapping lease) or a failure, 2 a usage error,
3 no leaseq database where it looked, 4 nothing to audit: the session has no
leads (a typo, or all pruned), or has leads but no ledger rows (the service
runs with ``LEASEQ_LEDGER=false``). An audit of nothing never reads as a
clean one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from app.cli.database import DatabaseUrl, DataDir, opened_queue, settings_of
from app.config import Settings
from app.domain.report import COUNTERS, Report, report
from leaseq.cli.output import (
    EXIT_FAILURE,
    EXIT_NOTHING_TO_AUDIT,
    CliError,
    err,
    one_line_errors,
    out,
    plural,
)
from leaseq.model import STATUSES

cli = typer.Typer(add_completion=False)

MUST_BE_ZERO = frozenset({"double_completions", "overlapping_leases"})


@cli.command(
    name="report",
    epilog=(
        "The service's embedded PostgreSQL:  leaseq report --session crawl\n\n"
        "Another data folder:  leaseq report --session crawl --data-dir /srv/leaseq/pgdata\n\n"
        "Your own PostgreSQL:  "
        "leaseq report --session crawl --database-url postgresql://app@db/leaseq\n\n"
        "Exit status: 0 no broken promise; 1 the ledger shows a double completion or an "
        "overlapping lease (or the report failed); 2 usage error; 3 no leaseq database there; "
        "4 nothing to audit (the session has no leads, or the ledger has none of them)."
    ),
)
def audit(
    session: str = typer.Option(
        ..., "--session", "-s", metavar="NAME", help="The session to audit."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the report as JSON."),
    database_url: str | None = DatabaseUrl,
    data_dir: Path | None = DataDir,
) -> None:
    """Audit a session from the lead_events ledger (read from the database directly)."""
    with one_line_errors():
        settings = settings_of(database_url=database_url, data_dir=data_dir)
        found = asyncio.run(_read(settings, session))
    if as_json:
        typer.echo(json.dumps(dataclasses.asdict(found)))
    else:
        _print(session, found)
    if found.breached:
        raise typer.Exit(EXIT_FAILURE)


async def _read(settings: Settings, session: str) -> Report:
    """The session's audit; raises CliError (exit 4) when there is nothing to audit."""
    async with opened_queue(settings) as queue:
        found = await report(queue, session)
        if found.leads == 0:
            counts = await queue.stats(session)
            leads = sum(getattr(counts, status) for status in STATUSES)
            if leads == 0:
                raise CliError(f"session {session!r} has no leads", EXIT_NOTHING_TO_AUDIT)
            raise CliError(
                f"session {session!r} has {plural(leads, 'lead')} but no ledger rows "
                "(does the service run with LEASEQ_LEDGER=false?): nothing to audit",
                EXIT_NOTHING_TO_AUDIT,
            )
        return found


def _print(session: str, found: Report) -> None:
    table = Table("ledger", "count", title=f"session {session}", box=None, header_style="bold")
    table.columns[1].justify = "right"
    for name in COUNTERS:
        value = getattr(found, name)
        style = "bold red" if name in MUST_BE_ZERO and value else None
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
