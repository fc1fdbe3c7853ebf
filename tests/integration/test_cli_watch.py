"""``leaseq stats --watch``: the dashboard's numbers, redrawn until Ctrl-C."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from tests.support.serving import ROOT, Service, Services, child_env

pytestmark = pytest.mark.service

DEADLINE_S = 20.0
ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # the terminal's styles and cursor moves


class Output:
    """What a process writes to stdout, read in a background thread."""

    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.text = ""
        self._lock = threading.Lock()
        assert process.stdout is not None
        self._stdout = process.stdout
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        while chunk := os.read(self._stdout.fileno(), 65536):
            with self._lock:
                self.text += chunk.decode(errors="replace")

    def wait_for(self, pattern: str) -> None:
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            with self._lock:
                if re.search(pattern, ANSI.sub("", self.text)):
                    return
            time.sleep(0.05)
        raise AssertionError(f"no {pattern!r} in:\n{self.text}")


def test_watch_redraws_until_ctrl_c(services: Services, database_url: str) -> None:
    service: Service = services.start("--sweep-interval", "3600", database_url=database_url)
    with service.client() as http:
        http.post("/sessions/crawl/leads", json={"leads": [{"payload": {}}] * 3})
        env = child_env(
            {
                **{"LEASEQ_URL": service.url, "TTY_COMPATIBLE": "1", "NO_COLOR": "1"},
                # A watch that outlives its Ctrl-C is sent SIGABRT: its threads' stacks say where.
                **{"COLUMNS": "160", "PYTHONFAULTHANDLER": "1"},
            }
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "leaseq.cli", "stats", "--watch", "0.3"],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
        )
        try:
            output = Output(process)
            # session, queued 3, leased 0, done 0, failed 0, cached 0, pending 3
            output.wait_for(r"crawl\s+3\s+0\s+0\s+0\s+0\s+3\s")
            [lease] = http.post("/lease", json={"session": "crawl", "owner": "w"}).json()["leases"]
            http.post("/complete", json={"lead_id": lease["lead"]["id"], "token": lease["token"]})
            # Redrawn: one done, one a minute in the last minute.
            output.wait_for(r"crawl\s+2\s+0\s+1\s+0\s+0\s+2\s+\d+ s\s+1\s+0")
            output.wait_for(r"total\s+2\s+0\s+1")
            process.send_signal(signal.SIGINT)
            try:
                code = process.wait(DEADLINE_S)
            except subprocess.TimeoutExpired:
                process.send_signal(signal.SIGABRT)
                process.wait(DEADLINE_S)
                raise AssertionError(f"Ctrl-C did not end the watch:\n{output.text}") from None
            assert code == 0, output.text
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            assert process.stdout is not None
            process.stdout.close()


def test_watch_refuses_json() -> None:
    shown = subprocess.run(
        [sys.executable, "-m", "leaseq.cli", "stats", "--watch", "1", "--json"],
        capture_output=True,
        text=True,
        env=child_env(),
        cwd=ROOT,
        timeout=DEADLINE_S,
        check=False,
    )
    assert shown.returncode == 2
    assert "--watch and --json" in shown.stderr
