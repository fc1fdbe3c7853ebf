"""The autovacuum warning: ``leaseq serve`` logs it, the dashboard shows it, /metrics says it.

Every expectation follows what the server itself answers to ``SHOW
autovacuum`` (the development server at 127.0.0.1:5432 runs without
autovacuum, the embedded PostgreSQL with it). So that both answers are checked
in every run, one more embedded PostgreSQL, the tests' own, is turned off and
on with ``ALTER SYSTEM``; no other server's settings are touched.
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from sqlalchemy.engine import make_url

from app import metrics
from app.config import Settings
from app.dashboard import page
from app.domain import overview
from app.service.maintenance import AUTOVACUUM_OFF
from app.service.runtime import Runtime
from app.store import embedded, migrate
from app.store.pool import libpq_url
from tests.support.databases import drop_database
from tests.support.in_process import serving
from tests.support.scrapes import autovacuum_on
from tests.support.serving import Services

RELOAD_TIMEOUT_S = 5.0


def warnings_logged(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.name == "leaseq.maintenance"
        and record.levelno == logging.WARNING
        and record.getMessage() == AUTOVACUUM_OFF
    ]


def gauge() -> float | None:
    return metrics.REGISTRY.get_sample_value("leaseq_database_autovacuum_enabled")


async def check_runtime(url: str, caplog: pytest.LogCaptureFixture) -> bool:
    """Start and stop a runtime on ``url``; asserts what it said against what the server says."""
    enabled = autovacuum_on(url)
    caplog.clear()
    caplog.set_level(logging.INFO, logger="leaseq.maintenance")
    runtime = Runtime.build(Settings(database_url=url, sweep_interval_s=3600))
    await runtime.start()
    try:
        assert runtime.recovery.done.is_set()
        found = warnings_logged(caplog)
        assert len(found) == (0 if enabled else 1), found
        assert gauge() == (1.0 if enabled else 0.0)
        snapshot = await overview.snapshot(runtime.queue)
        assert snapshot.autovacuum is enabled
        shown = page.to_json(snapshot)
        assert shown["autovacuum"] is enabled
        assert shown["warnings"] == ([] if enabled else [AUTOVACUUM_OFF])
    finally:
        await runtime.stop()
    return bool(enabled)  # bool again: mypy reads the ``is`` checks above as narrowing to Any


async def test_the_runtime_warns_when_the_server_runs_no_autovacuum(
    database_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    await check_runtime(database_url, caplog)


async def test_the_dashboard_data_and_metrics_say_what_the_server_says(
    database_url: str,
) -> None:
    enabled = autovacuum_on(database_url)
    settings = Settings(
        database_url=database_url, api_tokens="", allowed_hosts="leaseq.test", sweep_interval_s=3600
    )
    async with serving(settings) as client:
        found = (await client.get("/dashboard/data")).json()
        scraped = (await client.get("/metrics")).text
    assert found["autovacuum"] is enabled
    assert bool(found["warnings"]) is not enabled
    assert all("autovacuum" in warning.lower() for warning in found["warnings"])
    line = f"leaseq_database_autovacuum_enabled {1.0 if enabled else 0.0}"
    assert line in scraped.splitlines()


def test_the_dashboard_page_has_a_place_for_warnings() -> None:
    shell = page.shell()
    assert 'id="warnings"' in shell
    assert "data.warnings" in shell  # the script draws them


@pytest.mark.service
def test_leaseq_serve_logs_the_warning_once(database_url: str, tmp_path: Path) -> None:
    enabled = autovacuum_on(database_url)
    services = Services(tmp_path)
    try:
        service = services.start(database_url=database_url)
        with service.client() as http:
            assert http.get("/readyz").status_code == 200
    finally:
        services.close()
    logged = [line for line in service.log().splitlines() if AUTOVACUUM_OFF in line]
    assert len(logged) == (0 if enabled else 1), service.log()
    assert all("WARNING" in line for line in logged)


# -- a server of the tests' own, turned off and on ------------------------------


@pytest.fixture(scope="module")
def own_server() -> Iterator[str]:
    data_dir = Path(tempfile.mkdtemp(prefix="leaseq-test-autovacuum-"))
    try:
        yield embedded.start(data_dir)
    finally:
        embedded.stop(data_dir)
        shutil.rmtree(data_dir, ignore_errors=True)


def set_autovacuum(server_url: str, state: str) -> None:
    """ALTER SYSTEM on the tests' own server, then wait until new connections see it."""
    with psycopg.connect(libpq_url(server_url), autocommit=True) as conn:
        conn.execute(f"ALTER SYSTEM SET autovacuum = {state}")
        conn.execute("SELECT pg_reload_conf()")
    deadline = time.monotonic() + RELOAD_TIMEOUT_S
    while autovacuum_on(server_url) is not (state == "on"):
        assert time.monotonic() < deadline, f"autovacuum still not {state}"
        time.sleep(0.02)


@pytest.fixture
def own_database(own_server: str) -> Iterator[str]:
    name = f"leaseq_av_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(own_server), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    url = make_url(own_server).set(database=name).render_as_string(hide_password=False)
    migrate.upgrade(url)
    yield url
    with psycopg.connect(libpq_url(own_server), autocommit=True) as conn:
        drop_database(conn, name)


@pytest.mark.parametrize("state", ["off", "on"])
async def test_both_answers_on_a_server_of_our_own(
    own_server: str, own_database: str, state: str, caplog: pytest.LogCaptureFixture
) -> None:
    set_autovacuum(own_server, state)
    try:
        assert await check_runtime(own_database, caplog) is (state == "on")
    finally:
        set_autovacuum(own_server, "on")
