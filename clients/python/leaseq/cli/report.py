"""``leaseq report`` from the service: the ledger's audit over HTTP, and how any audit prints.

A worker's machine has the service's URL (``--url`` / ``LEASEQ_URL``), not its
database, so the report it asks for comes from ``GET /sessions/{session}/report``
as the other client verbs' answers do. The server distribution's ``report``
adds the database path for operators (``app.cli.report``) and prints through
``print_report`` too, so both read the same. Installed without the server,
``leaseq report`` is ``command`` here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from leaseq.cli.output import (
    EXIT_FAILURE,
    EXIT_NOTHING_TO_AUDIT,
    CliError,
    err,
    one_line_errors,
    out,
    plural,
)
from leaseq.cli.root import ServiceUrl, Token
from leaseq.cli.service import Service
from leaseq.model import STATUSES

MUST_BE_ZERO = ("double_completions", "overlapping_leases")
# The parts of a report that are not counters.
NOT_COUNTERS = frozenset({"attempts_per_lead", "owners"})
EXIT_STATUS = (
    "Exit status: 0 no broken promise; 1 the ledger shows a double completion or an "
    "overlapping lease (or the report failed); 2 usage error; 3 no leaseq database there; "
    "4 nothing to audit (the session has no leads, or the ledger has none of them)."
)
SERVICE_EXAMPLE = (
    "From the service:  LEASEQ_URL=http://127.0.0.1:8000 leaseq report --session crawl"
)


def breached(report: Mapping[str, Any]) -> bool:
    """True when the ledger shows a broken promise (a double completion or an overlap)."""
    return any(report[name] for name in MUST_BE_ZERO)


def nothing_to_audit(session: str, leads: int) -> CliError:
    """The error (exit 4) of a report with no lead in its ledger: ``leads`` the session holds.

    An audit of nothing never reads as a clean one: a typo, or a ledger turned off.
    """
    if leads == 0:
        return CliError(f"session {session!r} has no leads", EXIT_NOTHING_TO_AUDIT)
    return CliError(
        f"session {session!r} has {plural(leads, 'lead')} but no ledger rows "
        "(does the service run with LEASEQ_LEDGER=false?): nothing to audit",
        EXIT_NOTHING_TO_AUDIT,
    )


def from_service(url: str, token: str | None, session: str) -> dict[str, Any]:
    """The service's report of ``session``; raises CliError (exit 4) when there is nothing
    to audit, as the database path does."""
    service = Service(url, token)
    found = service.report(session)
    if found["leads"] == 0:
        counts = service.stats(session)
        raise nothing_to_audit(session, sum(getattr(counts, status) for status in STATUSES))
    return found


def show(session: str, report: Mapping[str, Any], *, as_json: bool) -> None:
    """Print ``report`` (as the service sends it), then exit 1 if it shows a broken promise."""
    if as_json:
        typer.echo(json.dumps(report))
    else:
        print_report(session, report)
    if breached(report):
        raise typer.Exit(EXIT_FAILURE)


def print_report(session: str, report: Mapping[str, Any]) -> None:
    """The report as three tables: the ledger's counters, attempts per lead, per owner."""
    table = Table("ledger", "count", title=f"session {session}", box=None, header_style="bold")
    table.columns[1].justify = "right"
    for name, value in report.items():
        if name in NOT_COUNTERS:
            continue
        style = "bold red" if name in MUST_BE_ZERO and value else None
        table.add_row(name.replace("_", " "), str(value), style=style)
    out.print(table)
    attempts = Table("leases", "leads", title="attempts per lead", box=None, header_style="bold")
    for column in attempts.columns:
        column.justify = "right"
    for leases, leads in report["attempts_per_lead"].items():
        attempts.add_row(str(leases), str(leads))
    out.print(attempts)
    owners = Table(
        "owner", "leases", "completions", "wasted", title="per owner", box=None, header_style="bold"
    )
    for column in owners.columns[1:]:
        column.justify = "right"
    for row in report["owners"]:
        owners.add_row(
            escape(row["owner"] or "-"),
            str(row["leases"]),
            str(row["completions"]),
            str(row["wasted"]),
        )
    out.print(owners)
    if breached(report):
        err.print("[bold red]the ledger shows a broken promise[/bold red]")
    else:
        out.print("no double completion, no overlapping lease")


Session = typer.Option(..., "--session", "-s", metavar="NAME", help="The session to audit.")
AsJson = typer.Option(False, "--json", help="Print the report as JSON.")

standalone = typer.Typer(add_completion=False)


@standalone.command(name="report", epilog=f"{SERVICE_EXAMPLE}\n\n{EXIT_STATUS}")
def command(
    session: str = Session,
    as_json: bool = AsJson,
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Audit a session from the lead_events ledger, as the service reads it."""
    with one_line_errors():
        found = from_service(url, token, session)
    show(session, found, as_json=as_json)
