"""How the server's commands find the service's database, and the one way to open its queue.

The rule is ``leaseq serve``'s: ``--database-url`` / ``LEASEQ_DATABASE_URL``,
else the embedded PostgreSQL kept in ``--data-dir`` / ``LEASEQ_DATA_DIR``.
Only ``db upgrade`` (like ``serve``) may create that cluster, and it says
where; ``report`` and ``prune`` refuse a folder that holds none, and a
database without leaseq's schema, each in one line with exit status 3, so a
typo never reads (or starts) a database of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import Any

import psycopg
import typer
from pydantic import ValidationError

from app.config import Settings
from app.domain.queue import Queue
from app.service.maintenance import schema_revision
from app.store import embedded
from app.store.pool import Database, redacted
from leaseq.cli.output import EXIT_NO_DATABASE, EXIT_USAGE, CliError
from leaseq.errors import Unavailable, first_line

DATABASE = "Database"
LOOK_ELSEWHERE = "is this the service's database? set LEASEQ_DATABASE_URL or --data-dir"


def default(name: str) -> str:
    """A Settings default, for help texts (named once, in app.config)."""
    return str(Settings.model_fields[name].get_default(call_default_factory=True))


def setting_option(field: str, *flags: str, panel: str, help: str, **extra: Any) -> Any:
    """The flag of the ``Settings`` field ``field``: None when not given (its variable, then
    its default, rule), its ``LEASEQ_*`` variable named after the field, and ``{default}`` in
    ``help`` the field's default, so a flag spells out none of these again."""
    return typer.Option(
        None,
        *flags,
        envvar=f"LEASEQ_{field.upper()}",
        rich_help_panel=panel,
        help=help.format(default=default(field)),
        **extra,
    )


DatabaseUrl = setting_option(
    "database_url",
    "--database-url",
    metavar="URL",
    panel=DATABASE,
    help="PostgreSQL URL (unset: the embedded PostgreSQL in --data-dir).",
)
DataDir = setting_option(
    "data_dir",
    "--data-dir",
    metavar="DIR",
    panel=DATABASE,
    help="The embedded PostgreSQL's data (default {default}).",
)


def settings_of(**given: Any) -> Settings:
    """Settings from the flags given (None: not given), over LEASEQ_* and the defaults.

    Raises CliError (usage) for a value Settings refuses.
    """
    try:
        return Settings(**{name: value for name, value in given.items() if value is not None})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise CliError(f"{where}: {first['msg']}", EXIT_USAGE) from None


@dataclass(frozen=True, slots=True)
class Located:
    """A database found: its URL, and how to name it to the user."""

    url: str
    where: str


@contextmanager
def located(
    settings: Settings, *, create: bool = False, announce: Callable[[str], None] | None = None
) -> Iterator[Located]:
    """The service's database, as ``serve`` finds it; an embedded one is stopped afterwards
    (unless another process, the service, still uses it).

    Raises CliError (exit 3) when the data folder holds no cluster and ``create`` is off.
    """
    if settings.database_url is not None:
        yield Located(settings.database_url, f"the database at {redacted(settings.database_url)}")
        return
    data_dir = settings.data_dir.expanduser().resolve()
    where = f"the embedded PostgreSQL in {data_dir}"
    if not embedded.has_cluster(data_dir):
        if not create:
            raise CliError(
                f"no embedded PostgreSQL in {data_dir} — {LOOK_ELSEWHERE}", EXIT_NO_DATABASE
            )
        if announce is not None:
            announce(f"creating an embedded PostgreSQL: data in {data_dir}")
    try:
        url = embedded.start(data_dir)
    except Exception as exc:  # initdb or pg_ctl failed: point at its log, no traceback
        reason = first_line(exc)
        raise CliError(f"cannot start {where}: {reason} (its log: {data_dir / 'log'})") from None
    try:
        yield Located(url, where)
    finally:
        embedded.stop(data_dir)


@asynccontextmanager
async def opened_queue(settings: Settings) -> AsyncIterator[Queue]:
    """The queue on the service's database, checked to hold leaseq's schema.

    Raises CliError: exit 3 without a cluster or a schema, 1 when unreachable.
    """
    with located(settings) as found:
        async with Database.from_settings(settings, found.url, pool_size=1) as db:
            try:
                revision = await schema_revision(db)
            except Unavailable as exc:
                raise CliError(f"cannot reach {found.where}: {exc.detail}") from None
            if revision is None:
                raise CliError(
                    f"no leaseq schema in {found.where} — {LOOK_ELSEWHERE}", EXIT_NO_DATABASE
                )
            try:
                yield Queue(
                    db, ledger=settings.ledger, max_payload_bytes=settings.max_payload_bytes
                )
            except psycopg.Error as exc:  # the database refused (a permission, say): one line
                raise CliError(f"{found.where}: {type(exc).__name__}: {first_line(exc)}") from None
