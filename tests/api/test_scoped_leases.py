"""Leases across sessions with scoped worker tokens: 8 concurrent workers of two tenants,
each leasing from any session (and from a list) with its own token, never get a lead of
the other tenant; every lead is leased and completed exactly once."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx

from tests.support.in_process import Serve, runtime_of

BOOT = "boot-token"
TENANTS = {"tenant-a": ["tenant-a:1", "tenant-a:2"], "tenant-b": ["tenant-b:1", "tenant-b:2"]}
LEADS_PER_SESSION = 60
WORKERS_PER_TENANT = 4


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def work(
    client: httpx.AsyncClient, token: str, owner: str, body: dict[str, Any]
) -> list[tuple[int, str]]:
    """Lease and complete until a lease comes back empty twice; what it took."""
    taken: list[tuple[int, str]] = []
    empty = 0
    while empty < 2:
        answer = await client.post(
            "/lease", json={"owner": owner, "max": 3, "ttl_s": 60, **body}, headers=bearer(token)
        )
        assert answer.status_code == 200, answer.text
        leases = answer.json()["leases"]
        empty = 0 if leases else empty + 1
        for lease in leases:
            taken.append((lease["lead"]["id"], lease["lead"]["session"]))
            done = await client.post(
                "/complete",
                json={"lead_id": lease["lead"]["id"], "token": lease["token"]},
                headers=bearer(token),
            )
            assert done.status_code == 200, done.text
    return taken


async def test_scoped_workers_of_two_tenants_never_lease_the_others_leads(serve: Serve) -> None:
    async with serve(api_tokens=BOOT) as client:
        tokens = runtime_of(client).tokens
        worker_tokens = {
            tenant: (await tokens.create(f"{tenant}-worker", "worker", f"{tenant}:*")).token
            for tenant in TENANTS
        }
        pushed: dict[int, str] = {}
        for sessions in TENANTS.values():
            for session in sessions:
                answer = await client.post(
                    f"/sessions/{session}/leads",
                    json={"leads": [{"payload": {"i": i}} for i in range(LEADS_PER_SESSION)]},
                    headers=bearer(BOOT),
                )
                pushed.update(dict.fromkeys(answer.json()["ids"], session))
        # Half the workers lease from any session, half name every session of both tenants:
        # the ones of another tenant in a list are refused (403) before anything is leased.
        jobs = []
        for tenant, sessions in TENANTS.items():
            for n in range(WORKERS_PER_TENANT):
                body: dict[str, Any] = {} if n % 2 == 0 else {"sessions": sessions}
                jobs.append(work(client, worker_tokens[tenant], f"{tenant}-w{n}", body))
        async with asyncio.timeout(120):
            results = await asyncio.gather(*jobs)
        for tenant, taken in zip(
            [t for t in TENANTS for _ in range(WORKERS_PER_TENANT)], results, strict=True
        ):
            assert all(session.startswith(f"{tenant}:") for _, session in taken), tenant
            assert all(pushed[lead] == session for lead, session in taken)
        every = Counter(lead for taken in results for lead, _ in taken)
        assert sorted(every) == sorted(pushed) and set(every.values()) == {1}

        across = await client.post(
            "/lease",
            json={"owner": "w", "sessions": [*TENANTS["tenant-a"], "tenant-b:1"]},
            headers=bearer(worker_tokens["tenant-a"]),
        )
        assert across.status_code == 403 and across.json()["code"] == "forbidden"
