"""Alembic migrations: head equals the Table definitions; down and up again; every entry point."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import CheckConstraint, Engine, create_engine, inspect, text
from sqlalchemy.exc import DBAPIError, IntegrityError

from app.config import Settings
from app.service.maintenance import schema_revision
from app.store import migrate
from app.store.pool import Database, libpq_url
from app.store.schema import (
    LEADS_STORAGE,
    api_tokens,
    idempotency_keys,
    lead_events,
    leads,
    metadata,
    session_settings,
    sqlalchemy_url,
)
from tests.support import processes
from tests.support.databases import drop_database
from tests.support.schema_catalog import fingerprint

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
# The catalogs of a database at revision 0001 as first released, when 0001 still
# built its tables from app.store.schema: the frozen 0001 must keep building exactly this.
SCHEMA_0001 = ROOT / "tests" / "support" / "fixtures" / "schema_0001.json"
INDEXES_0002 = {"leads_terminal_updated", "lead_events_outcomes_at"}


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
    tables = {"leads", "lead_events", "idempotency_keys", "lead_counts", "session_settings"}
    tables |= {"api_tokens", "operator_actions", "schedules", "lead_waits", "alembic_version"}
    tables |= {"lead_dependencies", "lead_key_frees", "leaseq_config"}
    assert _tables(sync_engine) == tables
    assert _diff(sync_engine) == []

    # What autogenerate does not compare: check constraints and index predicates.
    for table in (leads, lead_events, idempotency_keys, session_settings, api_tokens):
        declared = {c.name for c in table.constraints if isinstance(c, CheckConstraint)}
        found = {name for name, kind in _constraints(sync_engine, table.name) if kind == "c"}
        assert found == declared
    indexes = _index_definitions(sync_engine)
    assert "WHERE ((status = 'queued'::text) AND (NOT scheduled))" in indexes["leads_ready"]
    assert "(session, priority DESC, id)" in indexes["leads_ready"]
    assert "leads_queued" not in indexes
    assert "WHERE scheduled" in indexes["leads_scheduled_due"]
    assert "WHERE (status = 'leased'::text)" in indexes["leads_leased_expiry"]
    assert "UNIQUE" in indexes["leads_session_key"]
    assert "WHERE (key IS NOT NULL)" in indexes["leads_session_key"]


def _schema(engine: Engine) -> dict[str, list[dict[str, Any]]]:
    with engine.connect() as conn:
        return fingerprint(conn)


def _upgrade_adds(
    url: str, engine: Engine, start: str, to: str, kind: str
) -> tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]]]:
    """Upgrade from ``start`` to ``to``, checking that it changes nothing but ``kind``
    (indexes, functions …): the schema at ``start``, and what the upgrade added of ``kind``."""
    migrate.upgrade(url, start)
    before = _schema(engine)
    migrate.upgrade(url, to)
    after = _schema(engine)
    assert {k: v for k, v in after.items() if k != kind} == {
        k: v for k, v in before.items() if k != kind
    }
    return before, [item for item in after[kind] if item not in before[kind]]


def _frozen_0001() -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = json.loads(SCHEMA_0001.read_text())
    return found


@pytest.fixture
def another_engine(server_url: str) -> Iterator[Engine]:
    """A second empty database on the same server, to build the schema another way."""
    name = f"leaseq_e_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    engine = create_engine(sqlalchemy_url(server_url).set(database=name))
    yield engine
    engine.dispose()
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        drop_database(conn, name)


def test_0001_builds_the_schema_it_was_released_with(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """0001 is frozen: written out op by op, it builds what it built from app.store.schema."""
    migrate.upgrade(empty_database_url, "0001")
    assert _schema(sync_engine) == _frozen_0001()


def test_0001_does_not_read_the_table_definitions() -> None:
    """A frozen revision stands alone: nothing in it follows later changes to app.store.schema."""
    source = (ROOT / "migrations" / "versions" / "0001_initial.py").read_text()
    assert "from app" not in source
    assert "import app" not in source


def test_head_builds_what_the_table_definitions_create(
    empty_database_url: str, sync_engine: Engine, another_engine: Engine
) -> None:
    """Every column, check, predicate and storage parameter, not only what autogenerate sees."""
    migrate.upgrade(empty_database_url)
    with another_engine.begin() as conn:
        metadata.create_all(conn)
        storage = ", ".join(f"{name} = {value}" for name, value in LEADS_STORAGE.items())
        conn.execute(text(f"ALTER TABLE leads SET ({storage})"))
    assert _schema(sync_engine) == _schema(another_engine)


def test_0002_adds_its_indexes_and_nothing_else(
    empty_database_url: str, sync_engine: Engine
) -> None:
    before, added = _upgrade_adds(empty_database_url, sync_engine, "0001", "0002", "indexes")
    assert {i["name"] for i in added} == INDEXES_0002
    assert all(i["valid"] for i in added)
    by_name = {i["name"]: i["definition"] for i in added}
    assert by_name["leads_terminal_updated"] == (
        "CREATE INDEX leads_terminal_updated ON public.leads USING btree (updated_at) "
        "WHERE (status = ANY (ARRAY['done'::text, 'failed'::text, 'cached'::text]))"
    )
    assert by_name["lead_events_outcomes_at"] == (
        "CREATE INDEX lead_events_outcomes_at ON public.lead_events USING btree (at) "
        "WHERE (event = ANY (ARRAY['completed'::text, 'expired'::text, 'released'::text]))"
    )

    migrate.downgrade(empty_database_url, "0001")
    assert _schema(sync_engine) == before == _frozen_0001()


def test_0002_upgrades_a_queue_with_leads_in_it(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """Built on a table that has rows, the index holds exactly the terminal ones."""
    migrate.upgrade(empty_database_url, "0001")
    with sync_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO leads (session, status, updated_at) "
                "SELECT 's', CASE WHEN n % 2 = 0 THEN 'done' ELSE 'queued' END, "
                "now() - make_interval(secs => 10 * n) FROM generate_series(1, 1000) AS n"
            )
        )
    migrate.upgrade(empty_database_url)
    oldest = (
        "SELECT count(*) FROM leads WHERE status IN ('done', 'failed', 'cached') "
        "AND updated_at < now() - interval '9005 seconds'"
    )
    with sync_engine.connect() as conn:
        conn.execute(text("SET enable_seqscan = off"))
        conn.execute(text("SET enable_bitmapscan = off"))
        plan = "\n".join(r[0] for r in conn.execute(text(f"EXPLAIN {oldest}")))
        assert "leads_terminal_updated" in plan, plan
        assert conn.execute(text(oldest)).scalar() == 50  # n = 902, 904, …, 1000
    assert _diff(sync_engine) == []


def test_0002_lets_the_queue_write_while_it_builds(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """While a build waits for a transaction that writes, other writes still go through.

    A plain CREATE INDEX would queue its SHARE lock behind the open writer, and
    every later write would queue behind it: the queue would stall.
    """
    migrate.upgrade(empty_database_url, "0001")
    url = libpq_url(empty_database_url)
    with psycopg.connect(url) as writer, psycopg.connect(url, autocommit=True) as other:
        writer.execute("INSERT INTO leads (session) VALUES ('open')")  # left uncommitted
        upgrade = threading.Thread(target=migrate.upgrade, args=(empty_database_url,))
        upgrade.start()
        try:
            deadline = time.monotonic() + 20
            while not other.execute(
                "SELECT 1 FROM pg_stat_activity WHERE query LIKE 'CREATE INDEX CONCURRENTLY%' "
                "AND wait_event_type = 'Lock' AND datname = current_database()"
            ).fetchone():
                assert time.monotonic() < deadline, "the build never waited"
                time.sleep(0.02)
            other.execute("SET statement_timeout = '2s'")
            other.execute("INSERT INTO leads (session) VALUES ('during')")
            other.execute("UPDATE leads SET status = 'done' WHERE session = 'during'")
            other.execute(
                "INSERT INTO lead_events (lead_id, session, event, status, attempt, at) "
                "VALUES (1, 'during', 'completed', 'done', 1, now())"
            )
        finally:
            writer.commit()
            upgrade.join(60)
    assert not upgrade.is_alive()
    assert migrate.current(empty_database_url) == migrate.head()
    built = {i["name"]: i["valid"] for i in _schema(sync_engine)["indexes"]}
    assert all(built[name] for name in INDEXES_0002)


def test_0002_rebuilds_an_index_a_failed_build_left_invalid(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """A concurrent build that fails leaves an invalid index; the next upgrade replaces it."""
    migrate.upgrade(empty_database_url, "0001")
    with sync_engine.begin() as conn:
        conn.execute(
            text("INSERT INTO leads (session, status) VALUES ('s', 'done'), ('s', 'done')")
        )
    failing = (
        "CREATE UNIQUE INDEX CONCURRENTLY leads_terminal_updated ON leads (session) "
        "WHERE status IN ('done', 'failed', 'cached')"
    )
    with (
        psycopg.connect(libpq_url(empty_database_url), autocommit=True) as conn,
        pytest.raises(psycopg.errors.UniqueViolation),
    ):
        conn.execute(failing)
    [left] = [i for i in _schema(sync_engine)["indexes"] if i["name"] == "leads_terminal_updated"]
    assert not left["valid"]

    migrate.upgrade(empty_database_url)
    [built] = [i for i in _schema(sync_engine)["indexes"] if i["name"] == "leads_terminal_updated"]
    assert built["valid"]
    assert "(updated_at)" in built["definition"]
    assert "UNIQUE" not in built["definition"]


def test_0003_lets_finished_leads_keep_their_token_and_downgrades_cleanly(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """On a queue with leads in every state: up keeps them, down forgets finished tokens."""
    migrate.upgrade(empty_database_url, "0002")
    at_0002 = _schema(sync_engine)
    with sync_engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO leads (session, status, lease_token, lease_expires_at) VALUES "
                "('s', 'queued', NULL, NULL), ('s', 'leased', 't1', now() + interval '1 hour'), "
                "('s', 'done', NULL, NULL), ('s', 'failed', NULL, NULL)"
            )
        )
    migrate.upgrade(empty_database_url, "0003")
    assert "idempotency_keys" in _tables(sync_engine)
    with sync_engine.begin() as conn:
        conn.execute(text("UPDATE leads SET lease_token = 't3' WHERE status = 'done'"))
        for bad in (
            "UPDATE leads SET lease_token = 'x' WHERE status = 'queued'",
            "UPDATE leads SET lease_token = NULL WHERE status = 'leased'",
            "UPDATE leads SET lease_expires_at = now() WHERE status = 'done'",
        ):
            with pytest.raises(IntegrityError), conn.begin_nested():
                conn.execute(text(bad))

    migrate.downgrade(empty_database_url, "0002")
    assert _schema(sync_engine) == at_0002
    with sync_engine.connect() as conn:
        tokens = dict(conn.execute(text("SELECT status, lease_token FROM leads")).all())
    assert tokens == {"queued": None, "leased": "t1", "done": None, "failed": None}


def test_0007_adds_the_push_function_and_nothing_else(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """A function only: the tables stay as they are, and the downgrade drops it."""
    before, added = _upgrade_adds(empty_database_url, sync_engine, "0006", "0007", "functions")
    assert [function["name"] for function in added] == ["leaseq_push"]

    migrate.downgrade(empty_database_url, "0006")
    assert _schema(sync_engine) == before


def test_0009_adds_flow_control_to_a_queue_with_leads_and_downgrades_cleanly(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """Flow control's columns arrive on leads already there (no throttle, no key, no maximum
    runtime), the constraints hold them to their ranges, and the downgrade takes them away."""
    migrate.upgrade(empty_database_url, "0008")
    before = _schema(sync_engine)
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO leads (session, payload) VALUES ('s', '{}')"))
    migrate.upgrade(empty_database_url, "0009")
    with sync_engine.begin() as conn:
        row = conn.execute(
            text("SELECT throttles, concurrency_key, max_runtime_s, runtime_ends_at FROM leads")
        ).one()
        assert tuple(row) == (0, None, None, None)
    for bad in (
        "UPDATE leads SET throttles = 1",  # more throttled leases than leases
        "UPDATE leads SET concurrency_key = ''",
        "UPDATE leads SET max_runtime_s = 86401",
        "INSERT INTO session_settings (session, max_leased_per_key) VALUES ('s', 0)",
        "INSERT INTO session_settings (session, max_runtime_s) VALUES ('s', 0)",
    ):
        with pytest.raises(IntegrityError), sync_engine.begin() as conn:
            conn.execute(text(bad))
    migrate.downgrade(empty_database_url, "0008")
    assert _schema(sync_engine) == before


def test_0010_adds_schedules_and_the_ended_trigger(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """Two tables, the trigger of ended leads and its function; the downgrade takes them away."""
    migrate.upgrade(empty_database_url, "0009")
    before = _schema(sync_engine)
    migrate.upgrade(empty_database_url, "0010")
    assert _tables(sync_engine) >= {"schedules", "lead_waits"}
    with sync_engine.connect() as conn:
        triggers = conn.execute(
            text("SELECT tgname FROM pg_trigger WHERE tgrelid = 'leads'::regclass")
        ).scalars()
        assert "leads_ended" in set(triggers)
    migrate.downgrade(empty_database_url, "0009")
    assert _schema(sync_engine) == before


def test_0011_adds_traceparent_to_leads_already_there_and_downgrades_cleanly(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """Leads already there have none; the constraint holds a value to the W3C form."""
    migrate.upgrade(empty_database_url, "0010")
    before = _schema(sync_engine)
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO leads (session, payload) VALUES ('s', '{}')"))
    migrate.upgrade(empty_database_url, "0011")
    with sync_engine.begin() as conn:
        assert conn.execute(text("SELECT traceparent FROM leads")).scalar_one() is None
        good = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
        conn.execute(text("UPDATE leads SET traceparent = :t"), {"t": good})
    with pytest.raises(IntegrityError), sync_engine.begin() as conn:
        conn.execute(text("UPDATE leads SET traceparent = 'not-a-traceparent'"))
    migrate.downgrade(empty_database_url, "0010")
    assert _schema(sync_engine) == before


def test_0013_lets_the_ledger_hold_failed_and_downgrades_cleanly(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """The trigger's new function and the event ``failed``; the downgrade puts 0012's back
    and deletes the rows its constraint would refuse."""
    migrate.upgrade(empty_database_url, "0012")
    before = _schema(sync_engine)
    failed = (
        "INSERT INTO lead_events (lead_id, session, event, status, attempt, at) "
        "VALUES (1, 's', 'failed', 'failed', 0, now())"
    )
    with pytest.raises(IntegrityError), sync_engine.begin() as conn:
        conn.execute(text(failed))
    migrate.upgrade(empty_database_url, "0013")
    with sync_engine.begin() as conn:
        conn.execute(text(failed))
        source = conn.execute(
            text("SELECT prosrc FROM pg_proc WHERE proname = 'leaseq_dependents'")
        ).scalar_one()
        assert "'failed'" in source and "lead_events" in source
    migrate.downgrade(empty_database_url, "0012")
    assert _schema(sync_engine) == before
    with sync_engine.connect() as conn:
        assert conn.execute(text("SELECT count(*) FROM lead_events")).scalar_one() == 0


def test_0014_runs_the_dependents_trigger_per_statement_and_downgrades_cleanly(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """One trigger per statement, with both transition tables; the downgrade puts 0013's
    trigger per row back."""
    query = text(
        "SELECT tgtype & 1 AS per_row, tgoldtable, tgnewtable FROM pg_trigger "
        "WHERE tgrelid = 'leads'::regclass AND tgname = 'leads_dependents'"
    )
    migrate.upgrade(empty_database_url, "0013")
    before = _schema(sync_engine)
    migrate.upgrade(empty_database_url, "0014")
    with sync_engine.connect() as conn:
        assert tuple(conn.execute(query).one()) == (0, "old_rows", "new_rows")
    migrate.downgrade(empty_database_url, "0013")
    assert _schema(sync_engine) == before
    with sync_engine.connect() as conn:
        assert tuple(conn.execute(query).one()) == (1, None, None)


def test_0018_parks_keys_at_their_cap_and_downgrades_with_no_lead_left_parked(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """0018 adds the frees, their trigger and the parked leads' index to a queue with leads;
    the downgrade brings every parked lead back before it drops what brings them back."""
    migrate.upgrade(empty_database_url, "0017")
    before = _schema(sync_engine)
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO leads (session, concurrency_key) VALUES ('s', 'k')"))
    migrate.upgrade(empty_database_url, "0018")
    with sync_engine.begin() as conn:
        conn.execute(
            text(
                "UPDATE leads SET status = 'leased', lease_token = 't', "
                "lease_expires_at = now() + interval '1 minute'"
            )
        )
        conn.execute(text("UPDATE leads SET status = 'done', lease_expires_at = NULL"))
        assert conn.execute(
            text("SELECT session, concurrency_key, n FROM lead_key_frees")
        ).all() == [("s", "k", 1)]
        conn.execute(
            text(
                "INSERT INTO leads (session, concurrency_key, available_at) "
                "VALUES ('s', 'k', '2026-01-01')"
            )
        )
        conn.execute(
            text(
                "UPDATE leads SET parked = true, scheduled = true, ready_at = available_at, "
                "available_at = '9999-12-31 00:00:00+00' WHERE status = 'queued'"
            )
        )
    indexes = _index_definitions(sync_engine)
    assert "(session, concurrency_key, priority DESC, id)" in indexes["leads_parked"]
    migrate.downgrade(empty_database_url, "0017")
    assert _schema(sync_engine) == before
    with sync_engine.connect() as conn:
        queued = conn.execute(
            text("SELECT scheduled, available_at FROM leads WHERE status = 'queued'")
        ).one()
        assert not queued.scheduled and queued.available_at.year == 2026


def test_0019_bounds_a_queue_with_leads_and_downgrades_cleanly(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """0019 adds max_queued, the service's kept settings and the trigger that bounds every
    insert; a session over its new bound keeps its leads (only pushes are refused)."""
    migrate.upgrade(empty_database_url, "0018")
    before = _schema(sync_engine)
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO leads (session) SELECT 's' FROM generate_series(1, 3)"))
    migrate.upgrade(empty_database_url, "0019")
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO session_settings (session, max_queued) VALUES ('s', 2)"))
    with sync_engine.connect() as conn, pytest.raises(DBAPIError) as refused:
        conn.execute(text("INSERT INTO leads (session) VALUES ('s')"))
    assert getattr(refused.value.orig, "sqlstate", None) == "LQ429"
    with sync_engine.begin() as conn:
        assert conn.execute(text("SELECT count(*) FROM leads")).scalar() == 3
        conn.execute(text("INSERT INTO leaseq_config (name, value) VALUES ('max_queued', '1')"))
        conn.execute(text("INSERT INTO leads (session) VALUES ('t')"))
    with sync_engine.connect() as conn, pytest.raises(DBAPIError):
        conn.execute(text("INSERT INTO leads (session) VALUES ('t')"))
    migrate.downgrade(empty_database_url, "0018")
    assert _schema(sync_engine) == before


def test_0020_keeps_an_unreadable_payload_as_its_text_and_refuses_new_ones(
    empty_database_url: str, sync_engine: Engine
) -> None:
    """A payload stored before 0020 that the API could not give back (an integer of 5,000
    digits, pushed through ``leaseq_push``) is kept as its JSON text; after it, the function
    and the table refuse one; the downgrade takes the function and the check away."""
    migrate.upgrade(empty_database_url, "0019")
    before = _schema(sync_engine)
    huge = "9" * 5000
    with sync_engine.begin() as conn:
        conn.execute(text(f"SELECT leaseq_push('s', '{{\"n\": {huge}}}'::jsonb)"))
        conn.execute(text("SELECT leaseq_push('s', '{\"n\": 1}'::jsonb)"))
    migrate.upgrade(empty_database_url, "0020")
    with sync_engine.connect() as conn:
        payloads = conn.execute(text("SELECT payload FROM leads ORDER BY id")).scalars().all()
    assert payloads == [{"leaseq_unreadable_payload": f'{{"n": {huge}}}'}, {"n": 1}]
    with pytest.raises(IntegrityError, match="leads_payload_readable"), sync_engine.begin() as c:
        c.execute(text(f"INSERT INTO leads (session, payload) VALUES ('s', '{{\"n\": [{huge}]}}')"))
    migrate.downgrade(empty_database_url, "0019")
    assert _schema(sync_engine) == before


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
    assert set(_index_definitions(sync_engine)) >= INDEXES_0002


def test_upgrade_twice_is_harmless(empty_database_url: str, sync_engine: Engine) -> None:
    migrate.upgrade(empty_database_url)
    with sync_engine.begin() as conn:
        conn.execute(text("INSERT INTO leads (session, payload) VALUES ('s', '{\"kept\": true}')"))
    migrate.upgrade(empty_database_url)
    migrate.upgrade(empty_database_url, migrate.head())
    assert migrate.current(empty_database_url) == migrate.head()
    with sync_engine.connect() as conn:
        assert conn.execute(text("SELECT payload FROM leads")).scalar() == {"kept": True}


async def test_the_runtime_reads_the_schema_revision(empty_database_url: str) -> None:
    """What readyz and `leaseq report` read through app.store.pool: none, then the head."""
    async with Database.from_settings(Settings(), empty_database_url, pool_size=1) as db:
        assert await schema_revision(db) is None
        migrate.upgrade(empty_database_url)
        assert await schema_revision(db) == migrate.head()
    assert migrate.known(migrate.head()) and not migrate.known("f00d")


def _env(url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEQ_")}
    env["LEASEQ_DATABASE_URL"] = url
    return env


def _run(args: list[str], url: str) -> subprocess.CompletedProcess[str]:
    processes.starting(Path(args[0]).name)
    return subprocess.run(
        args, cwd=ROOT, env=_env(url), capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.service
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


@pytest.mark.service
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


@pytest.mark.service
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


def test_upgrades_on_two_threads_of_one_process_each_migrate_their_own_database(
    empty_database_url: str, sync_engine: Engine, another_engine: Engine
) -> None:
    """Alembic's ``context`` is a module attribute that each run installs: two runs at once
    in one process (a migration on a thread beside another) must not swap theirs."""
    other_url = another_engine.url.render_as_string(hide_password=False)
    urls = [empty_database_url, other_url] * 2  # each database twice: the second a no-op
    start = threading.Barrier(len(urls))
    failures: list[BaseException] = []

    def run(url: str) -> None:
        start.wait()
        try:
            migrate.upgrade(url)
        except BaseException as failure:  # reported by the assertion below
            failures.append(failure)

    threads = [threading.Thread(target=run, args=(url,)) for url in urls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    for engine in (sync_engine, another_engine):
        assert _diff(engine) == []


@pytest.mark.service
def test_a_failed_upgrade_is_reported() -> None:
    """`leaseq db upgrade` against nothing fails with a one-line error, not a traceback."""
    url = "postgresql://nobody@127.0.0.1:1/none?connect_timeout=2"
    done = _run([str(BIN / "leaseq"), "db", "upgrade"], url)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
