"""``leaseq leads list|retry|cancel SESSION``: a session's leads, found by filter and acted on.

``list`` pages through ``GET /sessions/{session}/leads`` (newest first, ``--oldest`` to
reverse) up to ``--limit`` leads (``--all``: every one), as a table or, with ``--json``, one
lead a line in the API's shape. ``retry`` and ``cancel`` take ``--id`` (repeated) or the
same filters as ``list``; by filter they call again while the service says ``more``, so
every matching lead is handled, 10,000 a call.
"""

from __future__ import annotations

import dataclasses
import json
from datetime import datetime
from typing import Any

import typer
from rich.markup import escape
from rich.table import Table

from leaseq.cli.output import EXIT_USAGE, fail, one_line_errors, out, plural, say
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.cli.service import Service
from leaseq.model import Lead
from leaseq.timefmt import rfc3339

leads = typer.Typer(
    help="A session's leads: list them by filter, retry or cancel many at once.",
    no_args_is_help=True,
)
app.add_typer(leads, name="leads")

PAGE = 500  # the most a page holds

Status = typer.Option(
    None, "--status", metavar="STATUS", help="queued, leased, done, failed or cached (repeat)."
)
KeyPrefix = typer.Option(None, "--key-prefix", help="Leads whose key starts with this.")
Owner = typer.Option(None, "--owner", help="Leads held, or last held, by this worker.")
Error = typer.Option(None, "--error", help="Leads whose error contains this, in any case.")
At = "RFC 3339 with its offset, e.g. 2026-12-07T10:00:00Z"
CreatedAfter = typer.Option(None, "--created-after", metavar="TIME", help=f"Inclusive; {At}.")
CreatedBefore = typer.Option(None, "--created-before", metavar="TIME", help="Exclusive.")
UpdatedAfter = typer.Option(None, "--updated-after", metavar="TIME", help="Inclusive.")
UpdatedBefore = typer.Option(None, "--updated-before", metavar="TIME", help="Exclusive.")


def _instant(flag: str, text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        at = datetime.fromisoformat(text)
    except ValueError:
        at = None
    if at is None or at.tzinfo is None:
        fail(f"{flag} {text!r}: {At}", EXIT_USAGE)
    return at


def _filters(
    status: list[str] | None,
    key_prefix: str | None,
    owner: str | None,
    error: str | None,
    created_after: str | None,
    created_before: str | None,
    updated_after: str | None,
    updated_before: str | None,
) -> dict[str, Any]:
    return {
        "status": status or None,
        "key_prefix": key_prefix,
        "owner": owner,
        "error": error,
        "created_after": _instant("--created-after", created_after),
        "created_before": _instant("--created-before", created_before),
        "updated_after": _instant("--updated-after", updated_after),
        "updated_before": _instant("--updated-before", updated_before),
    }


def lead_json(lead: Lead) -> dict[str, Any]:
    """A lead as the API answers it (timestamps in RFC 3339)."""
    return {
        name: rfc3339(value) if isinstance(value, datetime) else value
        for name, value in dataclasses.asdict(lead).items()
    }


@leads.command(
    "list",
    epilog=(
        "Failed by an error:  leaseq leads list crawl --status failed --error 'disk full'\n\n"
        "Every queued one as JSON lines:  leaseq leads list crawl --status queued --all --json"
    ),
)
def list_(
    session: str = typer.Argument(..., metavar="SESSION"),
    status: list[str] | None = Status,
    key_prefix: str | None = KeyPrefix,
    owner: str | None = Owner,
    error: str | None = Error,
    created_after: str | None = CreatedAfter,
    created_before: str | None = CreatedBefore,
    updated_after: str | None = UpdatedAfter,
    updated_before: str | None = UpdatedBefore,
    oldest: bool = typer.Option(False, "--oldest", help="Oldest first (default: newest)."),
    limit: int = typer.Option(50, "--limit", min=1, help="Show at most this many."),
    every: bool = typer.Option(False, "--all", help="Show every lead that matches."),
    as_json: bool = typer.Option(False, "--json", help="One lead a line, as JSON."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """List a session's leads, newest first, filtered."""
    filters = _filters(
        status,
        key_prefix,
        owner,
        error,
        created_after,
        created_before,
        updated_after,
        updated_before,
    )
    service = Service(url, token)
    shown: list[Lead] = []
    cursor: str | None = None
    with one_line_errors():
        while every or len(shown) < limit:
            size = PAGE if every else min(PAGE, limit - len(shown))
            page = service.list_leads(
                session,
                **filters,
                order="oldest" if oldest else "newest",
                limit=size,
                cursor=cursor,
            )
            if as_json:
                for lead in page.leads:
                    typer.echo(json.dumps(lead_json(lead)))
            shown += page.leads
            cursor = page.next_cursor
            if cursor is None:
                break
    if as_json:
        return
    table = Table("id", "status", "key", "owner", "attempts", "updated", "error", box=None)
    table.columns[0].justify = table.columns[4].justify = "right"
    for lead in shown:
        table.add_row(
            str(lead.id),
            lead.status,
            escape(lead.key or "-"),
            escape(lead.owner or "-"),
            f"{lead.attempts}/{lead.max_attempts}",
            rfc3339(lead.updated_at),
            escape((lead.error or "-").splitlines()[0][:80] if lead.error else "-"),
        )
    out.print(table)
    if cursor is not None:
        say(f"{plural(len(shown), 'lead')} shown; more match (--limit N or --all for more)")


def _act(
    verb: str,
    session: str,
    ids: list[int] | None,
    filters: dict[str, Any],
    url: str,
    token: str | None,
) -> None:
    chosen = [*ids] if ids else None
    filtered = any(value is not None for value in filters.values())
    if (chosen is None) == (not filtered):
        fail("say which leads: --id ID…, or filters (--status failed …), not both", EXIT_USAGE)
    service = Service(url, token)
    changed = 0
    with one_line_errors():
        while True:
            done = service.act_on_leads(verb, session, ids=chosen, filters=filters)
            changed += done.changed
            if not done.more:
                break
    past = {"retry": "queued again", "cancel": "cancelled"}[verb]
    say(f"{session}: {plural(changed, 'lead')} {past}")


@leads.command(
    "retry",
    epilog=(
        "By an error:  leaseq leads retry crawl --error 'disk full'\n\n"
        "By id:  leaseq leads retry crawl --id 41 --id 42"
    ),
)
def retry(
    session: str = typer.Argument(..., metavar="SESSION"),
    ids: list[int] | None = typer.Option(None, "--id", metavar="ID", help="This lead (repeat)."),
    status: list[str] | None = Status,
    key_prefix: str | None = KeyPrefix,
    owner: str | None = Owner,
    error: str | None = Error,
    created_after: str | None = CreatedAfter,
    created_before: str | None = CreatedBefore,
    updated_after: str | None = UpdatedAfter,
    updated_before: str | None = UpdatedBefore,
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Queue a session's failed leads again, by id or by filter (others are left)."""
    filters = _filters(
        status,
        key_prefix,
        owner,
        error,
        created_after,
        created_before,
        updated_after,
        updated_before,
    )
    _act("retry", session, ids, filters, url, token)


@leads.command(
    "cancel",
    epilog=(
        "A worker's leads:  leaseq leads cancel crawl --owner w7\n\n"
        "By id:  leaseq leads cancel crawl --id 41 --id 42"
    ),
)
def cancel(
    session: str = typer.Argument(..., metavar="SESSION"),
    ids: list[int] | None = typer.Option(None, "--id", metavar="ID", help="This lead (repeat)."),
    status: list[str] | None = Status,
    key_prefix: str | None = KeyPrefix,
    owner: str | None = Owner,
    error: str | None = Error,
    created_after: str | None = CreatedAfter,
    created_before: str | None = CreatedBefore,
    updated_after: str | None = UpdatedAfter,
    updated_before: str | None = UpdatedBefore,
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Cancel a session's queued and leased leads, by id or by filter (finished ones are left)."""
    filters = _filters(
        status,
        key_prefix,
        owner,
        error,
        created_after,
        created_before,
        updated_after,
        updated_before,
    )
    _act("cancel", session, ids, filters, url, token)
