"""Scoped tokens over REST: creation, hostile input, expiry, revocation, the audit trail,
the cache that spares the hot path a round trip, and what a scoped token sees and touches."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.api import shapes
from tests.support.in_process import Serve, runtime_of

BOOT = "boot-token"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def api(serve: Serve) -> AsyncIterator[httpx.AsyncClient]:
    async with serve(api_tokens=BOOT) as client:
        yield client


async def create(client: httpx.AsyncClient, by: str = BOOT, **body: Any) -> httpx.Response:
    return await client.post("/tokens", json=body, headers=bearer(by))


async def live_tokens(client: httpx.AsyncClient) -> int:
    rows = await runtime_of(client).db.rows(
        "SELECT count(*) AS n FROM api_tokens WHERE revoked_at IS NULL"
    )
    return int(rows[0]["n"])


async def push(client: httpx.AsyncClient, session: str, n: int = 1) -> list[int]:
    answer = await client.post(
        f"/sessions/{session}/leads", json={"leads": [{"payload": {}}] * n}, headers=bearer(BOOT)
    )
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


BAD_PATTERNS = ["", "**", "*a", "a**", "a*b", " a", "a b", "ä", "-a", "a" * 129, "a/b", "%", "_*"]
BAD_ROLES = ["admin", "", "Operator", "operator ", "full"]


@pytest.mark.parametrize("sessions", [*BAD_PATTERNS, None, 5, ["a"]])
async def test_a_malformed_pattern_is_refused_and_nothing_is_stored(
    api: httpx.AsyncClient, sessions: Any
) -> None:
    answer = await create(api, role="worker", sessions=sessions)
    shapes.problem(answer, 422, "validation_error")
    assert await live_tokens(api) == 0


@pytest.mark.parametrize("role", [*BAD_ROLES, None, 1])
async def test_an_unknown_role_is_refused(api: httpx.AsyncClient, role: Any) -> None:
    shapes.problem(await create(api, role=role, sessions="a"), 422, "validation_error")
    assert await live_tokens(api) == 0


@pytest.mark.parametrize(
    "body",
    [
        {"role": "worker", "sessions": "a", "name": ""},
        {"role": "worker", "sessions": "a", "name": "a b"},
        {"role": "worker", "sessions": "a", "name": "x" * 129},
        {"role": "worker", "sessions": "a", "expires_s": 0},
        {"role": "worker", "sessions": "a", "expires_s": -5},
        {"role": "worker", "sessions": "a", "expires_s": "30d"},
        {"role": "worker", "sessions": "a", "expires_s": 1e300},
        {"role": "worker", "sessions": "a", "expires_s": True},
        {"role": "worker", "sessions": "a", "admin": True},
        {"role": "worker"},
    ],
)
async def test_hostile_bodies_are_refused(api: httpx.AsyncClient, body: dict[str, Any]) -> None:
    shapes.problem(await create(api, **body), 422, "validation_error")
    assert await live_tokens(api) == 0


async def test_a_duplicate_name_is_refused_until_its_token_is_revoked(
    api: httpx.AsyncClient,
) -> None:
    first = await create(api, role="worker", sessions="a", name="w")
    assert first.status_code == 201, first.text
    shapes.problem(
        await create(api, role="reader", sessions="b", name="w"), 422, "validation_error"
    )
    assert await live_tokens(api) == 1
    assert (await api.delete("/tokens/w", headers=bearer(BOOT))).status_code == 200
    third = await create(api, role="reader", sessions="b", name="w")
    assert third.status_code == 201, third.text
    shapes.problem(await api.delete("/tokens/nobody", headers=bearer(BOOT)), 404, "not_found")
    shapes.problem(await api.delete("/tokens/a%20b", headers=bearer(BOOT)), 422, "validation_error")


async def test_a_token_is_shown_once_and_listed_without_it(api: httpx.AsyncClient) -> None:
    made = (await create(api, role="producer", sessions="tenant-a:*", name="p")).json()
    assert made["token"].startswith("lq_") and made["role"] == "producer"
    listed = (await api.get("/tokens", headers=bearer(BOOT))).json()["tokens"]
    assert [t["name"] for t in listed] == ["p"]
    assert made["token"] not in str(listed) and "hash" not in listed[0]
    rows = await runtime_of(api).db.rows("SELECT hash FROM api_tokens")
    assert made["token"] not in str(rows)
    me = (await api.get("/tokens/self", headers=bearer(made["token"]))).json()
    assert me == {
        "name": "p",
        "role": "producer",
        "sessions": "tenant-a:*",
        "operate": False,
        "manage_tokens": False,
    }


async def test_only_full_access_or_an_operator_of_every_session_manages_tokens(
    api: httpx.AsyncClient,
) -> None:
    star = (await create(api, role="operator", sessions="*", name="root")).json()["token"]
    scoped = (await create(api, role="operator", sessions="a*", name="ops-a")).json()["token"]
    made = await create(api, by=star, role="worker", sessions="a", name="w")
    assert made.status_code == 201, made.text
    shapes.problem(await create(api, by=scoped, role="worker", sessions="a"), 403, "forbidden")
    shapes.problem(await api.get("/tokens", headers=bearer(scoped)), 403, "forbidden")
    shapes.problem(await api.delete("/tokens/w", headers=bearer(scoped)), 403, "forbidden")
    assert await live_tokens(api) == 3


async def test_an_expired_token_answers_401(api: httpx.AsyncClient) -> None:
    made = (await create(api, role="reader", sessions="*", name="old", expires_s=3600)).json()
    await runtime_of(api).db.rows(
        "UPDATE api_tokens SET expires_at = now() - interval '1 second' WHERE name = 'old'"
    )
    answer = await api.get("/stats", headers=bearer(made["token"]))
    shapes.problem(answer, 401, "unauthorized")


async def test_a_cached_token_is_not_honoured_past_its_expiry(api: httpx.AsyncClient) -> None:
    made = (await create(api, role="reader", sessions="*", expires_s=1)).json()
    assert (await api.get("/stats", headers=bearer(made["token"]))).status_code == 200
    await asyncio.sleep(1.1)
    shapes.problem(await api.get("/stats", headers=bearer(made["token"])), 401, "unauthorized")


async def test_a_revoked_token_answers_401_at_once(api: httpx.AsyncClient) -> None:
    made = (await create(api, role="reader", sessions="*", name="r")).json()
    assert (await api.get("/stats", headers=bearer(made["token"]))).status_code == 200
    assert (await api.delete("/tokens/r", headers=bearer(BOOT))).json()["revoked_at"] is not None
    shapes.problem(await api.get("/stats", headers=bearer(made["token"])), 401, "unauthorized")


async def test_checking_a_token_costs_no_round_trip_at_steady_state(
    api: httpx.AsyncClient,
) -> None:
    tokens = runtime_of(api).tokens
    made = (await create(api, role="reader", sessions="*", name="r")).json()
    before = tokens.lookups
    for _ in range(50):
        assert (await api.get("/healthz", headers=bearer(made["token"]))).status_code == 200
        assert (await api.get("/tokens/self", headers=bearer(made["token"]))).status_code == 200
    assert tokens.lookups - before == 1  # one read, then the cache
    [row] = await runtime_of(api).db.rows("SELECT last_used_at FROM api_tokens WHERE name = 'r'")
    assert row["last_used_at"] is not None  # stamped by that read, not by every request


async def test_operator_actions_are_audited_by_token_name(api: httpx.AsyncClient) -> None:
    ops = (await create(api, role="operator", sessions="a*", name="ops-a")).json()["token"]
    [lead] = await push(api, "a1")
    assert (await api.post(f"/leads/{lead}/cancel", headers=bearer(ops))).status_code == 200
    assert (await api.post(f"/leads/{lead}/retry", headers=bearer(ops))).status_code == 200
    put = await api.put("/sessions/a1/settings", json={"weight": 2}, headers=bearer(ops))
    assert put.status_code == 200, put.text
    assert (await api.post("/sweep", json={"all": True}, headers=bearer(ops))).status_code == 200
    assert (await api.post("/sessions/a1/retry-failed", headers=bearer(ops))).status_code == 200
    assert (await api.delete("/tokens/ops-a", headers=bearer(BOOT))).status_code == 200
    trail = await runtime_of(api).tokens.audit_trail()
    assert [(row["token"], row["action"]) for row in reversed(trail)] == [
        ("full-access", "token-create"),
        ("ops-a", "cancel"),
        ("ops-a", "retry"),
        ("ops-a", "settings"),
        ("ops-a", "sweep"),
        ("ops-a", "retry-failed"),
        ("full-access", "token-revoke"),
    ]
    assert trail[-2]["lead_id"] == lead and trail[-2]["session"] == "a1"


async def test_a_scoped_sweep_of_all_touches_only_its_sessions(api: httpx.AsyncClient) -> None:
    ops = (await create(api, role="operator", sessions="a*", name="ops-a")).json()["token"]
    for session in ("a1", "b1"):
        await push(api, session)
        leased = await api.post(
            "/lease", json={"session": session, "owner": "w"}, headers=bearer(BOOT)
        )
        assert leased.json()["leases"], leased.text
    await runtime_of(api).db.rows(
        "UPDATE leads SET lease_expires_at = now() - interval '1 second' WHERE status = 'leased'"
    )
    swept = await api.post("/sweep", json={"all": True}, headers=bearer(ops))
    assert swept.json() == {"requeued": 1, "failed": 0}
    rows = await runtime_of(api).db.rows("SELECT session, status FROM leads ORDER BY session")
    assert [(r["session"], r["status"]) for r in rows] == [("a1", "queued"), ("b1", "leased")]


async def test_a_scoped_token_sees_only_its_sessions_counted(api: httpx.AsyncClient) -> None:
    reader = (await create(api, role="reader", sessions="a*", name="r")).json()["token"]
    await push(api, "a1", 2)
    await push(api, "b1", 3)
    stats = (await api.get("/stats", headers=bearer(reader))).json()
    assert set(stats["sessions"]) == {"a1"} and stats["total"]["queued"] == 2
    data = (await api.get("/dashboard/data", headers=bearer(reader))).json()
    assert [s["name"] for s in data["sessions"]] == ["a1"]
    assert data["total"]["queued"] == 2
    assert data["access"] == {"token": "r", "role": "reader", "sessions": "a*", "operate": False}
    metrics = (await api.get("/metrics", headers=bearer(reader))).text
    assert 'session="a1"' in metrics and 'session="b1"' not in metrics


async def test_another_tenants_idempotency_key_hands_over_no_lease(api: httpx.AsyncClient) -> None:
    tokens = runtime_of(api).tokens
    a = (await tokens.create("a-workers", "worker", "a*")).token
    b = (await tokens.create("b-workers", "worker", "b*")).token
    await push(api, "a1")
    await push(api, "b1")
    key = {"Idempotency-Key": "shared-key-1"}
    first = await api.post("/lease", json={"owner": "w"}, headers={**bearer(a), **key})
    assert [lease["lead"]["session"] for lease in first.json()["leases"]] == ["a1"]
    again = await api.post("/lease", json={"owner": "w"}, headers={**bearer(b), **key})
    shapes.problem(again, 422, "validation_error")
    mine = await api.post("/lease", json={"owner": "w"}, headers={**bearer(a), **key})
    assert mine.json()["leases"] == first.json()["leases"]
