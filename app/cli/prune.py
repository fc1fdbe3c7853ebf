"""``leaseq prune``: retention by hand, through the queue the background pruner uses.

Registered as the ``prune`` command of ``leaseq`` (entry point ``leaseq.commands``).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import typer

from app.cli.database import DatabaseUrl, DataDir, opened_queue, settings_of
from app.config import Settings
from leaseq.cli.output import EXIT_USAGE, CliError, one_line_errors, plural, say
from leaseq.timefmt import parse_duration

cli = typer.Typer(add_completion=False)


@cli.command(
    epilog=(
        "Finished over a week ago:  leaseq prune --older-than 7d\n\n"
        "One session:  leaseq prune --older-than 12h --session crawl\n\n"
        "Reads the database directly, found as `leaseq serve` finds it. "
        "The service can prune by itself too: LEASEQ_PRUNE_AFTER_S.\n\n"
        "Exit status: 0 pruned, 1 failed, 2 usage error, 3 no leaseq database there."
    )
)
def prune(
    older_than: str = typer.Option(
        ...,
        "--older-than",
        metavar="DURATION",
        help="Prune terminal leads unchanged this long: 30m, 12h, 7d.",
    ),
    session: str | None = typer.Option(
        None, "--session", "-s", metavar="NAME", help="Only this session (default: every one)."
    ),
    database_url: str | None = DatabaseUrl,
    data_dir: Path | None = DataDir,
) -> None:
    """Delete done, failed and cached leads (and their events); queued and leased stay.

    A pruned lead's key can be pushed again.
    """
    with one_line_errors():
        try:
            older_than_s = parse_duration(older_than)
        except ValueError as exc:
            raise CliError(f"--older-than: {exc}", EXIT_USAGE) from None
        settings = settings_of(database_url=database_url, data_dir=data_dir)
        pruned = asyncio.run(_prune(settings, older_than_s, session))
    where = f"session {session}" if session is not None else "every session"
    say(f"pruned {plural(pruned, 'lead')} from {where}")


async def _prune(settings: Settings, older_than_s: float, session: str | None) -> int:
    async with opened_queue(settings) as queue:
        return await queue.prune(older_than_s, session)
