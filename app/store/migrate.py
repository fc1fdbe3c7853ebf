"""Schema migrations: Alembic, driven from code (synchronous SQLAlchemy, as Alembic is).

Used by ``leaseq db upgrade``, ``leaseq serve --migrate`` (and its checks) and
the tests. The head revision is read from the scripts once per process.
"""

from __future__ import annotations

import functools
import threading
from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, pool, text
from sqlalchemy.exc import ProgrammingError

from app.store.schema import sqlalchemy_url


def script_location() -> str:
    """The migrations folder: the checkout's own ``migrations/`` beside ``app/`` when there is
    one, else the installed ``app._migrations``. The checkout's first: an editable install maps
    ``app._migrations`` to the folder it was installed from, so a second checkout of the
    repository (a worktree run with PYTHONPATH) would otherwise migrate with the first one's
    revisions, and its services refuse a database its own revisions built."""
    checkout = Path(__file__).resolve().parents[2] / "migrations"
    if (checkout / "env.py").is_file():
        return str(checkout)
    return str(resources.files("app._migrations"))


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", script_location())
    if url is not None:
        config.attributes["url"] = url
    return config


# Alembic's ``context`` and ``op`` are module attributes that each run installs and removes
# (``ModuleClsProxy``): two runs at once in one process swap each other's, and fail with a
# ``KeyError`` or migrate the other run's database. So one run at a time per process.
_ONE_RUN = threading.Lock()


def upgrade(url: str, revision: str = "head") -> None:
    """Take the database to ``revision``; harmless when it is there already."""
    with _ONE_RUN:
        command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    with _ONE_RUN:
        command.downgrade(alembic_config(url), revision)


@functools.cache
def scripts() -> ScriptDirectory:
    """The migration scripts, read once."""
    return ScriptDirectory.from_config(alembic_config())


@functools.cache
def head() -> str:
    """The newest revision this code knows."""
    revision = scripts().get_current_head()
    assert revision is not None
    return revision


def known(revision: str) -> bool:
    """Whether ``revision`` is one of this code's migrations."""
    return any(script.revision == revision for script in scripts().walk_revisions())


def current(url: str, connect_timeout_s: int | None = None) -> str | None:
    """The revision the database is at (None when unmigrated). Raises when unreachable."""
    connect_args = {} if connect_timeout_s is None else {"connect_timeout": connect_timeout_s}
    engine = create_engine(sqlalchemy_url(url), poolclass=pool.NullPool, connect_args=connect_args)
    try:
        with engine.connect() as conn:
            revision = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
            return None if revision is None else str(revision)
    except ProgrammingError:
        return None
    finally:
        engine.dispose()
