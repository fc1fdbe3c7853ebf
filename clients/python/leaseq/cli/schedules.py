"""``leaseq schedules``: a lead pushed into a session at each tick of a cron expression.

``list`` shows every schedule with its next tick; ``put NAME`` creates or
replaces one (its lead from ``--payload``, or a whole ``--lead``); ``show
NAME`` one; ``delete NAME`` stops one. Errors are one line, as everywhere.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from leaseq import timefmt
from leaseq.cli.output import EXIT_USAGE, CliError, one_line_errors, out, say
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.cli.service import Service
from leaseq.model import Schedule

schedules = typer.Typer(
    help="Leads pushed on a schedule (a cron expression in a time zone).",
    no_args_is_help=True,
)
app.add_typer(schedules, name="schedules")


def as_json(schedule: Schedule) -> dict[str, Any]:
    """The schedule as the API answers it."""
    return dataclasses.asdict(schedule) | {"next_tick": timefmt.rfc3339(schedule.next_tick)}


def _object(flag: str, text: str) -> dict[str, Any]:
    """A JSON object given on the command line. Raises CliError (a usage error)."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise CliError(f"{flag}: not JSON ({exc.msg} at column {exc.colno})", EXIT_USAGE) from None
    if not isinstance(value, dict):
        raise CliError(f"{flag}: must be a JSON object", EXIT_USAGE)
    return value


def _line(schedule: Schedule) -> str:
    when = timefmt.rfc3339(schedule.next_tick)
    return (
        f"{schedule.name}: session {schedule.session}, {schedule.cron!r} in {schedule.timezone}, "
        f"next tick {when}"
    )


@schedules.command("list", epilog="As JSON:  leaseq schedules list --json")
def list_schedules(
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Every schedule, with its next tick."""
    with one_line_errors():
        found = Service(url, token).schedules()
    if json_out:
        typer.echo(json.dumps({"schedules": [as_json(s) for s in found]}))
        return
    table = Table("name", "session", "cron", "timezone", "next tick", box=None, header_style="bold")
    for schedule in found:
        table.add_row(
            escape(schedule.name),
            escape(schedule.session),
            escape(schedule.cron),
            escape(schedule.timezone),
            timefmt.rfc3339(schedule.next_tick),
        )
    out.print(table)


@schedules.command(
    "put",
    epilog=(
        "Every five minutes:  leaseq schedules put report --session nightly "
        "--cron '*/5 * * * *' --payload '{\"job\": \"report\"}'\n\n"
        "At 09:00 in Paris, with a priority:  leaseq schedules put morning --session jobs "
        "--cron '0 9 * * *' --timezone Europe/Paris "
        '--lead \'{"payload": {}, "priority": 5}\''
    ),
)
def put(
    name: str = typer.Argument(..., metavar="NAME"),
    session: str = typer.Option(..., "--session", "-s", metavar="SESSION"),
    cron: str = typer.Option(..., "--cron", metavar="EXPR", help="Five fields, or @daily etc."),
    timezone: str = typer.Option("UTC", "--timezone", metavar="ZONE", help="An IANA name."),
    payload: str | None = typer.Option(
        None, "--payload", metavar="JSON", help="The payload of each tick's lead."
    ),
    lead: str | None = typer.Option(
        None,
        "--lead",
        metavar="JSON",
        help="The whole lead: payload, priority, max_attempts, delay_s.",
    ),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Create or replace a schedule: one lead pushed into SESSION at each tick."""
    with one_line_errors():
        if (payload is None) == (lead is None):
            raise CliError("give --payload or --lead (one of them)", EXIT_USAGE)
        body = {"payload": _object("--payload", payload)} if payload is not None else {}
        if lead is not None:
            body = _object("--lead", lead)
        stored = Service(url, token).put_schedule(name, session, cron, body, timezone=timezone)
    say(_line(stored))


@schedules.command("show", epilog="One schedule:  leaseq schedules show report --json")
def show(
    name: str = typer.Argument(..., metavar="NAME"),
    json_out: bool = typer.Option(False, "--json", help="Print as JSON."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """One schedule, with its lead and next tick."""
    with one_line_errors():
        found = Service(url, token).schedule(name)
    if json_out:
        typer.echo(json.dumps(as_json(found)))
        return
    say(_line(found))
    say(f"lead: {json.dumps(found.lead)}")


@schedules.command("delete", epilog="Stop one:  leaseq schedules delete report")
def delete(
    name: str = typer.Argument(..., metavar="NAME"),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Stop a schedule; the leads it pushed stay."""
    with one_line_errors():
        Service(url, token).delete_schedule(name)
    say(f"{name}: deleted")
