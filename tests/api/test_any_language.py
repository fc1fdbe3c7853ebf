"""The bash worker of docs/any-language.md, run as the page writes it, against a real
``leaseq serve``: it drains a session, renews a lease while its handler runs, stops the
handler on ``lease_lost``, and on SIGTERM gives back what it holds and exits.

The script is taken from the page itself (its one ``bash`` block), so what a newcomer
pastes is what runs here. Each wait polls the service with a deadline as its only failure.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.serving import ROOT, Service, Services, child_env, until
from tests.support.system import CURL, JQ, need

pytestmark = [pytest.mark.service, pytest.mark.tools]

PAGE = ROOT / "docs" / "any-language.md"
SCRIPT = re.compile(r"^```bash\n(.*?)^```$", re.DOTALL | re.MULTILINE)
DEADLINE_S = 120.0
TTL_S = 30  # the script's least: a renewal is due 10 s after a lease's send


def script() -> str:
    [found] = SCRIPT.findall(PAGE.read_text())
    assert found.startswith("#!/usr/bin/env bash\n")
    return str(found)


@pytest.fixture
def service(services: Services, database_url: str) -> Service:
    return services.start("--sweep-interval", "3600", database_url=database_url)


class Worker:
    """The script, running as ``bash worker.sh`` with the page's variables."""

    def __init__(self, folder: Path, service: Service, session: str, **env: str) -> None:
        need(CURL)
        need(JQ)
        path = folder / "worker.sh"
        path.write_text(script())
        self.stderr = folder / "worker.err"
        variables = {"LEASEQ_URL": service.url, "SESSION": session, "TTL": str(TTL_S)}
        with self.stderr.open("wb") as err:
            self.process = subprocess.Popen(
                ["bash", str(path)],
                env=child_env({**variables, "WAIT": "2", **env}),
                stdout=subprocess.DEVNULL,
                stderr=err,
                start_new_session=True,  # its group, so the test's end reaches its handlers
            )

    def said(self) -> str:
        return self.stderr.read_text(errors="replace")

    def stop(self) -> int:
        """SIGTERM, then its exit status (within the deadline)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(DEADLINE_S)

    def left(self) -> dict[int, list[str]]:
        """The live processes of the worker's session, with their command lines: it leads a
        session of its own, and its handlers, each in a process group of its own, stay in it
        (a stat's fields after the command: state, ppid, group, session)."""
        found = {}
        for proc in Path("/proc").glob("[0-9]*"):
            try:
                fields = (proc / "stat").read_text().rpartition(")")[2].split()
                argv = (proc / "cmdline").read_bytes().decode(errors="replace").split("\0")
            except OSError:
                continue  # ended while read
            if int(fields[3]) == self.process.pid and fields[0] != "Z":  # session, not dead
                found[int(proc.name)] = argv[:-1]
        return found

    def end(self) -> None:
        """Kill what is left of the worker and its handlers, by their ids."""
        for pid in self.left():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        if self.process.poll() is None:
            self.process.wait(DEADLINE_S)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.end()


def push(http: httpx.Client, session: str, payloads: list[dict[str, Any]]) -> list[int]:
    answer = http.post(
        f"/sessions/{session}/leads", json={"leads": [{"payload": p} for p in payloads]}
    )
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


def test_the_bash_worker_drains_a_session_then_stops_on_sigterm(
    service: Service, workers: list[Worker], tmp_path: Path
) -> None:
    with service.client() as http:
        payloads = [{"n": n} for n in range(20)]
        ids = push(http, "bash", payloads)
        worker = Worker(tmp_path, service, "bash")
        workers.append(worker)
        until(
            lambda: http.get("/sessions/bash/stats").json()["done"] == 20,
            DEADLINE_S,
            "the session drained",
        )
        for lead_id, payload in zip(ids, payloads, strict=True):
            lead = http.get(f"/leads/{lead_id}").json()
            assert (lead["result"], lead["attempts"]) == ({"echoed": payload}, 1)
        report = http.get("/sessions/bash/report").json()
        assert (report["completions"], report["double_completions"]) == (20, 0)
        assert report["overlapping_leases"] == 0
        assert worker.stop() == 0, worker.said()


def test_the_bash_worker_renews_while_its_handler_runs_and_gives_the_lead_back_on_sigterm(
    service: Service, workers: list[Worker], tmp_path: Path
) -> None:
    with service.client() as http:
        [lead_id] = push(http, "slow", [{"sleep": 60}])
        worker = Worker(tmp_path, service, "slow", GRACE="1")
        workers.append(worker)
        leased = until(
            lambda: (lead := http.get(f"/leads/{lead_id}").json())["status"] == "leased" and lead,
            DEADLINE_S,
            "the lead leased",
        )
        until(
            lambda: (
                http.get(f"/leads/{lead_id}").json()["lease_expires_at"]
                > leased["lease_expires_at"]
            ),
            DEADLINE_S,
            "a renewal, a third of the ttl after the lease",
        )
        assert worker.stop() == 0, worker.said()
        until(lambda: not worker.left(), DEADLINE_S, "nothing of the handler left")
        lead = http.get(f"/leads/{lead_id}").json()
        assert (lead["status"], lead["attempts"], lead["owner"]) == ("queued", 1, leased["owner"])
        assert "given back (the worker stopped): 200" in worker.said()


def test_the_bash_worker_stops_its_handler_when_its_lease_is_lost(
    service: Service, workers: list[Worker], tmp_path: Path
) -> None:
    with service.client() as http:
        [lead_id] = push(http, "lost", [{"sleep": 60}])
        worker = Worker(tmp_path, service, "lost")
        workers.append(worker)
        until(
            lambda: http.get(f"/leads/{lead_id}").json()["status"] == "leased",
            DEADLINE_S,
            "the lead leased",
        )
        handler = ["sleep", "60"]  # what the page's handle() runs for this payload
        until(lambda: handler in worker.left().values(), DEADLINE_S, "the handler running")
        assert http.post(f"/leads/{lead_id}/cancel").status_code == 200
        until(
            lambda: f"lead {lead_id}: lease lost, handler stopped" in worker.said(),
            DEADLINE_S,
            "the renewal answered lease_lost",
        )
        assert handler not in worker.left().values()  # stopped, and the worker goes on
        assert worker.stop() == 0, worker.said()
        lead = http.get(f"/leads/{lead_id}").json()
        assert (lead["status"], lead["error"]) == ("failed", "cancelled")
