"""docker-compose.yml run outside containers: each leaseq service's command through the image's
entrypoint (deploy/entrypoint.sh), with its compose environment, on this machine.

The compose hosts become the test's own: ``postgres`` the test database,
``pgbouncer`` a PgBouncer with the compose profile's pooling rules, ``api`` a
``leaseq serve`` started from the ``api`` service's command. What a container
would run, this runs: migrate, serve (and its healthcheck), the pooled API,
the demo's push and workers.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx
import pytest
from sqlalchemy.engine import make_url

from app.store import migrate
from tests.deploy.compose import ROOT, ImageRun, local, run_of
from tests.deploy.pgbouncer import PgBouncer
from tests.support.serving import Service, Services, child_env, free_port

pytestmark = pytest.mark.service

HEALTHCHECK = ROOT / "deploy" / "healthcheck.py"
DEMO_LEADS = len((ROOT / "deploy" / "demo" / "leads.jsonl").read_text().splitlines())
CONTAINER_PORT = "8000"


def environment(run: ImageRun, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The run's compose environment on this machine: 127.0.0.1 instead of the container's
    0.0.0.0, a free port, and this virtualenv's ``leaseq``, ``alembic`` and ``python`` first."""
    env = child_env({**run.environment, "LEASEQ_HOST": "127.0.0.1", **(extra or {})})
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["LEASEQ_LOG_LEVEL"] = "warning"
    return env


def hosts(database_url: str, **more: Callable[[str], str]) -> dict[str, Callable[[str], str]]:
    return {"postgres": lambda _: database_url, **more}


def start(services: Services, run: ImageRun, env: dict[str, str]) -> Service:
    """The run's argv (the entrypoint script, then the command) as a service of this test."""
    port = int(env["LEASEQ_PORT"])
    log_path = services.tmp_path / f"{run.service}.log"
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            run.argv,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=services.tmp_path,  # the script finds its own folder
            start_new_session=True,
        )
    service = Service(process, port, log_path)
    services.started.append(service)
    return service


def healthcheck(port: int) -> int:
    """The image's HEALTHCHECK command, as Docker runs it in the container."""
    env = child_env({"LEASEQ_PORT": str(port)})
    return subprocess.run(
        [sys.executable, str(HEALTHCHECK)], env=env, capture_output=True, timeout=30, check=False
    ).returncode


def test_migrate_then_serve_then_the_healthcheck(
    services: Services, empty_database_url: str
) -> None:
    migration = local(run_of("migrate"), hosts(empty_database_url))
    assert migration.command == ["alembic", "upgrade", "head"]
    done = subprocess.run(
        migration.argv,
        env=environment(migration),
        cwd=services.tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert migrate.current(empty_database_url) == migrate.head()

    api = local(run_of("api"), hosts(empty_database_url))
    port = free_port()
    assert healthcheck(port) == 1  # nothing listens yet
    service = start(services, api, environment(api, {"LEASEQ_PORT": str(port)}))
    service.wait_ready()
    assert healthcheck(port) == 0
    with service.client() as client:
        assert client.get("/healthz").status_code == 200
        assert client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]}).is_success

    # `docker stop` sends SIGTERM to the entrypoint's process, which exec'd leaseq.
    os.kill(service.pid, signal.SIGTERM)
    assert service.wait() == 0
    assert healthcheck(port) == 1


def test_the_pgbouncer_profile_serves_through_the_pooler(
    services: Services, database_url: str, pgbouncer: PgBouncer
) -> None:
    api = local(
        run_of("api-pooled"),
        hosts(database_url, pgbouncer=lambda _: pgbouncer.through(database_url)),
    )
    assert api.environment["LEASEQ_DATABASE_POOLED"] == "true"
    port = free_port()
    service = start(services, api, environment(api, {"LEASEQ_PORT": str(port)}))
    service.wait_ready()
    assert healthcheck(port) == 0
    database = make_url(database_url).database or ""  # the embedded server's URL has a ?host=
    before = pgbouncer.transactions(database)
    with service.client() as client:
        [lead] = client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]}).json()["ids"]
        [lease] = client.post("/lease", json={"session": "s", "owner": "w"}).json()["leases"]
        done = client.post("/complete", json={"lead_id": lead, "token": lease["token"]})
        assert done.json()["lead"]["status"] == "done"
    assert pgbouncer.transactions(database) >= before + 3


def test_the_demo_pushes_leads_and_its_workers_do_them(
    services: Services, database_url: str
) -> None:
    api = local(run_of("api"), hosts(database_url))
    port = free_port()
    service = start(services, api, environment(api, {"LEASEQ_PORT": str(port)}))
    service.wait_ready()
    at_api = hosts(database_url, api=lambda url: url.replace("api:8000", f"127.0.0.1:{port}"))

    push = local(run_of("demo-push"), at_api)
    pushed = subprocess.run(
        push.argv,
        env=environment(push),
        cwd=services.tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert pushed.returncode == 0, pushed.stdout + pushed.stderr
    stats = httpx.get(f"{service.url}/sessions/demo/stats", timeout=10).json()
    assert stats["queued"] == DEMO_LEADS

    # Two worker replicas, as `deploy: replicas: 2` runs them; they work until stopped.
    worker = local(run_of("demo-worker"), at_api)
    workers = [start(services, worker, environment(worker, {"LEASEQ_PORT": "0"})) for _ in range(2)]
    deadline = time.monotonic() + 90
    while httpx.get(f"{service.url}/sessions/demo/stats", timeout=10).json()["done"] < 50:
        assert all(w.running() for w in workers), workers[0].log() + workers[1].log()
        assert time.monotonic() < deadline, "the demo workers finished nothing"
        time.sleep(0.2)
    for w in workers:
        w.terminate()  # no new leases; the leads in flight finish or are released
    for w in workers:
        assert w.wait(30) == 0, w.log()
    stats = httpx.get(f"{service.url}/sessions/demo/stats", timeout=10).json()
    assert stats["leased"] == 0 and stats["done"] >= 50
    report = httpx.get(f"{service.url}/sessions/demo/report", timeout=10).json()
    assert report["double_completions"] == 0 and report["overlapping_leases"] == 0
