"""A pause binds every lease that begins after it answers, through every ``leaseq serve``.

Two API processes on one database: a pause through one holds back the leases asked of
both at once (a long poll included), a resume through the other lets them go, and a
``leaseq sessions pause --for`` ends on the database clock.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from tests.support.serving import Services, leaseq

pytestmark = pytest.mark.service

QUIET = {"LEASEQ_SWEEP_INTERVAL_S": "3600"}


def test_a_pause_through_one_process_binds_leases_through_both(
    services: Services, database_url: str
) -> None:
    a = services.start(database_url=database_url, env=QUIET, ready=False)
    b = services.start(database_url=database_url, env=QUIET, ready=False)
    for service in (a, b):
        service.wait_ready()
    pushed = httpx.post(
        f"{a.url}/sessions/s/leads", json={"leads": [{"payload": {}}] * 20}, timeout=30
    )
    assert pushed.status_code == 201
    assert httpx.post(f"{a.url}/sessions/s/pause", timeout=30).status_code == 200

    def lease(url: str) -> int:
        body = {"session": "s", "owner": "w", "max": 5, "wait_s": 0.5}
        answer = httpx.post(f"{url}/lease", json=body, timeout=30)
        assert answer.status_code == 200, answer.text
        return len(answer.json()["leases"])

    with ThreadPoolExecutor(8) as pool:
        taken = list(pool.map(lease, [a.url, b.url] * 4))
    assert taken == [0] * 8
    for service in (a, b):
        stats = httpx.get(f"{service.url}/sessions/s/stats", timeout=30).json()
        assert stats["queued"] == 20 and stats["paused_until"] is not None
    assert httpx.post(f"{b.url}/sessions/s/resume", timeout=30).status_code == 200
    with ThreadPoolExecutor(8) as pool:
        taken = list(pool.map(lease, [a.url, b.url] * 4))
    assert sum(taken) == 20


def test_leaseq_sessions_pause_and_resume(services: Services, database_url: str) -> None:
    service = services.start(database_url=database_url, env=QUIET)
    paused = leaseq("sessions", "pause", "crawl", "--for", "10m", "--url", service.url)
    assert paused.returncode == 0, paused.stderr
    assert "crawl: weight 1, no cap, no rate, paused until 20" in paused.stdout
    settings = httpx.get(f"{service.url}/sessions/crawl/settings", timeout=30).json()
    assert settings["paused_until"] is not None
    resumed = leaseq("sessions", "resume", "crawl", "--url", service.url)
    assert resumed.returncode == 0 and "paused" not in resumed.stdout, resumed.stdout
    keyed = leaseq(
        "sessions",
        "set",
        "crawl",
        "--max-per-key",
        "2",
        "--max-runtime",
        "30m",
        "--url",
        service.url,
    )
    assert keyed.returncode == 0, keyed.stderr
    assert "max 2 per key, max runtime 1800 s" in keyed.stdout
    for bad in (["pause", "crawl", "--for", "soon"], ["pause", "no/such"], ["resume", "-x"]):
        refused = leaseq("sessions", *bad, "--url", service.url)
        assert refused.returncode != 0 and refused.stderr.strip(), refused
    bad_runtime = leaseq("sessions", "set", "crawl", "--max-runtime", "2d", "--url", service.url)
    assert bad_runtime.returncode != 0 and "max_runtime_s" in bad_runtime.stderr
    settings = httpx.get(f"{service.url}/sessions/crawl/settings", timeout=30).json()
    assert settings["paused_until"] is None and settings["max_runtime_s"] == 1800
