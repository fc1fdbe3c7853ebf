"""A revocation binds requests already in flight, on a real ``leaseq serve`` process.

A worker token's long poll that is waiting when the token is revoked is woken by the leads
pushed after, and answers 401 with no lease; the leads stay queued for the next worker. And
the lease statement reads the token itself: a process whose cache still trusts a token
revoked behind its back (no NOTIFY, a long recheck) leases nothing for it either.

Each process reaches its database as the suite's apps do: through PgBouncer when the suite
runs through it (``serve_database``), on the Citus cluster when it runs there.
"""

from __future__ import annotations

import asyncio

import httpx
import psycopg
import pytest

from tests.support.in_process import serve_database
from tests.support.serving import Services
from tests.support.worker_support import eventually

pytestmark = pytest.mark.service

BOOT = "boot-token"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def worker_token(url: str, name: str) -> str:
    made = httpx.post(
        f"{url}/tokens",
        json={"role": "worker", "sessions": "s*", "name": name},
        headers=bearer(BOOT),
    )
    assert made.status_code == 201, made.text
    token: str = made.json()["token"]
    return token


async def waiters(http: httpx.AsyncClient) -> float:
    metrics = (await http.get("/metrics", headers=bearer(BOOT))).text
    for line in metrics.splitlines():
        if line.startswith("leaseq_long_poll_waiters "):
            return float(line.split()[1])
    return 0.0


async def waits_for_an_outcome(http: httpx.AsyncClient) -> bool:
    metrics = (await http.get("/metrics", headers=bearer(BOOT))).text
    return any(
        line.startswith("leaseq_outcome_waiters ") and float(line.split()[1]) >= 1
        for line in metrics.splitlines()
    )


def counts(url: str) -> dict[str, int]:
    stats = httpx.get(f"{url}/sessions/s1/stats", headers=bearer(BOOT))
    assert stats.status_code == 200, stats.text
    found: dict[str, int] = stats.json()
    return found


async def test_a_long_poll_waiting_when_its_token_is_revoked_gets_401_and_no_lead(
    services: Services, database_url: str
) -> None:
    url, env = serve_database(database_url)
    service = services.start("--token", BOOT, database_url=url, env=env)
    token = worker_token(service.url, "leaky")
    async with httpx.AsyncClient(base_url=service.url, timeout=60) as http:
        assert (
            await http.post("/lease", json={"session": "s1", "owner": "w"}, headers=bearer(token))
        ).status_code == 200
        poll = asyncio.create_task(
            http.post(
                "/lease",
                json={"session": "s1", "owner": "w", "max": 10, "wait_s": 30},
                headers=bearer(token),
            )
        )

        async def waiting() -> bool:
            return await waiters(http) >= 1

        await eventually(waiting)
        assert (await http.delete("/tokens/leaky", headers=bearer(BOOT))).status_code in (200, 204)
        pushed = await http.post(
            "/sessions/s1/leads",
            json={"leads": [{"payload": {"n": n}} for n in range(3)]},
            headers=bearer(BOOT),
        )
        assert pushed.status_code == 201, pushed.text
        answer = await asyncio.wait_for(poll, 45)
    assert answer.status_code == 401, answer.text
    assert answer.json()["code"] == "unauthorized"
    assert "invalid_token" in answer.headers["www-authenticate"]
    stats = counts(service.url)
    assert (stats["queued"], stats["leased"]) == (3, 0), stats


async def test_the_lease_statement_reads_the_token_whatever_the_cache_says(
    services: Services, database_url: str
) -> None:
    url, env = serve_database(database_url)
    service = services.start(
        "--token", BOOT, database_url=url, env={**env, "LEASEQ_TOKEN_RECHECK_S": "60"}
    )
    token = worker_token(service.url, "stale")
    lease = {"session": "s1", "owner": "w", "max": 10}
    async with httpx.AsyncClient(base_url=service.url, timeout=30, headers=bearer(token)) as http:
        first = await http.post(
            "/sessions/s1/leads", json={"leads": [{"payload": {}}]}, headers=bearer(BOOT)
        )
        assert first.status_code == 201, first.text
        [held] = (await http.post("/lease", json=lease)).json()["leases"]  # cached as live
        # Revoked behind the process's back: no NOTIFY, so its cache trusts the token still.
        with psycopg.connect(database_url, autocommit=True) as conn:
            conn.execute("UPDATE api_tokens SET revoked_at = now() WHERE name = 'stale'")
        pushed = await http.post(
            "/sessions/s1/leads",
            json={"leads": [{"payload": {}}, {"payload": {}}]},
            headers=bearer(BOOT),
        )
        assert pushed.status_code == 201, pushed.text
        plain = await http.post("/lease", json=lease)
        keyed = await http.post("/lease", json=lease, headers={"Idempotency-Key": "k1"})
        across = await http.post("/lease", json={"owner": "w", "max": 10})
        completed = await http.post(
            "/complete",
            json={"lead_id": held["lead"]["id"], "token": held["token"], "next": lease},
        )
    assert completed.status_code == 200, completed.text
    assert completed.json()["leases"] == [], completed.text
    for answer in (plain, keyed, across):
        assert answer.status_code in (200, 401), answer.text
        if answer.status_code == 200:
            assert answer.json()["leases"] == [], answer.text
    stats = counts(service.url)
    assert (stats["queued"], stats["leased"], stats["done"]) == (2, 0, 1), stats


@pytest.mark.parametrize("lead_ends", [True, False], ids=["then-the-lead-ends", "nothing-else"])
async def test_a_wait_for_an_outcome_when_its_token_is_revoked_answers_401(
    services: Services, database_url: str, lead_ends: bool
) -> None:
    """Whether its lead then ends or nothing else happens: the wait does not hold on to its
    end (``wait_s``, 30 s) but answers 401 at its next look (a notification of its lead, or
    every ``poll_interval_s``, 1.5 s)."""
    url, env = serve_database(database_url)
    service = services.start("--token", BOOT, database_url=url, env=env)
    token = worker_token(service.url, "waiting")
    async with httpx.AsyncClient(base_url=service.url, timeout=60) as http:
        pushed = await http.post(
            "/sessions/s1/leads", json={"leads": [{"payload": {}}]}, headers=bearer(BOOT)
        )
        [lead_id] = pushed.json()["ids"]
        wait = asyncio.create_task(
            http.get(f"/leads/{lead_id}", params={"wait_s": 30}, headers=bearer(token))
        )

        await eventually(lambda: waits_for_an_outcome(http))
        revoked = await http.delete("/tokens/waiting", headers=bearer(BOOT))
        assert revoked.status_code in (200, 204), revoked.text
        if lead_ends:
            cancelled = await http.post(f"/leads/{lead_id}/cancel", headers=bearer(BOOT))
            assert cancelled.status_code == 200, cancelled.text
        # The deadline is this test's only failure: a wait held to its end answers after 30 s.
        answer = await asyncio.wait_for(wait, 20)
    assert answer.status_code == 401, answer.text
    assert "invalid_token" in answer.headers["www-authenticate"]
    stats = counts(service.url)
    assert (stats["queued"], stats["failed"]) == ((0, 1) if lead_ends else (1, 0)), stats
