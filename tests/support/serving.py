"""``leaseq`` as real processes for the serve and CLI tests.

``Services.start`` runs ``leaseq serve`` on a free port in its own process
group and waits for ``/readyz``; ``Services.close`` stops every one it started
by its pid (SIGTERM, then SIGKILL to its group), never by name. ``leaseq``
runs a CLI verb to completion. Every wait has a deadline.
"""

from __future__ import annotations

import concurrent.futures
import os
import resource
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx

from tests.support import processes, scrapes

ROOT = Path(__file__).resolve().parents[2]
READY_TIMEOUT_S = 60.0  # the embedded PostgreSQL's first start runs initdb
STOP_TIMEOUT_S = 20.0
CLI_TIMEOUT_S = 60.0


def until(condition: Any, timeout_s: float, what: str) -> Any:
    """Poll ``condition()`` until it is truthy; fail after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if value := condition():
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out after {timeout_s:g} s waiting for {what}")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def child_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment without any LEASEQ_* variable, plus ``extra``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("LEASEQ_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra or {})
    return env


def leaseq(
    *args: str,
    input: str | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float = CLI_TIMEOUT_S,
) -> subprocess.CompletedProcess[str]:
    """Run ``leaseq ARGS`` to completion; its output captured as text."""
    processes.starting("a leaseq process")
    return subprocess.run(
        [sys.executable, "-m", "leaseq.cli", *args],
        input=input,
        capture_output=True,
        text=True,
        env=child_env(env),
        cwd=ROOT,
        timeout=timeout_s,
        check=False,
    )


def api_suite(env: Mapping[str, str], deselect: Iterable[str], timeout_s: float) -> None:
    """``tests/api`` once more, in a pytest of its own with ``env``, but for ``deselect``:
    fails with the tail of its output unless every test it ran passed."""
    left_out = [arg for test in deselect for arg in ("--deselect", test)]
    run = subprocess.run(
        [sys.executable, "-m", "pytest", "tests/api", "-q", "-p", "no:cacheprovider", *left_out],
        cwd=ROOT,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-3000:]
    assert " passed" in run.stdout and " failed" not in run.stdout


def postgres_running(data_dir: Path) -> bool:
    """True while a PostgreSQL runs on ``data_dir``, judged by its postmaster.pid."""
    pid = postmaster_pid(data_dir)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def postmaster_pid(data_dir: Path) -> int | None:
    try:
        return int((data_dir / "postmaster.pid").read_text().splitlines()[0])
    except (OSError, ValueError, IndexError):
        return None


def stop_postgres(data_dir: Path) -> None:
    """Fast-shut-down a PostgreSQL left running on ``data_dir`` (cleanup after a failure)."""
    pid = postmaster_pid(data_dir)
    if pid is None or not postgres_running(data_dir):
        return
    os.kill(pid, signal.SIGINT)  # PostgreSQL's "fast" shutdown
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while postgres_running(data_dir) and time.monotonic() < deadline:
        time.sleep(0.05)


@contextmanager
def open_files(wanted: int) -> Iterator[None]:
    """This process's open-file limit raised to ``wanted`` (a ``leaseq serve`` started
    meanwhile inherits it), restored after; fails when the hard limit is lower."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < wanted:
        if hard != resource.RLIM_INFINITY and hard < wanted:
            raise AssertionError(f"the open-file limit ({hard}) is below the {wanted} needed")
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


Check = Callable[[httpx.Response], None]


class Service:
    """One ``leaseq serve`` process; ``check``, when given, sees each answer of its clients."""

    def __init__(
        self,
        process: subprocess.Popen[bytes],
        port: int,
        log_path: Path,
        check: Check | None = None,
    ) -> None:
        self.process = process
        self.port = port
        self.log_path = log_path
        self.check = check

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def client(self, **kwargs: Any) -> httpx.Client:
        client = httpx.Client(base_url=self.url, timeout=kwargs.pop("timeout", 10.0), **kwargs)
        check = self.check
        if check is not None:

            def checked(response: httpx.Response) -> None:
                response.read()
                check(response)

            client.event_hooks["response"].append(checked)
        return client

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def open_file_limit(self) -> int:
        """The served process's own (soft) open-file limit."""
        soft, _ = resource.prlimit(self.pid, resource.RLIMIT_NOFILE)
        return soft

    def running(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout_s: float = READY_TIMEOUT_S) -> None:
        """Until /readyz answers 200; fails with the log if the process exits or time runs out."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not self.running():
                raise AssertionError(
                    f"leaseq serve exited {self.process.returncode}:\n{self.log()}"
                )
            try:
                if httpx.get(f"{self.url}/readyz", timeout=1.0).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise AssertionError(f"leaseq serve not ready in {timeout_s:g} s:\n{self.log()}")

    def terminate(self) -> None:
        """SIGTERM, as a process manager stops a service."""
        if self.running():
            os.kill(self.pid, signal.SIGTERM)

    def kill(self) -> None:
        """SIGKILL to the process and its workers: a crash."""
        if self.running():
            os.killpg(self.pid, signal.SIGKILL)  # its own group: started with a new session
        self.process.wait(STOP_TIMEOUT_S)

    def wait(self, timeout_s: float = STOP_TIMEOUT_S) -> int:
        return self.process.wait(timeout_s)


def waiting_lease(
    pool: concurrent.futures.Executor, service: Service, session: str, wait_s: float
) -> concurrent.futures.Future[httpx.Response]:
    """A ``POST /lease`` sent from ``pool`` and waiting up to ``wait_s`` for work in ``session``."""
    body = {"session": session, "owner": "w", "wait_s": wait_s}
    return pool.submit(httpx.post, f"{service.url}/lease", json=body, timeout=wait_s + 30)


def long_polls_waiting(service: Service, n: int, timeout_s: float = 15.0) -> None:
    """Until ``n`` lease requests wait for work in ``service`` (its ``/metrics``): a
    ``waiting_lease`` sent from another thread has reached the service."""
    deadline = time.monotonic() + timeout_s
    while True:
        text = httpx.get(f"{service.url}/metrics", timeout=10).text
        if scrapes.value(scrapes.samples(text), "leaseq_long_poll_waiters") >= n:
            return
        assert time.monotonic() < deadline, f"{n} long polls never waited in {service.url}"
        time.sleep(0.05)


class Services:
    """The ``leaseq serve`` processes of one test; ``close`` stops those still running.
    ``check`` is each service's (tests/api/conftest.py: the OpenAPI document's)."""

    def __init__(self, tmp_path: Path, check: Check | None = None) -> None:
        self.tmp_path = tmp_path
        self.started: list[Service] = []
        self.check = check

    def start(
        self,
        *args: str,
        database_url: str | None,
        env: Mapping[str, str] | None = None,
        port: int | None = None,
        ready: bool = True,
    ) -> Service:
        """``leaseq serve ARGS`` on 127.0.0.1 (embedded PostgreSQL when no URL), ready to serve."""
        processes.starting("leaseq serve")
        port = port or free_port()
        argv = [
            sys.executable,
            "-m",
            "leaseq.cli",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ]
        if database_url is not None:
            argv += ["--database-url", database_url]
        log_path = self.tmp_path / f"serve-{len(self.started)}.log"
        extra = {"LEASEQ_LOG_LEVEL": "warning", **(env or {})}
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [*argv, *args],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=child_env(extra),
                cwd=ROOT,
                start_new_session=True,  # its own group, so a kill reaches its workers too
            )
        service = Service(process, port, log_path, self.check)
        self.started.append(service)
        if ready:
            service.wait_ready()
        return service

    def close(self) -> None:
        for service in self.started:
            if not service.running():
                continue
            service.terminate()
            try:
                service.wait()
            except subprocess.TimeoutExpired:
                service.kill()
        for service in self.started:
            if service.process.poll() is None:  # pragma: no cover - reaped above
                service.kill()
