"""Schema migrations: Alembic, driven from code.

Used by ``leaseq db upgrade``, ``leaseq serve --migrate`` and the tests.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import create_engine, text
from sqlalchemy.exc import ProgrammingError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.db import sqlalchemy_url


def script_location() -> str:
    """The migrations folder: the repo's ``migrations/``, installed as ``app._migrations``."""
    try:
        return str(resources.files("app._migrations"))
    except ModuleNotFoundError:
        return str(Path(__file__).resolve().parent.parent / "migrations")


def alembic_config(url: str | None = None) -> Config:
    config = Config()
    config.set_main_option("script_location", script_location())
    if url is not None:
        config.attributes["url"] = url
    return config


def upgrade(url: str, revision: str = "head") -> None:
    """Take the database to ``revision``; harmless when it is there already."""
    command.upgrade(alembic_config(url), revision)


def downgrade(url: str, revision: str = "base") -> None:
    command.downgrade(alembic_config(url), revision)


def head() -> str:
    """The newest revision this code knows."""
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert revision is not None
    return revision


def current(url: str) -> str | None:
    """The revision the database is at (None when unmigrated)."""
    engine = create_engine(sqlalchemy_url(url))
    try:
        with engine.connect() as conn:
            return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    except ProgrammingError:
        return None
    finally:
        engine.dispose()


async def is_at_head(conn: AsyncConnection) -> bool:
    """True when the schema is at the newest revision (readyz)."""
    try:
        found = (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar()
    except ProgrammingError:
        return False
    return found == head()
