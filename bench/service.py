"""``leaseq serve`` (and the raw REST contender, bench/raw_rest.py) as a subprocess for
the benchmarks, started and stopped by pid, and the raw HTTP client that drives them.

Shared by ``python -m bench`` (bench/contenders.py, bench/profile.py) and the
earlier script bench/rest.py. It imports nothing from the bench package, so a
script run from this folder can import it as ``service``.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import psutil

READY_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_pids(pid: int) -> list[int]:
    """The processes whose parent is ``pid``, and theirs (from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def process_cpu_s(pid: int) -> float:
    """CPU seconds (user and system) process ``pid`` has used; 0 once it is gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.NoSuchProcess:
        return 0.0
    return float(times.user + times.system)


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def checkout_env(source: Path | None) -> dict[str, str]:
    """This process's environment without its ``LEASEQ_`` settings; for another checkout
    (``source``), its client package first (`-m` and `-c` put the working folder, the
    checkout, and so its ``app``, first)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEQ_")}
    if source is not None:
        env["PYTHONPATH"] = str(source / "clients" / "python")
    return env


def in_checkout(source: Path, *args: str, env: dict[str, str] | None = None) -> str:
    """``python args`` run from the checkout ``source``, with its packages; its output."""
    done = subprocess.run(
        [sys.executable, *args],
        cwd=source,
        env={**checkout_env(source), **(env or {})},
        capture_output=True,
        text=True,
    )
    if done.returncode:
        raise RuntimeError(f"{' '.join(args)} in {source}: {done.stderr.strip()[-2000:]}")
    return done.stdout


def checkout_head(source: Path) -> str:
    """The newest schema revision of the checkout ``source``, read from its own migrations."""
    ini = str(source / "alembic.ini")
    return in_checkout(source, "-m", "alembic", "-c", ini, "heads").split()[0]


def migrate_checkout(source: Path, url: str) -> None:
    """Take the database ``url`` to the newest schema of the checkout ``source`` with that
    checkout's own alembic.ini and migrations/ (its env.py reads ``LEASEQ_DATABASE_URL``),
    never this checkout's: its service then runs on the schema it was written for."""
    ini = str(source / "alembic.ini")
    in_checkout(
        source, "-m", "alembic", "-c", ini, "upgrade", "head", env={"LEASEQ_DATABASE_URL": url}
    )


OPENAPI = (
    "import json, sys\n"
    "from app.api.app import create_app\n"
    "from app.config import Settings\n"
    "json.dump(create_app(Settings(database_url=sys.argv[1])).openapi(), sys.stdout)"
)


def checkout_openapi(source: Path, url: str) -> dict[str, Any]:
    """The OpenAPI document of the checkout ``source``'s service, built in a process of its
    own (no database is touched)."""
    document: dict[str, Any] = json.loads(in_checkout(source, "-c", OPENAPI, url))
    return document


class Service:
    """``leaseq serve`` on 127.0.0.1 with ``workers`` uvicorn processes.

    ``extra_args`` go to ``serve`` as given (``--no-ledger``, say). ``source``: a
    checkout of another version of leaseq to serve instead of this one (its
    ``app`` and its ``clients/python/leaseq``, found first). Stopped by the pid
    it started, then its uvicorn worker processes by theirs.
    """

    what = "leaseq serve"

    def __init__(
        self,
        url: str,
        workers: int,
        extra_args: Sequence[str] = (),
        source: Path | None = None,
    ) -> None:
        self.port = free_port()
        self.base_url = f"http://127.0.0.1:{self.port}"
        env = checkout_env(source)
        command = self.command(url, workers, extra_args)
        self.process = subprocess.Popen(command, env=env, cwd=source)
        self.children: list[int] = []

    def command(self, url: str, workers: int, extra_args: Sequence[str]) -> list[str]:
        """The command line that serves ``url`` on ``self.port``."""
        command = [sys.executable, "-m", "leaseq.cli", "serve", "--host", "127.0.0.1"]
        command += ["--port", str(self.port), "--workers", str(workers)]
        return [*command, "--database-url", url, "--log-level", "warning", *extra_args]

    async def pids(self) -> list[int]:
        """The service's processes: the one started, and its uvicorn workers."""
        return [self.process.pid, *child_pids(self.process.pid)]

    def cpu_s(self) -> float:
        """CPU seconds (user and system) the service's processes have used so far."""
        return sum(process_cpu_s(pid) for pid in [self.process.pid, *self.children])

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"{self.what} exited with {self.process.returncode}")
            try:
                if httpx.get(f"{self.base_url}/readyz", timeout=2).status_code == 200:
                    # Its uvicorn worker processes, remembered to be stopped by pid.
                    self.children = child_pids(self.process.pid)
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise RuntimeError(f"{self.what} did not become ready")

    def stop(self) -> None:
        """SIGTERM to the pid started; then SIGKILL to it and its children if still there."""
        self.children = sorted({*self.children, *child_pids(self.process.pid)})
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while any(running(pid) for pid in self.children) and time.monotonic() < deadline:
            time.sleep(0.05)
        for pid in self.children:
            if running(pid):
                os.kill(pid, signal.SIGKILL)


class RawRestService(Service):
    """The raw REST contender (bench/raw_rest.py: a bare ASGI callable on uvicorn, one
    process) on 127.0.0.1 and a free port, serving ``url`` (a libpq URL of leaseq's
    schema) with a pool of ``pool_size``; started and stopped by pid as ``Service``."""

    what = "raw REST (bench/raw_rest.py)"

    def __init__(self, url: str, pool_size: int = 10) -> None:
        self.pool_size = pool_size
        super().__init__(url, 1)

    def command(self, url: str, workers: int, extra_args: Sequence[str]) -> list[str]:
        script = Path(__file__).resolve().with_name("raw_rest.py")
        command = [sys.executable, str(script), "--database-url", url]
        return [*command, "--port", str(self.port), "--pool-size", str(self.pool_size)]


class RawPoster:
    """POSTs JSON over one keep-alive HTTP/1.1 connection of its own, with next to no
    client-side work, so that on a small machine the figures are the service's."""

    def __init__(self, host: str, port: int) -> None:
        self.host, self.port = host, port
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None

    async def connect(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)

    async def post(self, path: str, body: Any, key: str | None = None) -> Any:
        """The answer to ``body`` POSTed to ``path``; ``key``: its ``Idempotency-Key``."""
        if self.reader is None or self.writer is None:
            await self.connect()
        assert self.reader is not None and self.writer is not None
        data = json.dumps(body).encode()
        keyed = "" if key is None else f"Idempotency-Key: {key}\r\n"
        self.writer.write(
            f"POST {path} HTTP/1.1\r\nHost: {self.host}:{self.port}\r\n{keyed}"
            f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n".encode()
            + data
        )
        status = int((await self.reader.readline()).split()[1])
        length, chunked = 0, False
        while (line := await self.reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            elif name.strip().lower() == b"transfer-encoding":
                chunked = b"chunked" in value.lower()
        if chunked:
            parts = []
            while size := int((await self.reader.readline()).split(b";")[0], 16):
                parts.append(await self.reader.readexactly(size + 2))
            await self.reader.readline()
            payload = b"".join(part[:-2] for part in parts)
        else:
            payload = await self.reader.readexactly(length)
        if not 200 <= status < 300:
            raise RuntimeError(f"POST {path}: {status} {payload[:200]!r}")
        return json.loads(payload)

    async def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            await self.writer.wait_closed()
