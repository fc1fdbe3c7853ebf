"""Alembic migrations: head equals the Table definitions; down and up again; every entry point."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import CheckConstraint, Engine, create_engine, inspect, text

from app import migrate
from app.config import Settings
from app.db import LEADS_STORAGE, lead_events, leads, metadata, sqlalchemy_url
from app.db import create_engine as create_async_engine

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


@pytest.fixture
def sync_engine(empty_database_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlalchemy_url(empty_database_url))
    yield engine
    engine.dispose()


def _tables(engine: Engine) -> set[str]:
    return set(inspect(engine).get_table_names())


def _diff(engine: Engine) -> list[object]:
    with engine.connect() as conn:
        return list(compare_metadata(MigrationContext.configure(conn), metadata))


def _constraints(engine: Engine, table: str) -> set[tuple[str, str]]:
    query = text("SELECT conname, contype FROM pg_constraint WHERE conrelid = CAST(:t AS regclass)")
    with engine.connect() as conn:
        return {(r.conname, r.contype) for r in conn.execute(query, {"t": table})}


def _index_definitions(engine: Engine) -> dict[str, str]:
    query = text("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = 'public'")
    with engine.connect() as conn:
        return {r.indexname: r.indexdef for r in conn.execute(query)}


def test_upgrade_builds_exactly_the_table_definitions(
    empty_database_url: str, sync_engine: Engine
) -> None:
    assert _tables(sync_engine) == set()
    assert migrate.current(empty_database_url) is None
    migrate.upgrade(empty_database_url)

    assert migrate.current(empty_database_url) == migrate.head()
    assert _tables(sync_engine) == {"leads", "lead_events", "alembic_version"}
    assert _diff(sync_engine) == []

    # What autogenerate does not compare: check constraints and index predicates.
    for table in (leads, lead_events):
        declared = {c.name for c in table.constraints if isinstance(c, CheckConstraint)}
        found = {name for name, kind in _constraints(sync_engine, table.name) if kind == "c"}
        assert found == declared
    indexes = _index_definitions(sync_engine)
    assert "WHERE (status = 'queued'::text)" in indexes["leads_queued"]
    assert "(session, priority DESC, id)" in indexes["leads_queued"]
    assert "WHERE (status = 'leased'::text)" in indexes["leads_leased_expiry"]
    assert "UNIQUE" in indexes["leads_session_key"]
    assert "WHERE (key IS NOT NULL)" in indexes["leads_session_key"]


def test_upgrade_sets_the_storage_parameters(empty_database_url: str, sync_engine: Engine) -> None:
    migrate.upgrade(empty_database_url)
    with sync_engine.connect() as conn:
        options = conn.execute(
            text("SELECT reloptions FROM pg_class WHERE oid = CAST('leads' AS regclass)")
        ).scalar()
    assert sorted(options) == sorted(f"{name}={value}" for name, value in LEADS_STORAGE.items())


def test_downgrade_to_base_and_upgrade_again(empty_database_url: str, sync_engine: Engine) -> None:
    migrate.upgrade(empty_database_url)
    migrate.downgrade(empty_database_url, "base")
    assert _tables(sync_engine) <= {"alembic_version"}
    assert migrate.current(empty_database_url) is None
    with sync_engine.connect() as conn:
        leftovers = conn.execute(
            text("SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace")
        ).scalar()
    # Only alembic_version and its primary key remain: no sequence, no index, no table of ours.
    assert leftovers == 2

    migrate.upgrade(empty_database_url)
    assert migrate.current(empty_database_url) == migrate.head()
    assert _diff(sync_engine) == []


def test_upgrade_twice_is_harmless(empty_database_url: str, sync_engine: Engine) -> None:
    migrate.upgrade(empty_database_url)
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO leads (session, payload) VALUES ('s', '{\"kept\": true}')"))
    migrate.upgrade(empty_database_url)
    migrate.upgrade(empty_database_url, migrate.head())
    assert migrate.current(empty_database_url) == migrate.head()
    with sync_engine.connect() as conn:
        assert conn.execute(text("SELECT payload FROM leads")).scalar() == {"kept": True}


async def test_is_at_head(empty_database_url: str) -> None:
    engine = create_async_engine(Settings(), empty_database_url, pool_size=1)
    try:
        async with engine.connect() as conn:
            assert not await migrate.is_at_head(conn)
        migrate.upgrade(empty_database_url)
        async with engine.connect() as conn:
            assert await migrate.is_at_head(conn)
    finally:
        await engine.dispose()


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEQ_")}
    env["LEASEQ_DATABASE_URL"] = url
    return env


def _run(args: list[str], url: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        args, cwd=ROOT, env=_env(url), capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.slow
def test_leaseq_db_upgrade_takes_an_empty_database_to_head(
    empty_database_url: str, sync_engine: Engine
) -> None:
    done = _run([str(BIN / "leaseq"), "db", "upgrade"], empty_database_url)
    assert done.returncode == 0, done.stderr
    assert migrate.head() in done.stdout
    assert migrate.current(empty_database_url) == migrate.head()
    assert _diff(sync_engine) == []

    again = _run([str(BIN / "leaseq"), "db", "upgrade"], empty_database_url)
    assert again.returncode == 0, again.stderr


@pytest.mark.slow
def test_alembic_upgrade_head_from_the_repo_root(
    empty_database_url: str, sync_engine: Engine
) -> None:
    done = _run([str(BIN / "alembic"), "upgrade", "head"], empty_database_url)
    assert done.returncode == 0, done.stderr
    assert migrate.current(empty_database_url) == migrate.head()
    assert _diff(sync_engine) == []
    # And alembic's own check finds nothing left to generate.
    check = _run([str(BIN / "alembic"), "check"], empty_database_url)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.slow
def test_concurrent_upgrades_take_turns(empty_database_url: str, sync_engine: Engine) -> None:
    """Several processes starting at once (several API nodes) all succeed; one migrates."""
    procs = [
        subprocess.Popen(
            [str(BIN / "leaseq"), "db", "upgrade"],
            cwd=ROOT,
            env=_env(empty_database_url),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for _ in range(4)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    assert migrate.current(empty_database_url) == migrate.head()
    assert _diff(sync_engine) == []


def test_a_failed_upgrade_is_reported() -> None:
    """`leaseq db upgrade` against nothing fails with a one-line error, not a traceback."""
    url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    done = _run([str(BIN / "leaseq"), "db", "upgrade"], url)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
