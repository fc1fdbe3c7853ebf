"""The ``leaseq`` command group: its own commands, and those other distributions install.

The client's commands (push, stats, sweep, worker, sessions) speak to a service over
HTTP. The server's (serve, db, report, prune) belong to the server
distribution, which registers each under the entry-point group
``leaseq.commands`` as a ``typer.Typer``; they are loaded only when one of
them is asked for, or the command list is shown, so ``leaseq worker`` never
imports the server. Without the server installed, each of its commands says
so in one line.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from typing import Any
from urllib.parse import urlsplit

import typer
from typer.core import TyperGroup

from leaseq.cli.output import EXIT_FAILURE, EXIT_USAGE, fail

ENTRY_POINTS = "leaseq.commands"
SERVER_DISTRIBUTION = "leaseq-server"
# The server's commands, as docs/contract.md#command-line lists them with the client's, and
# what each does.
SERVER_COMMANDS = {
    "serve": "Serve the REST API.",
    "db": "Manage the database schema.",
    "report": "Audit a session from the lead_events ledger.",
    "prune": "Delete done, failed and cached leads.",
}
ORDER = (
    "serve",
    "db",
    "push",
    "stats",
    "report",
    "sweep",
    "worker",
    "sessions",
    "leads",
    "tokens",
    "schedules",
    "prune",
    "docs",
)


def _needs_server(name: str, summary: str) -> Any:
    """A stand-in for a server command that is not installed: one line, exit 1."""
    stub = typer.Typer(add_completion=False)

    @stub.command(
        name=name,
        help=f"{summary} Needs the server: pip install {SERVER_DISTRIBUTION}.",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
    )
    def missing(
        args: list[str] | None = typer.Argument(None, hidden=True, show_default=False),
    ) -> None:
        fail(
            f"`leaseq {name}` needs the leaseq server, which is not installed here: "
            f"pip install {SERVER_DISTRIBUTION}",
            EXIT_FAILURE,
        )

    return typer.main.get_command(stub)


class Commands(TyperGroup):
    """The command group: plugin commands are loaded on first need."""

    _loaded = False

    def load(self) -> None:
        """Add the commands of the installed distributions (once)."""
        if self._loaded:
            return
        self._loaded = True
        for entry_point in entry_points(group=ENTRY_POINTS):
            if entry_point.name in self.commands:
                continue
            plugin = entry_point.load()
            if not isinstance(plugin, typer.Typer):
                raise TypeError(f"entry point {entry_point.value} is not a typer.Typer")
            command = typer.main.get_command(plugin)
            command.name = entry_point.name  # a group's Typer need not name itself
            self.add_command(command, entry_point.name)
        if "report" not in self.commands:
            # Without the server, the report comes from the service alone.
            from leaseq.cli import report  # imported here: it imports this module

            self.add_command(typer.main.get_command(report.standalone), "report")
        for name, summary in SERVER_COMMANDS.items():
            if name not in self.commands:
                self.add_command(_needs_server(name, summary), name)

    def list_commands(self, ctx: Any) -> list[str]:
        self.load()
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(ORDER)}
        return sorted(names, key=lambda name: (rank.get(name, len(ORDER)), name))

    def get_command(self, ctx: Any, cmd_name: str) -> Any:
        if cmd_name not in self.commands:
            self.load()
        return super().get_command(ctx, cmd_name)


app = typer.Typer(
    cls=Commands,
    help="leaseq: a lease queue service on PostgreSQL.",
    epilog=(
        "Start the service:  leaseq serve\n\n"
        "Push work:  leaseq push --session crawl leads.jsonl\n\n"
        "Watch it:  leaseq stats\n\n"
        "Exit status: 0 success, 1 failure, 2 usage error, "
        "3 no leaseq database where report or prune looked, "
        "4 nothing for report to audit in that session."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

DEFAULT_URL = "http://127.0.0.1:8000"
URL_SCHEMES = ("http", "https")


def service_url(value: str) -> str:
    """``--url`` / ``LEASEQ_URL`` checked before any request: an http(s) URL with a host.

    Anything else is a usage error (one line, exit 2), never a service to retry.
    """
    text = value.strip()
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 (reading it checks it: "host:abc" raises ValueError)
    except ValueError as exc:
        fail(f"--url {value!r}: not a URL ({exc})", EXIT_USAGE)
    if "://" not in text:
        fail(f"--url {value!r}: give the scheme, as in http://{text}", EXIT_USAGE)
    if parts.scheme.lower() not in URL_SCHEMES:
        fail(f"--url {value!r}: must be an http:// or https:// URL", EXIT_USAGE)
    if not parts.hostname:
        fail(f"--url {value!r}: names no host", EXIT_USAGE)
    return text


ServiceUrl = typer.Option(
    DEFAULT_URL,
    "--url",
    envvar="LEASEQ_URL",
    metavar="URL",
    callback=service_url,
    help="The leaseq service (http:// or https://).",
)
Token = typer.Option(
    None, "--token", envvar="LEASEQ_TOKEN", metavar="TOKEN", help="Bearer token for the service."
)


def command_tree() -> Commands:
    """The ``leaseq`` command with every installed command loaded (for tools and tests)."""
    group = typer.main.get_command(app)
    assert isinstance(group, Commands)
    group.load()
    return group
