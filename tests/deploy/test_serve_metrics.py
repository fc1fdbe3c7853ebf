"""GET /metrics from ``leaseq serve --workers 2``: every process's counters summed in one scrape."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from tests.support.scrapes import samples, value
from tests.support.serving import Services, until

pytestmark = pytest.mark.service

LEASES = 12


def test_two_worker_processes_count_together(
    services: Services, database_url: str, tmp_path: Path
) -> None:
    temp = tmp_path / "tmp"
    temp.mkdir()
    service = services.start("--workers", "2", database_url=database_url, env={"TMPDIR": str(temp)})
    [metrics_dir] = temp.glob("leaseq-metrics-*")
    # The service answers once one process is up; the second may still be opening its pool.
    until(lambda: _pool_size(service.url) == 2 * 10, 30, "both processes' pools in the gauge")
    pushed = httpx.post(
        f"{service.url}/sessions/s/leads",
        json={"leads": [{"payload": {"i": i}} for i in range(LEASES)]},
        timeout=10,
    )
    assert pushed.status_code == 201
    for _ in range(LEASES):
        # A new connection each time, so the requests spread over both processes.
        leased = httpx.post(f"{service.url}/lease", json={"session": "s", "owner": "w"}, timeout=10)
        assert len(leased.json()["leases"]) == 1

    # Whichever process answers, it counts the leases of both.
    for _ in range(4):
        found = samples(httpx.get(f"{service.url}/metrics", timeout=10).text)
        assert value(found, "leaseq_leases_total") == LEASES
        assert value(found, "leaseq_pushed_leads_total") == LEASES
        assert value(found, "leaseq_leads", session="s", status="leased") == LEASES
        assert value(found, "leaseq_db_pool_connections", state="size") == 2 * 10
    assert any(metrics_dir.iterdir())

    service.terminate()
    service.wait()
    deadline = time.monotonic() + 5
    while metrics_dir.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not metrics_dir.exists()


def _pool_size(url: str) -> float:
    found = samples(httpx.get(f"{url}/metrics", timeout=10).text)
    return value(found, "leaseq_db_pool_connections", state="size")
