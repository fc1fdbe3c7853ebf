"""``leaseq tokens create``, ``list`` and ``revoke``: scoped API tokens, over REST.

The verbs talk to the service (``--url`` / ``--token``, as ``leaseq push``
does), not to the database: a remote operator has the API, not always the
database, and the service is what checks who may manage tokens (a full-access
token, or an operator token whose pattern is ``*``) and writes the audit
trail. ``create`` prints the token alone on stdout, once: the service keeps
only its hash.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict
from datetime import datetime

import typer
from rich.markup import escape
from rich.table import Table

from leaseq.cli.output import EXIT_USAGE, err, fail, one_line_errors, out, say
from leaseq.cli.root import ServiceUrl, Token, app
from leaseq.cli.service import Service
from leaseq.limits import SESSION_SCOPE_PATTERN, TOKEN_NAME_PATTERN, TOKEN_ROLES

tokens = typer.Typer(
    help="Scoped API tokens: a role on the sessions of a pattern.", no_args_is_help=True
)
app.add_typer(tokens, name="tokens")

# Lifetimes as people write them: 30d, 12h, 90m, 3600s, 2w.
UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
_DURATION = re.compile(r"([0-9]+)([smhdw]?)")


def parse_expires(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``2w``, ``3600s`` or ``3600`` as seconds. Raises ValueError."""
    found = _DURATION.fullmatch(text.strip().lower())
    if found is None or int(found[1]) == 0:
        raise ValueError(f"--expires {text!r}: write N followed by s, m, h, d or w (30d)")
    return float(int(found[1]) * UNIT_S[found[2] or "s"])


def check_flags(role: str, sessions: str, name: str | None) -> None:
    """Refuse what the service would (exit 2 before any call). Raises ValueError."""
    if role not in TOKEN_ROLES:
        raise ValueError(f"--role {role!r}: one of {', '.join(TOKEN_ROLES)}")
    if not re.fullmatch(SESSION_SCOPE_PATTERN, sessions):
        raise ValueError(f"--sessions {sessions!r}: a session name, optionally ending in *, or *")
    if name is not None and not re.fullmatch(TOKEN_NAME_PATTERN, name):
        raise ValueError(f"--name {name!r}: must match {TOKEN_NAME_PATTERN}")


@tokens.command(
    "create",
    epilog=(
        "One tenant's workers:  leaseq tokens create --role worker --sessions 'tenant-a:*' "
        "--name tenant-a-workers --expires 90d\n\n"
        "Roles: producer (push, read), worker (and lease), reader (stats, reports, leads, "
        "metrics, the dashboard), operator (everything on its sessions). A pattern is a "
        "session name, optionally ending in *, or * alone. The token is printed once."
    ),
)
def create(
    role: str = typer.Option(..., "--role", metavar="|".join(TOKEN_ROLES), help="Its role."),
    sessions: str = typer.Option(
        ..., "--sessions", metavar="PATTERN", help="tenant-a, tenant-a:* or *."
    ),
    name: str | None = typer.Option(None, "--name", help="Unique among live tokens."),
    expires: str | None = typer.Option(None, "--expires", metavar="30d", help="Its lifetime."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Create a scoped token and print it, once (only its hash is kept)."""
    try:
        expires_s = None if expires is None else parse_expires(expires)
        check_flags(role, sessions, name)
    except ValueError as exc:
        fail(str(exc), EXIT_USAGE)
    with one_line_errors():
        made = Service(url, token).create_token(role, sessions, name, expires_s)
    say(made.token or "")
    until = "never expires" if made.expires_at is None else f"expires {_when(made.expires_at)}"
    err.print(
        f"token {escape(made.name)}: {made.role} on {escape(made.sessions)}, {until}; "
        "shown this once",
        highlight=False,
    )


@tokens.command("list", epilog="leaseq tokens list --json")
def listing(
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Show every token: name, role, sessions, expiry, last use, revocation (never a token)."""
    with one_line_errors():
        listed = Service(url, token).tokens()
    if as_json:
        rows = [{k: _json(v) for k, v in asdict(t).items() if k != "token"} for t in listed]
        typer.echo(json.dumps(rows))
        return
    table = Table(
        "name", "role", "sessions", "expires", "last used", "revoked", box=None, header_style="bold"
    )
    for t in listed:
        table.add_row(
            escape(t.name),
            t.role,
            escape(t.sessions),
            _when(t.expires_at),
            _when(t.last_used_at),
            _when(t.revoked_at),
        )
    out.print(table)


@tokens.command("revoke", epilog="leaseq tokens revoke tenant-a-workers")
def revoke(
    name: str = typer.Argument(..., metavar="NAME"),
    url: str = ServiceUrl,
    token: str | None = Token,
) -> None:
    """Revoke a token at once, in every API process."""
    with one_line_errors():
        revoked = Service(url, token).revoke_token(name)
    say(f"revoked {revoked.name}")


def _when(at: datetime | None) -> str:
    return "-" if at is None else at.strftime("%Y-%m-%d %H:%M:%SZ")


def _json(value: object) -> object:
    return value.isoformat() if isinstance(value, datetime) else value
