"""Test databases, ``leaseq serve`` processes, a browser, and which tests run.

Databases: a migrated template built once per run, a fresh copy for each
test. PostgreSQL is found, in order: ``LEASEQ_TEST_DATABASE_URL``,
``LEASEQ_DATABASE_URL``, a testcontainers PostgreSQL when
``LEASEQ_TEST_DOCKER=1``, else an embedded PostgreSQL started here in a
temporary folder. Tests of the unit tier (tests/unit) ask for none of
these fixtures, so no database starts for them.

Tests marked ``slow`` (the long runs: fuzzing, the API suite through
PgBouncer, chaos, the state machine) are left out unless ``--run-slow`` is
given; CI gives it. A run given no paths (``python -m pytest``, the README's
command) takes the tiers of ``DEFAULT_TIERS`` alone, less the tests that start processes
(marked ``service``: ``tests.support.processes``), what a change most often
breaks, in minutes (docs/testing.md); a tier named on the command line
(``python -m pytest tests/deploy``) runs, and ``--run-slow`` runs every tier.

Processes: ``-n auto`` (pyproject's addopts) spreads a run given no paths over
``DEFAULT_WORKERS`` pytest-xdist workers, a module's tests on one worker
(``--dist loadscope``), each worker with a template of its own (and its own
embedded PostgreSQL when there is no server); a run naming paths stays in one
process. ``-n N`` chooses for any run, ``-n 0`` turns it off.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from sqlalchemy.engine import make_url

from app.config import Settings
from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import Database, libpq_url
from tests.citus.cluster import CITUS_MISSING, Cluster, citus_installed
from tests.support import browser as browsers
from tests.support import processes, system
from tests.support.databases import copy_database, drop_database
from tests.support.serving import Service, Services
from tests.support.worker_support import fresh_database

RUN_SLOW = "--run-slow"
CITUS_ENV = "LEASEQ_TEST_CITUS"  # "1": every test's database is on a Citus cluster
_left_out = pytest.StashKey[int]()  # how many slow tests this run deselected
# The tiers of a run given no paths. The others (deploy: processes, PgBouncer, the deployment
# files; citus: a cluster; clients: Node and Go; chaos) run with --run-slow, as CI runs them,
# or when named. Such a run leaves out the tests that drive Chromium, Node, Go or a bash
# worker (marked ``tools``, or asking for a browser) too.
DEFAULT_TIERS = ("unit", "integration", "api")
BROWSER_FIXTURES = {"browser", "chromium_program"}
_tiers_left_out = pytest.StashKey[dict[str, int]]()  # tier -> its tests this run left out
# Workers of a run given no paths: its tests wait on PostgreSQL, on HTTP round trips and on
# processes they start more than they compute, so one more worker than CPUs keeps the CPUs
# busy (docs/testing.md measures it).
DEFAULT_WORKERS = (os.cpu_count() or 1) + 1
# CI's option for a run beside the README's command: the tests of a tier that command runs
# are left out of this run (docs/testing.md, "CI").
DEFAULT_ELSEWHERE = "--default-elsewhere"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        RUN_SLOW,
        action="store_true",
        help="also run the tests marked slow (fuzzing, a suite through PgBouncer, chaos); CI does",
    )
    parser.addoption(
        DEFAULT_ELSEWHERE,
        action="append",
        default=[],
        metavar="TIER",
        help="leave out the tests of TIER that the README's command runs (CI runs that command "
        "too, on the embedded PostgreSQL): its slow tests and those of tools stay",
    )


def _slow_included(config: pytest.Config) -> bool:
    """--run-slow, or a ``-m`` expression that decides about ``slow`` itself."""
    return bool(config.getoption(RUN_SLOW)) or "slow" in (config.option.markexpr or "")


def _default_tiers_only(config: pytest.Config) -> bool:
    """A run given no paths (pytest took ``testpaths``) and no --run-slow."""
    return not _slow_included(config) and config.args_source == pytest.Config.ArgsSource.TESTPATHS


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """What ``-n auto`` means here: ``DEFAULT_WORKERS`` for a run given no paths, none (one
    process) for a run naming paths or collecting only; ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    still decides when set (None hands the question to pytest-xdist)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    if config.getoption("collectonly") or not _default_tiers_only(config):
        return 0
    return DEFAULT_WORKERS


def pytest_report_header(config: pytest.Config) -> list[str]:
    lines = [
        "slow tests: included"
        if _slow_included(config)
        else f"slow tests: left out (add {RUN_SLOW} to run them too)"
    ]
    if _default_tiers_only(config):
        lines.append(
            f"tiers: {', '.join(DEFAULT_TIERS)}, less the tests of tools and of processes "
            f"(name a path, or add {RUN_SLOW} for every test)"
        )
    return lines


def _outside_the_default(item: pytest.Item) -> str | None:
    """Why a run given no paths leaves the test out: its tier, "tools" or "processes"; None:
    it runs."""
    tier = _tier(item)
    if tier not in DEFAULT_TIERS:
        return tier
    uses = getattr(item, "fixturenames", ())
    if item.get_closest_marker("tools") is not None or BROWSER_FIXTURES & set(uses):
        return "tools"
    if item.get_closest_marker(processes.MARK) is not None:
        return "processes"
    return None


def _tier(item: pytest.Item) -> str:
    """The folder under tests/ that holds the test."""
    parts = item.path.relative_to(item.config.rootpath / "tests").parts
    return parts[0] if len(parts) > 1 else ""


def _run_by_the_readme_command(item: pytest.Item) -> bool:
    """Whether the README's command (a run given no paths, no --run-slow) takes the test."""
    return item.get_closest_marker("slow") is None and _outside_the_default(item) is None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Without --run-slow, deselect the tests marked slow, and in a run given no paths those
    outside ``DEFAULT_TIERS`` or driving other programs (the summary counts both). With
    ``--default-elsewhere TIER``, deselect the tests of TIER the README's command runs."""
    for item in items:
        if "services" in getattr(item, "fixturenames", ()):  # it starts `leaseq serve`
            item.add_marker(processes.MARK)
    elsewhere = set(config.getoption(DEFAULT_ELSEWHERE))
    if elsewhere:
        kept: list[pytest.Item] = []
        ran: list[pytest.Item] = []
        for item in items:
            ran_there = _tier(item) in elsewhere and _run_by_the_readme_command(item)
            (ran if ran_there else kept).append(item)
        config.hook.pytest_deselected(items=ran)
        items[:] = kept
    if _slow_included(config):
        return
    slow = [item for item in items if item.get_closest_marker("slow") is not None]
    if slow:
        config.hook.pytest_deselected(items=slow)
        items[:] = [item for item in items if item.get_closest_marker("slow") is None]
        config.stash[_left_out] = len(slow)
    if _default_tiers_only(config):
        other = [item for item in items if _outside_the_default(item) is not None]
        if other:
            config.hook.pytest_deselected(items=other)
            items[:] = [item for item in items if _outside_the_default(item) is None]
            tiers: dict[str, int] = {}
            for item in other:
                why = _outside_the_default(item) or ""
                tiers[why] = tiers.get(why, 0) + 1
            config.stash[_tiers_left_out] = tiers


def pytest_collection_finish(session: pytest.Session) -> None:
    """In a pytest-xdist worker, hand what its collection left out to the controller, which
    says it in the summary (every worker collects the same tests)."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["left_out"] = session.config.stash.get(_left_out, 0)
        output["tiers_left_out"] = session.config.stash.get(_tiers_left_out, {})


def pytest_testnodedown(node: Any, error: object) -> None:
    """The controller of a pytest-xdist run: keep a worker's counts of what it left out."""
    config: pytest.Config = node.config
    output = getattr(node, "workeroutput", {})
    if "left_out" in output:
        config.stash[_left_out] = output["left_out"]
        config.stash[_tiers_left_out] = output["tiers_left_out"]


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    left_out = terminalreporter.config.stash.get(_left_out, 0)
    if left_out:
        terminalreporter.write_line(
            f"{left_out} slow test{'s' * (left_out != 1)} left out (deselected): "
            f"python -m pytest {RUN_SLOW} runs them"
        )
    tiers = terminalreporter.config.stash.get(_tiers_left_out, {})
    if tiers:
        counted = ", ".join(f"{tier} {n}" for tier, n in sorted(tiers.items()))
        terminalreporter.write_line(
            f"{sum(tiers.values())} tests of other tiers, tools or processes left out (deselected: "
            f"{counted}): python -m pytest {RUN_SLOW} runs them all, a path named runs its own"
        )


@pytest.fixture(autouse=True)
def _marked_for_processes(request: pytest.FixtureRequest) -> Iterator[None]:
    """Tell the helpers that start processes which test runs (``tests.support.processes``):
    only the default tiers' tests need the mark, the README's command runs no other tier."""
    processes.running(request.node if _tier(request.node) in DEFAULT_TIERS else None)
    yield
    processes.running(None)


def _throwaway(url: str) -> None:
    """The tests' own embedded server keeps nothing past the run: it never waits for the disk
    (``fsync``, full page images). A process that crashes, the server's included, still
    loses nothing it committed: that needs only the operating system to stay up."""
    with _admin(url) as conn:
        conn.execute("ALTER SYSTEM SET fsync = off")
        conn.execute("ALTER SYSTEM SET full_page_writes = off")
        conn.execute("SELECT pg_reload_conf()")


def _admin(url: str) -> psycopg.Connection[tuple[object, ...]]:
    return psycopg.connect(libpq_url(url), autocommit=True)


def with_database(url: str, name: str) -> str:
    """The same server, another database."""
    return make_url(url).set(database=name).render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def server_url() -> Iterator[str]:
    """A URL of a PostgreSQL server the tests may create databases on."""
    url = os.environ.get("LEASEQ_TEST_DATABASE_URL") or os.environ.get("LEASEQ_DATABASE_URL")
    if url:
        yield url
    elif os.environ.get("LEASEQ_TEST_DOCKER") == "1":
        from testcontainers.postgres import PostgresContainer

        with PostgresContainer("postgres:16-alpine", driver="psycopg") as container:
            yield container.get_connection_url()
    else:
        from app.store import embedded

        # Not under pytest's tmp folder: another pytest run resets that folder to
        # owner-only access, which the embedded server (run as its own user when
        # we are root) then can no longer read.
        data_dir = Path(tempfile.mkdtemp(prefix="leaseq-test-pg-"))
        try:
            url = embedded.start(data_dir)
            _throwaway(url)
            yield url
        finally:
            embedded.stop(data_dir)
            shutil.rmtree(data_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(server_url: str) -> Iterator[str]:
    """A migrated database, built once per run, that each test copies."""
    name = f"leaseq_tpl_{uuid.uuid4().hex[:12]}"
    with _admin(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    migrate.upgrade(with_database(server_url, name))
    yield name
    with _admin(server_url) as conn:
        drop_database(conn, name)


@pytest.fixture(scope="session")
def citus_cluster() -> Iterator[Cluster]:
    """A Citus coordinator and two workers, for the whole run, started when a test first asks
    (the citus tier, or every test under ``LEASEQ_TEST_CITUS=1``); stopped by their pids."""
    if not citus_installed():
        system.unavailable(CITUS_MISSING)
    cluster = Cluster.start()
    yield cluster
    cluster.stop()


@pytest.fixture
def database_url(request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh, migrated database for one test, dropped afterwards: a copy of the template,
    or under ``LEASEQ_TEST_CITUS=1`` a database of the Citus cluster, distributed by
    ``leaseq db upgrade``'s migrations (a suite run once more on the cluster)."""
    if os.environ.get(CITUS_ENV) == "1":
        cluster: Cluster = request.getfixturevalue("citus_cluster")
        name = f"leaseq_t_{uuid.uuid4().hex[:12]}"
        yield cluster.migrated_database(name)
        cluster.drop_database_later(name)
        return
    server_url: str = request.getfixturevalue("server_url")
    template_db: str = request.getfixturevalue("template_db")
    name = f"leaseq_t_{uuid.uuid4().hex[:12]}"
    with _admin(server_url) as conn:
        copy_database(conn, name, template_db)
    yield with_database(server_url, name)
    with _admin(server_url) as conn:
        drop_database(conn, name)


@pytest.fixture
def empty_database_url(server_url: str) -> Iterator[str]:
    """A fresh database with no schema at all (migration tests)."""
    name = f"leaseq_e_{uuid.uuid4().hex[:12]}"
    with _admin(server_url) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    yield with_database(server_url, name)
    with _admin(server_url) as conn:
        drop_database(conn, name)


@pytest.fixture
def settings() -> Settings:
    return Settings(statement_timeout_ms=30_000, pool_size=24)


@pytest.fixture
async def db(database_url: str, settings: Settings) -> AsyncIterator[Database]:
    """The pool of the service's own runtime path (app.store.pool) on this test's database."""
    async with Database.from_settings(settings, database_url) as db:
        yield db


@pytest.fixture
def queue(db: Database) -> Queue:
    return Queue(db)


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """``leaseq serve`` processes of this test, stopped after it."""
    running = Services(tmp_path)
    yield running
    running.close()


@pytest.fixture(scope="module")
def served(
    request: pytest.FixtureRequest,
    server_url: str,
    template_db: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Service, str]]:
    """One ``leaseq serve`` per test module (with the module's ``SERVE_ENV``), on a fresh
    database; the service and the database's URL. Its tests share it (``service``,
    ``db_url``), each in a session of its own; a module may define its own ``service``."""
    running = Services(tmp_path_factory.mktemp("serve"))
    with fresh_database(server_url, template_db) as url:
        try:
            yield running.start(database_url=url, env=getattr(request.module, "SERVE_ENV", {})), url
        finally:
            running.close()


@pytest.fixture(scope="module")
def service(served: tuple[Service, str]) -> Service:
    return served[0]


@pytest.fixture(scope="module")
def db_url(served: tuple[Service, str]) -> str:
    return served[1]


@pytest.fixture(scope="session")
def chromium_program() -> str:
    """Chromium's path; the test skips (fails under CI's switch) without it."""
    return system.need(system.CHROMIUM)


@pytest.fixture
def browser(chromium_program: str) -> Iterator[Any]:
    """A headless Chromium (``tests.support.browser``)."""
    with browsers.chromium(chromium_program) as launched:
        yield launched
