"""Running the service: checks before serving, the embedded PostgreSQL, uvicorn.

``leaseq serve`` builds the Settings and calls ``run``. The settings reach
uvicorn's worker processes through the ``LEASEQ_*`` environment written here,
so one process and several serve alike: in each, uvicorn calls the factory
``app.api.app:create_app``, which builds the API from ``Settings()`` again (its
runtime ends the long polls the moment SIGTERM arrives).

Everything the user can get wrong (a bad URL, a busy port, an unreachable or
unmigrated database) raises ``ServeError`` with a one-line message before
uvicorn starts. Knows nothing of the queue's SQL; prints nothing itself.

With more than one worker process, ``PROMETHEUS_MULTIPROC_DIR`` points the
metrics of every process at one fresh folder (removed when serving ends), so
a scrape answered by any of them counts them all (``app.metrics``). A folder
the user set already is used as it is, and kept.
"""

from __future__ import annotations

import copy
import errno
import json
import resource
import shutil
import signal
import socket
import tempfile
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn
from sqlalchemy.exc import SQLAlchemyError

from app.api.http_connections import HttpConnection
from app.config import Settings
from app.metrics import MULTIPROC_ENV
from app.store import embedded, migrate
from app.store.pool import redacted
from leaseq.errors import first_line

APP_FACTORY = "app.api.app:create_app"

# Longer than the idle timeout of common load balancers (60 s), so the balancer,
# not the service, closes idle connections: no 502 from reusing a closing one.
KEEP_ALIVE_S = 65
# Connections beyond the long polls a process holds (Settings.max_waiters).
CONNECTION_HEADROOM = 1000
# File descriptors kept free for the database pool, the listener and logs.
RESERVED_FDS = 64

EXIT_FAILURE = 1
EXIT_SCHEMA = 2


class ServeError(Exception):
    """The service cannot start; the message is one line for the user."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class ServeOptions:
    """How to run, beyond Settings: these do not reach the application."""

    migrate: bool
    log_level: str
    access_log: bool
    graceful_timeout_s: int


def check_database_url(url: str) -> None:
    """Raise ServeError unless ``url`` is a PostgreSQL URL."""
    scheme, sep, _ = url.partition("://")
    if not sep or not scheme.replace("+", "").isalnum():
        raise ServeError(
            "--database-url is not a URL; expected postgresql://user:password@host:5432/dbname"
        )
    if scheme.partition("+")[0].lower() not in ("postgres", "postgresql"):
        raise ServeError(f"--database-url must be a postgresql:// URL, not {scheme}://")


def check_listen_address(host: str, port: int) -> None:
    """Raise ServeError when ``host:port`` cannot be listened on (unknown host, port in use)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            sock.bind(address)
        except OSError as exc:
            reason = (
                "port in use" if exc.errno == errno.EADDRINUSE else exc.strerror or first_line(exc)
            )
            raise ServeError(f"cannot listen on {host}:{port}: {reason}") from None


def schema_revision(url: str, connect_timeout_s: int) -> str | None:
    """The Alembic revision of the database, None when it has no schema. Raises ServeError."""
    try:
        return migrate.current(url, connect_timeout_s)
    except SQLAlchemyError as exc:
        reason = first_line(getattr(exc, "orig", None) or exc)
        raise ServeError(f"cannot reach the database at {redacted(url)}: {reason}") from None


def check_schema(url: str, revision: str | None) -> None:
    """Raise ServeError (exit 2) unless the schema is at this code's head, saying what to run."""
    head = migrate.head()
    if revision == head:
        return
    upgrade = "run `leaseq db upgrade` with the same --database-url, or serve with --migrate"
    if revision is None:
        why = "has no leaseq schema"
    elif migrate.known(revision):
        why = f"schema is outdated ({revision}, this leaseq needs {head})"
    else:
        why = f"schema {revision} is newer than this leaseq knows (head {head})"
        upgrade = "upgrade leaseq to the version that migrated it"
    raise ServeError(f"the database at {redacted(url)} {why}; {upgrade}", EXIT_SCHEMA)


def migration_url(settings: Settings) -> str:
    """Where ``--migrate`` migrates: ``database_url``, or the direct URL behind a pooler.

    Migrations hold a session advisory lock and may build indexes concurrently,
    neither of which survives a pooler in transaction mode. Raises ServeError
    when the only URL goes through one.
    """
    assert settings.database_url is not None
    if not settings.pooled:
        return settings.database_url
    if settings.listen_database_url is None:
        raise ServeError(
            "--migrate needs a direct connection when LEASEQ_DATABASE_POOLED is set: set "
            "LEASEQ_LISTEN_DATABASE_URL, or run `leaseq db upgrade` with the direct URL first"
        )
    return settings.listen_database_url


def upgrade_schema(url: str) -> None:
    """Migrate to head; raise ServeError on failure."""
    try:
        migrate.upgrade(url)
    except Exception as exc:  # one line, not a traceback
        raise ServeError(f"migrating {redacted(url)} failed: {first_line(exc)}") from None


def start_embedded(data_dir: Path) -> str:
    """Start the embedded PostgreSQL in ``data_dir`` and migrate it; returns its URL."""
    try:
        url = embedded.start(data_dir)
    except Exception as exc:  # initdb or pg_ctl failed: point at the log, no traceback
        raise ServeError(
            f"cannot start the embedded PostgreSQL in {data_dir}: {first_line(exc)} "
            f"(its log: {Path(data_dir) / 'log'})"
        ) from None
    upgrade_schema(url)
    return url


def environment(settings: Settings) -> dict[str, str | None]:
    """Settings as the ``LEASEQ_*`` variables that rebuild them (None: unset it)."""
    env: dict[str, str | None] = {}
    for name in Settings.model_fields:
        value = getattr(settings, name)
        if value is None:
            text = None
        elif isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, list | dict | tuple | set):
            text = json.dumps(value)
        else:
            text = str(value)
        env[f"LEASEQ_{name.upper()}"] = text
    return env


def export(settings: Settings, environ: MutableMapping[str, str]) -> None:
    """Write ``settings`` into ``environ`` (os.environ) for the worker processes."""
    for key, value in environment(settings).items():
        if value is None:
            environ.pop(key, None)
        else:
            environ[key] = value


def log_config(level: str) -> dict[str, Any]:
    """uvicorn's logging, with leaseq's own loggers (``leaseq.*``) on its console at ``level``."""
    config = copy.deepcopy(uvicorn.config.LOGGING_CONFIG)
    config["loggers"]["leaseq"] = {
        "handlers": ["default"],
        "level": level.upper(),
        "propagate": False,
    }
    return config


def limit_concurrency(settings: Settings) -> int:
    """Connections one process accepts before answering 503: its long polls plus headroom.

    Kept under the open-file limit, so accept() never fails for want of descriptors.
    """
    wanted = settings.max_waiters + CONNECTION_HEADROOM
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        return wanted
    return max(1, min(wanted, soft - RESERVED_FDS - settings.pool_size))


def run(
    settings: Settings,
    options: ServeOptions,
    environ: MutableMapping[str, str],
    announce: Callable[[str], None],
) -> None:
    """Check, start the embedded PostgreSQL if no URL is set, and serve until SIGTERM or SIGINT.

    Raises ServeError before serving. The embedded PostgreSQL is stopped when
    serving ends, however it ends.
    """
    check_listen_address(settings.host, settings.port)
    # SIGTERM ends the service as Ctrl-C does. uvicorn handles both while it
    # serves and raises the signal again once it has drained; this turns that
    # into KeyboardInterrupt, so the `finally` below runs instead of the process
    # dying on the spot (which would leave the embedded PostgreSQL running).
    previous = signal.signal(signal.SIGTERM, signal.default_int_handler)
    data_dir: Path | None = None
    metrics_dir: str | None = None
    try:
        if settings.database_url is None:
            data_dir = settings.data_dir
            url = start_embedded(data_dir)
            settings = settings.model_copy(update={"database_url": url})
            announce(f"embedded PostgreSQL: data in {data_dir}, URL {url}")
        else:
            url = settings.database_url
            check_database_url(url)
            revision = schema_revision(url, settings.connect_timeout_s)
            if options.migrate:
                upgrade_schema(migration_url(settings))
            else:
                check_schema(url, revision)
        export(settings, environ)
        if settings.workers > 1 and not environ.get(MULTIPROC_ENV):
            metrics_dir = tempfile.mkdtemp(prefix="leaseq-metrics-")
            environ[MULTIPROC_ENV] = metrics_dir
        uvicorn.run(
            APP_FACTORY,
            factory=True,
            host=settings.host,
            port=settings.port,
            workers=settings.workers,
            log_level=options.log_level,
            log_config=log_config(options.log_level),
            access_log=options.access_log,
            timeout_keep_alive=KEEP_ALIVE_S,
            timeout_graceful_shutdown=options.graceful_timeout_s,
            limit_concurrency=limit_concurrency(settings),
            # Bounds every wait on a client, and gives way to live requests when full.
            http=HttpConnection,
            ws="none",  # no WebSocket route: an Upgrade header is an ordinary request
            server_header=False,
        )
    except KeyboardInterrupt:
        pass
    finally:
        if metrics_dir is not None:
            environ.pop(MULTIPROC_ENV, None)
            shutil.rmtree(metrics_dir, ignore_errors=True)
        if data_dir is not None:
            if embedded.stop(data_dir):
                announce(f"embedded PostgreSQL stopped (data kept in {data_dir})")
            else:
                announce(
                    f"embedded PostgreSQL left running for its other users (data in {data_dir})"
                )
        signal.signal(signal.SIGTERM, previous)
