"""PgBouncer in transaction mode, started by the tests in front of the test PostgreSQL.

Debian's ``pgbouncer`` package (``apt-get install pgbouncer``; ``.ci/run``
installs it). Each ``PgBouncer`` runs its own process on a free port with the
pooling rules of ``deploy/pgbouncer/pooling.ini`` (the ones the compose
profile uses) and a ``*`` database that reaches every database of the test
server, so each test's fresh database is reachable through it. PgBouncer
refuses to run as root: as root it is started with ``-u nobody``. ``stop``
ends it by its pid.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from app.pg import libpq_url
from tests.serving import free_port

ROOT = Path(__file__).resolve().parent.parent.parent
POOLING_INI = ROOT / "deploy" / "pgbouncer" / "pooling.ini"
# Through the pooler, statement_timeout comes from the pooler's connect_query.
STATEMENT_TIMEOUT_MS = 30_000
START_TIMEOUT_S = 10.0
UNPRIVILEGED_USER = "nobody"


def binary() -> str:
    """The pgbouncer program; fails, saying how to install it, when there is none."""
    found = shutil.which("pgbouncer") or next(
        (p for p in ("/usr/sbin/pgbouncer", "/usr/bin/pgbouncer") if os.access(p, os.X_OK)), None
    )
    if found is None:
        raise AssertionError(
            "pgbouncer is not installed: apt-get install -y pgbouncer (.ci/run installs it)"
        )
    return found


def version() -> tuple[int, ...]:
    """PgBouncer's version, such as (1, 18, 0)."""
    shown = subprocess.run([binary(), "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"PgBouncer (\d+)\.(\d+)(?:\.(\d+))?", shown.stdout)
    assert match is not None, shown.stdout
    return tuple(int(part) for part in match.groups(default="0"))


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


class PgBouncer:
    """One pgbouncer process in transaction mode in front of the server of ``server_url``."""

    def __init__(self, server_url: str, *, pool_size: int | None = None, extra: str = "") -> None:
        """``pool_size``: server connections per database (default: pooling.ini's)."""
        server = make_url(libpq_url(server_url))
        self.user = server.username or "postgres"
        self.port = free_port()
        self.dir = Path(tempfile.mkdtemp(prefix="leaseq-pgbouncer-"))
        self.dir.chmod(0o755)  # readable by the unprivileged user it runs as
        host = server.query.get("host") or server.host or "127.0.0.1"
        target = f"host={host} port={server.port or 5432}"
        if server.password:
            target += f" password={server.password}"
        if pool_size is not None:
            target += f" pool_size={pool_size}"
        target += f" connect_query='SET statement_timeout = {STATEMENT_TIMEOUT_MS}'"
        users = self.dir / "userlist.txt"
        users.write_text(f'"{self.user}" ""\n')
        self.config = self.dir / "pgbouncer.ini"
        self.config.write_text(
            f"[databases]\n* = {target}\n\n"
            "[pgbouncer]\n"
            f"listen_addr = 127.0.0.1\nlisten_port = {self.port}\nunix_socket_dir =\n"
            f"auth_type = trust\nauth_file = {users}\nadmin_users = {self.user}\n"
            f"{extra}"
            f"%include {POOLING_INI}\n"
        )
        for path in (users, self.config):
            path.chmod(0o644)
        self.log_path = self.dir / "pgbouncer.log"
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        """A URL of ``database`` through the pooler."""
        return f"postgresql://{self.user}@127.0.0.1:{self.port}/{database}"

    def through(self, direct_url: str) -> str:
        """The same database as ``direct_url``, reached through the pooler."""
        return self.url(make_url(direct_url).database or "postgres")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def start(self) -> PgBouncer:
        argv = [binary()]
        if os.geteuid() == 0:
            argv += ["-u", UNPRIVILEGED_USER]
        with self.log_path.open("wb") as log:
            self.process = subprocess.Popen(
                [*argv, str(self.config)], stdout=log, stderr=subprocess.STDOUT
            )
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                raise AssertionError(f"pgbouncer exited {self.process.returncode}:\n{self.log()}")
            try:
                psycopg.connect(self.url("pgbouncer"), connect_timeout=2).close()
                return self
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise AssertionError(f"pgbouncer did not start:\n{self.log()}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        shutil.rmtree(self.dir, ignore_errors=True)

    def show(self, what: str) -> list[dict[str, object]]:
        """``SHOW <what>`` on PgBouncer's admin console (STATS, POOLS, SERVERS, CONFIG…)."""
        with psycopg.connect(self.url("pgbouncer"), autocommit=True) as conn:
            cursor = conn.execute(f"SHOW {what}")
            names = [column.name for column in cursor.description or []]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def transactions(self, database: str) -> int:
        """Transactions PgBouncer has passed to ``database`` so far."""
        rows = [row for row in self.show("STATS") if row["database"] == database]
        return sum(int(str(row["total_xact_count"])) for row in rows)
