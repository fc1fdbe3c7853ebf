"""``leaseq db upgrade``: migrate the service's database to the newest schema.

Registered as the ``db`` command group of ``leaseq`` (entry point ``leaseq.commands``).
It finds the database as ``serve`` does, and like ``serve`` it may create the
embedded PostgreSQL, saying where its data lives.
"""

from __future__ import annotations

from pathlib import Path

import typer

from app.cli.database import DatabaseUrl, DataDir, located, settings_of
from leaseq.cli.output import CliError, one_line_errors, say
from leaseq.errors import first_line

cli = typer.Typer(add_completion=False, no_args_is_help=True)


@cli.callback()
def db() -> None:
    """Manage the database schema."""


@cli.command(
    "upgrade",
    epilog=(
        "The embedded PostgreSQL (created when its folder holds none):  leaseq db upgrade\n\n"
        "Your own:  leaseq db upgrade --database-url postgresql://app@db/leaseq"
    ),
)
def upgrade(database_url: str | None = DatabaseUrl, data_dir: Path | None = DataDir) -> None:
    """Migrate the database to the newest schema (harmless when already there)."""
    from app.store import migrate

    with one_line_errors():
        settings = settings_of(database_url=database_url, data_dir=data_dir)
        with located(settings, create=True, announce=say) as found:
            try:
                migrate.upgrade(found.url)
            except Exception as exc:  # one line, not a traceback
                why = f"{type(exc).__name__}: {first_line(exc)}"
                raise CliError(f"migrating {found.where} failed: {why}") from None
            say(f"schema at {migrate.head()} in {found.where}")
