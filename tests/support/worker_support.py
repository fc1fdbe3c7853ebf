"""Helpers of the client and worker tests (the service itself runs through
``tests.support.serving``).

A recording HTTP transport that can also cut a worker off from chosen paths,
a fresh database for a module, readers of the ledger, process checks, and
``leaseq worker`` as a subprocess.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

from app.store.pool import libpq_url
from leaseq._transport import AioHttpTransport
from tests.support import processes
from tests.support.databases import copy_database, drop_database
from tests.support.serving import ROOT, child_env

HANDLER = [sys.executable, "tests/support/handle_lead.py"]


class RecordingTransport(httpx.AsyncBaseTransport):
    """Real HTTP through the client's own default transport, each request recorded with its
    status; a path in ``blocked`` cannot connect."""

    def __init__(self, blocked: set[str] | None = None) -> None:
        self.inner = AioHttpTransport()
        self.calls: list[tuple[str, int | None]] = []  # status None: no answer
        self.requests: list[httpx.Request] = []
        self.blocked = blocked if blocked is not None else set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append(request)
        if path in self.blocked:
            self.calls.append((path, None))
            raise httpx.ConnectError("blocked by the test", request=request)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError:
            self.calls.append((path, None))
            raise
        self.calls.append((path, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def count(self, path: str) -> int:
        return sum(1 for called, _ in self.calls if called == path)


@contextmanager
def fresh_database(server_url: str, template: str) -> Iterator[str]:
    """A database copied from the migrated ``template``, dropped afterwards."""
    name = f"leaseq_w_{uuid.uuid4().hex[:12]}"
    admin_url = libpq_url(server_url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        copy_database(admin, name, template)
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            drop_database(admin, name)


def completions(database_url: str, lead_id: int) -> list[str | None]:
    """The owners of the ledger's ``completed`` events of one lead, in order."""
    return [owner for event, owner, _ in ledger(database_url, lead_id) if event == "completed"]


def ledger(database_url: str, lead_id: int) -> list[tuple[str, str | None, int]]:
    """(event, owner, attempt) of each lead_events row of one lead, in order."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT event, owner, attempt FROM lead_events WHERE lead_id = %s ORDER BY id",
            (lead_id,),
        ).fetchall()
    return [(event, owner, attempt) for event, owner, attempt in rows]


def ledger_times(database_url: str, lead_id: int) -> list[tuple[str, datetime, datetime | None]]:
    """(event, at, expires_at) of each lead_events row of one lead, in order."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT event, at, expires_at FROM lead_events WHERE lead_id = %s ORDER BY id",
            (lead_id,),
        ).fetchall()
    return [(event, at, expires_at) for event, at, expires_at in rows]


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, killed but not yet reaped, does not).

    A process that ends between the open and the read of its ``stat`` raises
    ``ProcessLookupError`` rather than ``FileNotFoundError``: both mean it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def guards_of(worker_pid: int) -> list[int]:
    """The command guards (``leaseq.worker.guard``) a worker started that still run."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        ours = any(arg.endswith(b"guard.py") for arg in argv) and str(worker_pid).encode() in argv
        if ours and alive(int(entry.name)):
            found.append(int(entry.name))
    return found


def start_worker(
    url: str, session: str, args: list[str], log: Path, env: Mapping[str, str] | None = None
) -> subprocess.Popen[bytes]:
    """``leaseq worker`` as a subprocess (run from the repo root, logs to ``log``)."""
    processes.starting("leaseq worker")
    argv = [sys.executable, "-m", "leaseq.cli", "worker", "--url", url, "-s", session, *args]
    with log.open("ab") as out:
        return subprocess.Popen(
            argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=child_env(env)
        )


async def exited(process: subprocess.Popen[bytes], log: Path, timeout_s: float = 15.0) -> int:
    """Wait for the subprocess to exit; its return code."""
    try:
        return await asyncio.to_thread(process.wait, timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        raise AssertionError(f"worker still running:\n{tail(log)}") from None


def tail(log: Path) -> str:
    return log.read_text()[-3000:]


def pids(folder: Path) -> list[int]:
    """Every pid the ``hang`` handler recorded in ``folder``."""
    return [int(pid) for f in folder.glob("*.pids") for pid in f.read_text().split()]


def kill_leftovers(folder: Path) -> None:
    """SIGKILL processes the tests started that may still run (a kill -9'd worker's children)."""
    for pid in pids(folder):
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


async def eventually(check: Callable[[], Awaitable[bool]], timeout_s: float = 10.0) -> None:
    """Poll ``check`` until it holds; fail after ``timeout_s``."""
    async with asyncio.timeout(timeout_s):
        while not await check():  # noqa: ASYNC110 (the state is in another process)
            await asyncio.sleep(0.05)


async def holds(value: bool) -> bool:
    """``value`` as an awaitable, for ``eventually`` on state in this process."""
    return value
