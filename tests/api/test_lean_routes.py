"""A route served by the front door's lean handler answers exactly as FastAPI's handler does
(app/api/front_door.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import routing as fastapi_routing

from app.api import front_door
from app.api.app import create_app
from app.config import Settings
from app.metrics import REGISTRY
from tests.api.test_routes import push
from tests.support.in_process import BASE_URL

# Values that differ between two leads or two moments; everything else must be equal.
VARYING = {
    "id",
    "lead_id",
    "token",
    "expires_at",
    "lease_expires_at",
    "fence",
    "available_at",
    "created_at",
    "updated_at",
}


def shape(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: "…" if k in VARYING else shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [shape(v) for v in value]
    return value


WORKER_ROUTES = {"/lease", "/renew", "/renew/batch", "/complete", "/complete/batch"}


@asynccontextmanager
async def framework_only(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The same app without lean handlers: every route is FastAPI's handler (behind the door)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(front_door, "lean_handler", lambda route, framework: None)
        app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            yield client


async def test_every_worker_route_answers_as_the_framework_does(
    client: httpx.AsyncClient, api_settings: Settings
) -> None:
    await push(client, "s", *({"payload": {"same": True}} for _ in range(12)))
    async with framework_only(api_settings) as plain:
        answers: dict[str, list[Any]] = {}

        async def both(path: str, make: Any, headers: dict[str, str] | None = None) -> None:
            pair = []
            for each in (client, plain):
                response = await each.post(path, json=await make(each), headers=headers)
                pair.append((response.status_code, response.headers["content-type"], response))
            (fast_status, fast_type, fast), (slow_status, slow_type, slow) = pair
            assert (fast_status, fast_type) == (slow_status, slow_type), (path, fast.text)
            assert shape(fast.json()) == shape(slow.json()), path
            answers.setdefault(path, []).append(fast.json())

        async def leased(each: httpx.AsyncClient) -> dict[str, Any]:
            response = await each.post("/lease", json={"session": "s", "owner": "w"})
            lease: dict[str, Any] = response.json()["leases"][0]
            return lease

        async def a_lease(each: httpx.AsyncClient) -> dict[str, Any]:
            return {"session": "s", "owner": "w", "ttl_s": 30}

        await both("/lease", a_lease)
        await both("/lease", lambda each: _value({"session": "s", "owner": ""}))
        await both("/lease", lambda each: _value({"session": "empty", "owner": "w"}))
        await both("/lease", a_lease, headers={"Idempotency-Key": "not a key: spaces and a colon"})

        async def renewal(each: httpx.AsyncClient) -> dict[str, Any]:
            lease = await leased(each)
            return {"lead_id": lease["lead"]["id"], "token": lease["token"], "checkpoint": [1]}

        await both("/renew", renewal)
        await both("/renew", lambda each: _value({"lead_id": 1, "token": "stale"}))

        async def renewals(each: httpx.AsyncClient) -> dict[str, Any]:
            lease = await leased(each)
            items = [{"lead_id": lease["lead"]["id"], "token": lease["token"]}]
            return {"items": [*items, {"lead_id": 1, "token": "stale"}]}

        await both("/renew/batch", renewals)

        async def completion(each: httpx.AsyncClient) -> dict[str, Any]:
            lease = await leased(each)
            item = {"lead_id": lease["lead"]["id"], "token": lease["token"], "result": {"a": 1}}
            return item | {"next": {"session": "s", "owner": "w2"}}

        await both("/complete", completion)
        await both("/complete", lambda each: _value({"lead_id": 1, "token": "stale"}))
        await both("/complete", lambda each: _value({"lead_id": 1, "token": "t", "status": "x"}))

        async def completions(each: httpx.AsyncClient) -> dict[str, Any]:
            lease = await leased(each)
            items = [{"lead_id": lease["lead"]["id"], "token": lease["token"]}]
            return {"items": [*items, {"lead_id": 1, "token": "stale"}]}

        await both("/complete/batch", completions)
    assert set(answers) == WORKER_ROUTES
    assert answers["/complete"][1]["code"] == "lease_lost"  # the domain's error, as problem+json
    assert answers["/complete"][2]["code"] == "validation_error"  # the framework's refusal


async def test_a_lean_route_keeps_the_latency_metric_per_route(client: httpx.AsyncClient) -> None:
    def observed() -> float:
        labels = {"method": "POST", "route": "/renew", "status": "409"}
        value = REGISTRY.get_sample_value("leaseq_request_duration_seconds_count", labels)
        return value or 0.0

    before = observed()
    response = await client.post("/renew", json={"lead_id": 1, "token": "stale"})
    assert response.status_code == 409
    assert observed() == before + 1


async def _value(value: dict[str, Any]) -> dict[str, Any]:
    return value


async def test_the_worker_routes_skip_the_general_dependency_solver(
    client: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    solved: list[str] = []
    solve = fastapi_routing.solve_dependencies

    async def counting(*, request: Any, **kwargs: Any) -> Any:
        solved.append(request.url.path)
        return await solve(request=request, **kwargs)

    monkeypatch.setattr(fastapi_routing, "solve_dependencies", counting)
    assert (await client.post("/renew", json={"lead_id": 1, "token": "t"})).status_code == 409
    lease = {"session": "s", "owner": "w"}
    assert (await client.post("/lease", json=lease)).status_code == 200
    assert (await client.post("/renew", json={"lead_id": "1", "token": "t"})).status_code == 422
    assert (await client.post("/lease", json=lease | {"wait_s": 0.1})).status_code == 200
    assert solved == []
