"""Chaos: nothing is lost and nothing is done twice through kills and restarts
(docs/contract.md#invariant-5).

2,000 leads; 8 worker processes (``tests.chaos.chaos_worker``) over REST,
leasing in batches with 2.5 s leases, renewing and completing; two API
processes share one PostgreSQL cluster this test owns. While they work:

* a random worker is killed with SIGKILL every ~2 s and a replacement started;
* one API process is killed with SIGKILL and restarted on its port;
* the PostgreSQL cluster is stopped and started again.

At the end every lead is terminal and was completed exactly once (the
ledger), no completion was accepted twice (the workers' logs), the audit
report is clean and no lead is left leased. Every process is stopped by its
pid. The figures of the run are printed (``-s``) for docs/reliability.md.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.store import embedded
from app.store.pool import libpq_url
from tests.support.serving import ROOT, Service, Services, child_env, free_port, stop_postgres

pytestmark = [pytest.mark.service, pytest.mark.slow, pytest.mark.timeout(360)]

LEADS = 2000
WORKERS = 8
SESSION = "chaos"
KILL_EVERY_S = 2.0
API_KILL_AT_S = 6.0
POSTGRES_RESTART_AT_S = 14.0
DEADLINE_S = 240.0
TICK_S = 0.25


@pytest.fixture
def cluster() -> Iterator[tuple[Path, str]]:
    """A PostgreSQL cluster this test may stop and start, outside pytest's tmp folder."""
    parent = Path(tempfile.mkdtemp(prefix="leaseq-chaos-pg-"))
    data_dir = parent / "data"
    try:
        yield data_dir, embedded.start(data_dir)
    finally:
        embedded.stop(data_dir)
        stop_postgres(data_dir)
        shutil.rmtree(parent, ignore_errors=True)


class Workers:
    """The chaos worker processes, each in its own process group; stopped by pid."""

    def __init__(self, folder: Path, urls: list[str]) -> None:
        self.folder = folder
        self.urls = urls
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started = 0
        self.killed = 0

    def start(self) -> subprocess.Popen[bytes]:
        n = self.started
        self.started += 1
        owner = f"w{n}"
        with (self.folder / f"{owner}.out").open("wb") as out:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "tests.chaos.chaos_worker",
                    self.urls[n % len(self.urls)],
                    SESSION,
                    str(self.folder / "completions.log"),
                    owner,
                ],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=child_env(),
                cwd=ROOT,
                start_new_session=True,
            )
        self.procs.append(proc)
        return proc

    def running(self) -> list[subprocess.Popen[bytes]]:
        return [proc for proc in self.procs if proc.poll() is None]

    def kill_one(self, rng: random.Random) -> None:
        alive = self.running()
        if alive:
            victim = rng.choice(alive)
            os.killpg(victim.pid, signal.SIGKILL)
            victim.wait(10)
            self.killed += 1

    def top_up(self) -> None:
        for _ in range(WORKERS - len(self.running())):
            self.start()

    def close(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        for proc in self.procs:
            proc.wait(10)


def pending(url: str) -> int | None:
    """Leads not yet terminal, read from the database; None while it is down."""
    try:
        with psycopg.connect(libpq_url(url), connect_timeout=2) as conn:
            row = conn.execute(
                "SELECT count(*) FROM leads WHERE status IN ('queued', 'leased')"
            ).fetchone()
    except psycopg.Error:
        return None
    assert row is not None
    return int(row[0])


def query(url: str, sql: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(libpq_url(url)) as conn:
        return conn.execute(sql).fetchall()  # type: ignore[arg-type]


def test_nothing_is_lost_or_done_twice_through_kills_and_restarts(
    cluster: tuple[Path, str], tmp_path: Path
) -> None:
    data_dir, url = cluster
    rng = random.Random(20261129)
    services = Services(tmp_path)
    api_args = ("--sweep-interval", "0.5", "--log-level", "warning")
    ports = [free_port(), free_port()]
    apis: list[Service] = [
        services.start(*api_args, "--migrate", database_url=url, port=ports[0]),
        services.start(*api_args, database_url=url, port=ports[1]),
    ]
    workers = Workers(tmp_path, [api.url for api in apis])
    figures: dict[str, Any] = {"leads": LEADS, "workers": WORKERS}
    try:
        with httpx.Client(base_url=apis[1].url, timeout=30) as http:
            for start in range(0, LEADS, 1000):
                leads = [
                    {"payload": {"i": i}, "max_attempts": 50} for i in range(start, start + 1000)
                ]
                answer = http.post(f"/sessions/{SESSION}/leads", json={"leads": leads})
                assert answer.status_code == 201, answer.text

        began = time.monotonic()
        workers.top_up()
        next_kill = began + KILL_EVERY_S
        api_killed = postgres_restarted = False
        api_restarts = postgres_restarts = 0
        left: int | None = LEADS
        while time.monotonic() - began < DEADLINE_S:
            now = time.monotonic()
            if now >= next_kill:
                workers.kill_one(rng)
                workers.top_up()
                next_kill = now + KILL_EVERY_S
            if not api_killed and now - began >= API_KILL_AT_S:
                apis[0].kill()  # SIGKILL to its process group
                apis[0] = services.start(*api_args, database_url=url, port=ports[0])
                api_killed, api_restarts = True, api_restarts + 1
            if not postgres_restarted and now - began >= POSTGRES_RESTART_AT_S:
                embedded.stop(data_dir)
                time.sleep(1.0)  # workers and APIs meet the outage
                assert embedded.start(data_dir) == url
                postgres_restarted, postgres_restarts = True, postgres_restarts + 1
            left = pending(url)
            if left == 0 and api_killed and postgres_restarted:
                break
            time.sleep(TICK_S)
        figures["seconds"] = round(time.monotonic() - began, 1)
        assert left == 0, f"{left} leads not terminal after {DEADLINE_S:g} s"
    finally:
        workers.close()

    try:
        # Every lead terminal, done, and completed exactly once by the ledger.
        statuses = dict(query(url, "SELECT status, count(*) FROM leads GROUP BY status"))
        assert statuses == {"done": LEADS}, statuses
        per_lead = query(
            url,
            "SELECT l.id, count(e.id) FROM leads l LEFT JOIN lead_events e "
            "ON e.lead_id = l.id AND e.event = 'completed' GROUP BY l.id",
        )
        assert len(per_lead) == LEADS
        assert Counter(n for _, n in per_lead) == {1: LEADS}
        [(leased,)] = query(url, "SELECT count(*) FROM leads WHERE lease_expires_at IS NOT NULL")
        assert leased == 0

        # No completion accepted twice, and each accepted one is the ledger's.
        log = (tmp_path / "completions.log").read_text().splitlines()
        accepted = Counter(int(line.split()[0]) for line in log)
        assert accepted, "no worker logged a completion"
        assert max(accepted.values()) == 1, accepted.most_common(3)
        done_by = dict(
            query(url, "SELECT lead_id, owner FROM lead_events WHERE event = 'completed'")
        )
        for line in log:
            lead_id, _, owner, _ = line.split()
            assert done_by[int(lead_id)] == owner, line

        # The audit report of the ledger is clean.
        with httpx.Client(base_url=apis[1].url, timeout=30) as http:
            report = http.get(f"/sessions/{SESSION}/report").json()
        assert report["double_completions"] == 0, report
        assert report["overlapping_leases"] == 0, report
        assert report["completed"] == LEADS, report

        [(expired,)] = query(url, "SELECT count(*) FROM lead_events WHERE event = 'expired'")
        [(leases,)] = query(url, "SELECT count(*) FROM lead_events WHERE event = 'leased'")
        figures.update(
            worker_kills=workers.killed,
            workers_started=workers.started,
            api_restarts=api_restarts,
            postgres_restarts=postgres_restarts,
            leases=leases,
            expired_leases=expired,
            completions_logged=len(log),
            lost=LEADS - statuses.get("done", 0),
            double=report["double_completions"],
        )
        print("chaos figures:", json.dumps(figures))
    finally:
        services.close()
