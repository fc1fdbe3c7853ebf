"""The ``leaseq`` command line: serve, db upgrade, push, stats, report, sweep, worker, prune."""

from __future__ import annotations

import typer
from rich.console import Console

from app import migrate
from app.config import Settings
from app.embedded import resolve_database_url

app = typer.Typer(
    help="leaseq: a lease queue service on PostgreSQL.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
db_app = typer.Typer(help="Manage the database schema.", no_args_is_help=True)
app.add_typer(db_app, name="db")

err = Console(stderr=True)
out = Console()

DatabaseUrl = typer.Option(
    None, "--database-url", envvar="LEASEQ_DATABASE_URL", help="PostgreSQL URL (unset: embedded)."
)


def fail(message: str, code: int = 1) -> None:
    """Print a one-line error and exit non-zero."""
    err.print(f"[red]error:[/red] {message}", highlight=False)
    raise typer.Exit(code)


@db_app.command("upgrade")
def db_upgrade(database_url: str | None = DatabaseUrl) -> None:
    """Migrate the database to the newest schema (harmless when already there)."""
    settings = Settings()
    url = resolve_database_url(database_url or settings.database_url, settings.data_dir)
    try:
        migrate.upgrade(url)
    except Exception as exc:  # one line, not a traceback
        fail(f"migration failed: {type(exc).__name__}: {str(exc).splitlines()[0]}")
    out.print(f"schema at {migrate.head()}")


def main() -> None:
    app()


if __name__ == "__main__":
    main()
