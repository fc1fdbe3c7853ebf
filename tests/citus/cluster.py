"""A Citus cluster of real PostgreSQL 15 processes: a coordinator and two workers.

Citus is built from the source kept beside the project
(``bash ../shared/citus/build.sh`` as root); where it is not installed the
tests of this tier skip, saying so in one line (fail, under
``LEASEQ_TEST_REQUIRE_SYSTEM_PACKAGES=1``: ``tests.support.system``).

Each node is an ``initdb`` of its own in one temporary folder, started as a
``postgres`` process this module holds by its pid (as root: run as the
``postgres`` system user, as the embedded PostgreSQL runs as a user of its
own). The nodes listen on no TCP address, only on Unix sockets in that
folder (mode 0700, the node user's): they trust whoever connects, so only
that user (and root) may. Their ports are free ports all the same, the names
of their sockets, so a cluster never takes another's.

Citus does not propagate ``CREATE DATABASE``: ``create_database`` makes the
database on every node, adds the extension in each and the workers to the
coordinator, in parallel where it can. A migrated database (``migrated_database``)
is a copy, node by node, of one the cluster migrated once: every node holds its own
part of the template (its shards, its Citus metadata naming the same nodes), so
the copies together are a cluster database as ``leaseq db upgrade`` leaves it, made
in about 0.1 s instead of 1.5 s of distributed DDL.
"""

from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg

from app.store import migrate
from tests.support.databases import drop_database
from tests.support.serving import free_port

PG_BIN = Path(os.environ.get("LEASEQ_TEST_PG_BIN", "/usr/lib/postgresql/15/bin"))
CITUS_MISSING = "Citus is not installed: bash ../shared/citus/build.sh as root"
NODE_USER = "postgres"  # who runs the nodes when this process is root
WORKERS = 2
# Few shards keep create_distributed_table quick; still several per worker.
SETTINGS = {
    # pg_stat_statements and the tracking of every statement feed citus_stat_statements: how
    # the routing tests see which statements Citus ran as router statements, and by which
    # partition key (tests/citus/test_cold_routing.py).
    "shared_preload_libraries": "'citus,pg_stat_statements'",
    "citus.stat_statements_track": "'all'",
    "listen_addresses": "''",
    "citus.shard_count": "4",
    "fsync": "off",  # throwaway data: no flush per commit
    "max_connections": "200",
    "max_prepared_transactions": "100",  # two-phase commit across workers
    "log_min_messages": "warning",
}
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def node_of(database_url: str, sessions: list[str]) -> dict[str, int]:
    """The port of the worker node that holds each session's shard of ``leads``."""
    with psycopg.connect(database_url, autocommit=True) as conn:
        return {
            session: port
            for session, port in conn.execute(
                "SELECT s, nodeport FROM unnest(%s::text[]) AS s, citus_shards"
                " WHERE table_name = 'leads'::regclass"
                " AND shardid = get_shard_id_for_distribution_column('leads', s)",
                [sessions],
            )
        }


def citus_installed(bin_dir: Path = PG_BIN) -> bool:
    """Whether the PostgreSQL of ``bin_dir`` has the Citus extension installed."""
    pg_config = bin_dir / "pg_config"
    if not pg_config.is_file():
        return False
    found = subprocess.run(
        [str(pg_config), "--pkglibdir", "--sharedir"], capture_output=True, text=True, check=False
    )
    if found.returncode != 0:
        return False
    libdir, sharedir = found.stdout.split()
    return (Path(libdir) / "citus.so").is_file() and (
        Path(sharedir) / "extension" / "citus.control"
    ).is_file()


@dataclass
class Node:
    """One PostgreSQL process of the cluster."""

    name: str
    port: int
    data: Path
    socket_dir: Path
    process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        return f"postgresql://postgres@/{database}?host={self.socket_dir}&port={self.port}"

    def connect(self, database: str = "postgres") -> psycopg.Connection[Any]:
        return psycopg.connect(self.url(database), autocommit=True, connect_timeout=5)


@dataclass
class Cluster:
    """A coordinator and its workers, started by ``start`` and stopped by ``stop``."""

    root: Path
    nodes: list[Node] = field(default_factory=list)
    run_as: str | None = None
    _template: str | None = None
    _template_lock: threading.Lock = field(default_factory=threading.Lock)
    _dropper: ThreadPoolExecutor = field(
        default_factory=lambda: ThreadPoolExecutor(1, thread_name_prefix="citus-drop")
    )
    _drops: list[Future[None]] = field(default_factory=list)

    @property
    def coordinator(self) -> Node:
        return self.nodes[0]

    @property
    def workers(self) -> list[Node]:
        return self.nodes[1:]

    def url(self, database: str) -> str:
        """The coordinator's URL of ``database``: what leaseq is given."""
        return self.coordinator.url(database)

    @classmethod
    def start(cls, workers: int = WORKERS) -> Cluster:
        root = Path(tempfile.mkdtemp(prefix="leaseq-citus-"))  # mode 0700
        cluster = cls(root, run_as=NODE_USER if os.geteuid() == 0 else None)
        if cluster.run_as is not None:
            account = pwd.getpwnam(cluster.run_as)
            os.chown(root, account.pw_uid, account.pw_gid)
        names = ["coordinator", *(f"worker{i}" for i in range(1, workers + 1))]
        cluster.nodes = [Node(name, free_port(), root / name, root) for name in names]
        try:
            cluster._each(cluster._initdb)
            for node in cluster.nodes:
                cluster._launch(node)
            for node in cluster.nodes:
                cluster._wait_ready(node)
        except BaseException:
            cluster.stop()
            raise
        return cluster

    def _each(self, step: Callable[[Node], object], nodes: Iterable[Node] | None = None) -> None:
        """``step`` on every node (or on ``nodes``) at once; the first failure is raised."""
        chosen = list(self.nodes if nodes is None else nodes)
        with ThreadPoolExecutor(len(chosen)) as pool:
            for done in [pool.submit(step, node) for node in chosen]:
                done.result()

    def _run(self, argv: list[str]) -> None:
        done = subprocess.run(argv, capture_output=True, text=True, user=self.run_as, check=False)
        if done.returncode != 0:
            raise AssertionError(f"{argv[0]} failed ({done.returncode}):\n{done.stderr}")

    def _initdb(self, node: Node) -> None:
        self._run(
            [str(PG_BIN / "initdb"), "-D", str(node.data), "-A", "trust", "-U", "postgres", "-N"]
        )
        settings = {**SETTINGS, "port": str(node.port), "unix_socket_directories": f"'{self.root}'"}
        with (node.data / "postgresql.conf").open("a") as conf:
            conf.writelines(f"{name} = {value}\n" for name, value in settings.items())

    def _launch(self, node: Node) -> None:
        log = (self.root / f"{node.name}.log").open("ab")
        with log:
            node.process = subprocess.Popen(
                [str(PG_BIN / "postgres"), "-D", str(node.data)],
                stdout=log,
                stderr=subprocess.STDOUT,
                user=self.run_as,
                start_new_session=True,  # a Ctrl-C of the tests reaches it through stop() only
            )

    def _wait_ready(self, node: Node) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        assert node.process is not None
        while True:
            if node.process.poll() is not None:
                raise AssertionError(f"{node.name} exited:\n{self.log(node)}")
            try:
                node.connect().close()
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"{node.name} never answered:\n{self.log(node)}") from None
                time.sleep(0.05)

    def log(self, node: Node) -> str:
        path = self.root / f"{node.name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def create_database(self, name: str, *, citus: bool = True) -> str:
        """``name`` on every node, with the extension and the workers added unless ``citus``
        is false (a single-database deployment on the coordinator, to move onto the cluster
        later with ``add_citus``); the coordinator's URL of it."""

        def create(node: Node) -> None:
            with node.connect() as conn:
                conn.execute(f'CREATE DATABASE "{name}"')

        self._each(create, self.nodes if citus else [self.coordinator])
        if citus:
            self.add_citus(name)
        return self.url(name)

    def migrated_database(self, name: str) -> str:
        """``name`` on every node, migrated to head: a copy on each node of the cluster's
        template (made and migrated by the first call); the coordinator's URL of it."""
        template = self._migrated_template()

        def copy(node: Node) -> None:
            with node.connect() as conn:
                conn.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')

        self._each(copy)
        return self.url(name)

    def _migrated_template(self) -> str:
        """The template of ``migrated_database``: migrated once, then closed to connections
        on every node (Citus' maintenance daemon among them), as a template must be."""
        with self._template_lock:
            if self._template is None:
                name = f"leaseq_template_{uuid.uuid4().hex[:8]}"
                migrate.upgrade(self.create_database(name))

                def close(node: Node) -> None:
                    with node.connect() as conn:
                        conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
                        conn.execute(
                            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                            " WHERE datname = %s AND pid <> pg_backend_pid()",
                            (name,),
                        )

                self._each(close)
                self._template = name
            return self._template

    def add_citus(self, name: str) -> None:
        """The extension in ``name`` on every node (made on the workers when missing), and the
        workers added to the coordinator: what an operator does to make a database a cluster."""

        def extend(node: Node) -> None:
            if node is not self.coordinator:
                with node.connect() as conn:
                    if not conn.execute(
                        "SELECT 1 FROM pg_database WHERE datname = %s", (name,)
                    ).fetchone():
                        conn.execute(f'CREATE DATABASE "{name}"')
            with node.connect(name) as conn:
                conn.execute("CREATE EXTENSION IF NOT EXISTS citus")

        self._each(extend)
        with self.coordinator.connect(name) as conn:
            conn.execute(
                "SELECT citus_set_coordinator_host(%s, %s)",
                (str(self.root), self.coordinator.port),
            )
            for worker in self.workers:
                conn.execute("SELECT citus_add_node(%s, %s)", (str(self.root), worker.port))

    def drop_database(self, name: str) -> None:
        """``name`` gone from every node: the coordinator first, whose sessions hold the
        connections to the workers. Closed to new connections first: the postmaster restarts
        Citus' maintenance daemon in a database whose daemon the drop ended, and the drop
        then waits up to 5 s for it to leave before it fails and is tried again."""

        def drop(node: Node) -> None:
            with node.connect() as conn:
                if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                    conn.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
                drop_database(conn, name)

        drop(self.coordinator)
        self._each(drop, self.workers)

    def drop_database_later(self, name: str) -> None:
        """``drop_database`` on a thread of its own, while the next test runs: a drop waits
        for the sessions Citus' maintenance daemons keep between the nodes to end (up to a few
        seconds each). ``stop`` waits for every drop, and raises the first that failed."""
        self._drops.append(self._dropper.submit(self.drop_database, name))

    def stop_node(self, node: Node) -> None:
        """Stop one node by its pid (fast shutdown), as an outage of that node: its shards'
        statements then fail at once on the coordinator."""
        for drop in self._drops:  # a drop under way needs every node
            drop.result()
        assert node.process is not None
        node.process.send_signal(signal.SIGINT)
        node.process.wait(STOP_TIMEOUT_S)

    def start_node(self, node: Node) -> None:
        """Start a node ``stop_node`` stopped, on the same data and port; back when it
        answers."""
        self._launch(node)
        self._wait_ready(node)

    def stop(self) -> None:
        """Stop every node by its pid (fast shutdown, then SIGKILL), and remove the folder;
        after the drops still under way, whose first failure is raised then."""
        self._dropper.shutdown(wait=True)
        try:
            self._stop_nodes()
        finally:
            shutil.rmtree(self.root, ignore_errors=True)
        for drop in self._drops:
            drop.result()

    def _stop_nodes(self) -> None:
        for node in self.nodes:
            if node.process is not None and node.process.poll() is None:
                node.process.send_signal(signal.SIGINT)
        for node in self.nodes:
            if node.process is None:
                continue
            try:
                node.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                node.process.kill()
                node.process.wait(STOP_TIMEOUT_S)
