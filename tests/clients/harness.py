"""The conformance set's machinery: each language's worker program, built once and run as
processes; the events they write; a proxy in front of the service on a thread of its own.

A worker program (docs/clients/conformance.md) takes the same arguments in every language
and writes the same JSON lines: ``ready``, then per lead ``start`` and ``finished`` or
``aborted``, and ``stopped`` after a SIGTERM. ``Program`` finds or builds one (a missing
toolchain skips the test with one line saying how to get it); ``WorkerProcess`` runs one
and reads what it wrote.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.support import system
from tests.support.golang import CLIENT as GO
from tests.support.golang import GO_TOOL, go_env
from tests.support.lossy_proxy import Drop, Intercept, LossyProxy, never
from tests.support.npm_tools import NODE, NPM
from tests.support.serving import ROOT, child_env, until

LANGUAGES = ("python", "typescript", "go")
TYPESCRIPT = ROOT / "clients" / "typescript"
BUILD_TIMEOUT_S = 600.0
EXIT_TIMEOUT_S = 30.0


def run(argv: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    """Run a program to its end, its output captured as text, with ``env`` added."""
    return subprocess.run(
        argv,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        check=False,
        env=child_env(env),
    )


def run_build(argv: list[str], cwd: Path, **env: str) -> None:
    """Run one build step (with ``env`` added); fail with its output's tail when it fails."""
    done = run(argv, cwd, **env)
    assert done.returncode == 0, (
        f"{' '.join(argv)} failed:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    )


def build_typescript() -> list[str]:
    """``npm ci && npm run build`` in clients/typescript; the program's argv."""
    npm = system.need(NPM)
    node = system.need(NODE)
    run_build([npm, "ci", "--no-audit", "--no-fund", "--prefer-offline"], TYPESCRIPT)
    run_build([npm, "run", "build"], TYPESCRIPT)
    return [node, str(TYPESCRIPT / "dist" / "conformance" / "worker.js")]


def build_go(folder: Path) -> list[str]:
    """``go build`` of clients/go's conformance worker into ``folder``; the program's argv."""
    if not GO.is_dir():
        system.unavailable("clients/go is not in this checkout: the Go client is not built yet")
    go = system.need(GO_TOOL)
    binary = folder / "leaseq-conformance"
    env = go_env(folder / "go")  # the caches test_go.py's commands share
    run_build([go, "build", "-o", str(binary), "./cmd/leaseq-conformance"], GO, **env)
    return [str(binary)]


def program(language: str, folder: Path) -> list[str]:
    """The argv that runs ``language``'s conformance worker (built into ``folder`` if need be)."""
    if language == "python":
        return [sys.executable, "-m", "tests.clients.workers.python_worker"]
    if language == "typescript":
        return build_typescript()
    if language == "go":
        return build_go(folder)
    raise ValueError(language)


_built: dict[str, list[str] | BaseException] = {}


def built(language: str, folder: Path) -> list[str]:
    """``program``, built once per run: later calls get the same argv, or the same skip."""
    if language not in _built:
        try:
            _built[language] = program(language, folder)
        except (pytest.skip.Exception, pytest.fail.Exception, AssertionError) as exc:
            _built[language] = exc
    found = _built[language]
    if isinstance(found, BaseException):
        raise found
    return found


@dataclass
class WorkerProcess:
    """One conformance worker program running, and the events it wrote."""

    process: subprocess.Popen[bytes]
    events_path: Path
    log_path: Path
    owner: str

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        """Its events so far (of one kind); a line still being written is left for later."""
        try:
            text = self.events_path.read_text()
        except FileNotFoundError:
            return []
        found = []
        for line in text.splitlines():
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if kind is None or event.get("event") == kind:
                found.append(event)
        return found

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def running(self) -> bool:
        return self.process.poll() is None

    def wait_ready(self, timeout_s: float = 60.0) -> None:
        def ready() -> bool:
            assert self.running(), f"{self.owner} exited {self.process.returncode}:\n{self.log()}"
            return bool(self.events("ready"))

        until(ready, timeout_s, f"{self.owner} to be ready")

    def terminate(self) -> None:
        if self.running():
            self.process.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        if self.running():
            self.process.kill()
        self.process.wait(EXIT_TIMEOUT_S)

    def wait(self, timeout_s: float = EXIT_TIMEOUT_S) -> int:
        return self.process.wait(timeout_s)


class Fleet:
    """The worker programs of one test; ``close`` ends those still running, by their pids."""

    def __init__(self, argv: list[str], folder: Path) -> None:
        self.argv = argv
        self.folder = folder
        self.started: list[WorkerProcess] = []

    def start(
        self,
        url: str,
        session: str,
        *,
        concurrency: int = 4,
        ttl_s: float = 30,
        handler_ms: float = 5,
        grace_s: float = 5,
        token: str | None = None,
    ) -> WorkerProcess:
        owner = f"w{len(self.started)}"
        events = self.folder / f"{owner}.events.jsonl"
        log = self.folder / f"{owner}.log"
        args = ["--url", url, "--session", session, "--owner", owner]
        args += ["--concurrency", str(concurrency), "--ttl-s", f"{ttl_s:g}"]
        args += ["--handler-ms", f"{handler_ms:g}", "--events", str(events)]
        args += ["--grace-s", f"{grace_s:g}"]
        if token is not None:
            args += ["--token", token]
        with log.open("wb") as out:
            process = subprocess.Popen(
                [*self.argv, *args], stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, env=child_env()
            )
        worker = WorkerProcess(process, events, log, owner)
        self.started.append(worker)
        worker.wait_ready()
        return worker

    def events(self, kind: str) -> list[dict[str, Any]]:
        return [event for w in self.started for event in w.events(kind)]

    def stop_all(self) -> list[int]:
        """SIGTERM every worker still running; their exit codes."""
        for worker in self.started:
            worker.terminate()
        return [w.wait() for w in self.started]

    def close(self) -> None:
        for worker in self.started:
            if worker.running():
                worker.kill()


class ProxyThread:
    """A ``LossyProxy`` served by an event loop on a thread of its own, so that the test's
    own code (and the worker processes) can go on while it relays."""

    def __init__(self, target_port: int, drop: Drop = never, intercept: Intercept | None = None):
        self.loop = asyncio.new_event_loop()
        self.proxy = LossyProxy(target_port, drop, intercept=intercept)
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxy", daemon=True)

    @property
    def url(self) -> str:
        return self.proxy.url

    def __enter__(self) -> ProxyThread:
        self.thread.start()
        self.run(self.proxy.__aenter__())
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.run(self.proxy.__aexit__(None, None, None))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()

    def run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(30)


@contextmanager
def proxied(
    target_port: int, drop: Drop = never, intercept: Intercept | None = None
) -> Iterator[ProxyThread]:
    with ProxyThread(target_port, drop, intercept) as proxy:
        yield proxy
