"""Every route, for every role, in and out of scope, generated from the route table.

A route without a declaration (``app.api.access.Access``) fails
``test_every_route_declares_its_role_and_scope``; a route without a sample
request here fails the matrix, so a new route cannot go unchecked. A call
outside the token's scope answers 403 (a read of another session's lead: 404)
and changes nothing; a route that covers many sessions shows only the token's.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from starlette.routing import Route

from app.api import access
from app.api.access import Where
from app.domain.access import ROLES, Action, Principal
from tests.api import shapes
from tests.support.in_process import Serve, runtime_of

BOOT = "boot-token"
IN, OUT = "a-1", "b-1"  # sessions: the scoped tokens' pattern is a-*
PATTERN = "a-*"


# A request for every route: (path parameters filled, body), given the lead and the session
# a call aims at. A route missing here fails the matrix.
SAMPLES: dict[tuple[str, str], Any] = {
    ("POST", "/sessions/{session}/leads"): lambda s, lead: {"leads": [{"payload": {}}]},
    ("GET", "/sessions/{session}/pushes/{key:path}"): None,
    ("POST", "/lease"): lambda s, lead: {"session": s, "owner": "w", "ttl_s": 60},
    ("POST", "/renew"): lambda s, lead: {"lead_id": lead, "token": "t"},
    ("POST", "/renew/batch"): lambda s, lead: {"items": [{"lead_id": lead, "token": "t"}]},
    ("POST", "/complete"): lambda s, lead: {"lead_id": lead, "token": "t"},
    ("POST", "/complete/batch"): lambda s, lead: {"items": [{"lead_id": lead, "token": "t"}]},
    ("POST", "/release"): lambda s, lead: {"lead_id": lead, "token": "t"},
    ("POST", "/sweep"): lambda s, lead: {"session": s},
    ("GET", "/sessions/{session}/stats"): None,
    ("GET", "/stats"): None,
    ("GET", "/sessions/{session}/scaling"): None,
    ("GET", "/scaling"): None,
    ("GET", "/sessions/{session}/report"): None,
    ("GET", "/sessions/{session}/settings"): None,
    ("PUT", "/sessions/{session}/settings"): lambda s, lead: {"weight": 2},
    ("GET", "/leads/{lead_id}"): None,
    ("POST", "/leads/{lead_id}/cancel"): None,
    ("POST", "/leads/{lead_id}/retry"): None,
    ("GET", "/leads/{lead_id}/events"): None,
    ("POST", "/sessions/{session}/retry-failed"): None,
    ("GET", "/sessions/{session}/leads"): None,
    ("GET", "/sessions/{session}/throughput"): None,
    ("POST", "/sessions/{session}/leads/retry"): lambda s, lead: {"ids": [lead]},
    ("POST", "/sessions/{session}/leads/cancel"): lambda s, lead: {"filter": {}},
    ("POST", "/sessions/{session}/pause"): lambda s, lead: {"for_s": 60},
    ("POST", "/sessions/{session}/resume"): None,
    ("GET", "/healthz"): None,
    ("GET", "/readyz"): None,
    ("GET", "/metrics"): None,
    ("GET", "/dashboard"): None,
    ("GET", "/dashboard/data"): None,
    ("PUT", "/schedules/{name}"): lambda s, lead: {
        "session": s,
        "cron": "0 0 1 1 *",
        "timezone": "UTC",
        "lead": {"payload": {}},
    },
    ("GET", "/schedules"): None,
    ("GET", "/schedules/{name}"): None,
    ("DELETE", "/schedules/{name}"): None,
    ("POST", "/tokens"): lambda s, lead: {"role": "reader", "sessions": s},
    ("GET", "/tokens"): None,
    ("DELETE", "/tokens/{name}"): None,
    ("GET", "/tokens/self"): None,
    ("GET", "/openapi.json"): None,
    ("GET", "/docs"): None,
    ("GET", "/docs/oauth2-redirect"): None,
    ("GET", "/redoc"): None,
}


@dataclass
class World:
    client: httpx.AsyncClient
    tokens: dict[str, str]  # role (and "operator*") → bearer token
    leads: dict[str, int]  # session → a lead of it


def api_routes(app: FastAPI) -> list[Route]:
    """Every route a request reaches by method and path (not the static files' mount)."""
    return [route for route in access.every_route(app.routes) if isinstance(route, Route)]


def schedule_of(session: str) -> str:
    """The name of the schedule that pushes into ``session``."""
    return f"every-year-{session}"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
async def world(serve: Serve) -> AsyncIterator[World]:
    async with serve(api_tokens=BOOT) as client:
        tokens = runtime_of(client).tokens
        made = {role: (await tokens.create(role, role, PATTERN)).token for role in ROLES}
        made["operator*"] = (await tokens.create("operator-all", "operator", "*")).token
        leads = {}
        for session in (IN, OUT):
            pushed = await client.post(
                f"/sessions/{session}/leads",
                json={"leads": [{"payload": {}}]},
                headers=bearer(BOOT),
            )
            leads[session] = pushed.json()["ids"][0]
            scheduled = await client.put(
                f"/schedules/{schedule_of(session)}",
                json=SAMPLES[("PUT", "/schedules/{name}")](session, None),
                headers=bearer(BOOT),
            )
            assert scheduled.status_code == 200, scheduled.text
        yield World(client, made, leads)


async def fingerprint(client: httpx.AsyncClient) -> tuple[Any, ...]:
    """Everything a call could change: the leads, the settings, the live tokens, the
    schedules."""
    db = runtime_of(client).db
    rows = await db.rows(
        """SELECT (SELECT coalesce(md5(string_agg(l::text, ',' ORDER BY id)), '') FROM leads l)
                  AS leads,
                  (SELECT coalesce(md5(string_agg(s::text, ',' ORDER BY session)), '')
                   FROM session_settings s) AS settings,
                  (SELECT count(*) FROM api_tokens WHERE revoked_at IS NULL) AS tokens,
                  (SELECT coalesce(md5(string_agg(s::text, ',' ORDER BY name)), '')
                   FROM schedules s) AS schedules"""
    )
    return tuple(rows[0].values())


async def test_every_route_declares_its_role_and_scope(world: World) -> None:
    app: FastAPI = world.client.app  # type: ignore[attr-defined]
    for route in access.every_route(app.routes):
        if isinstance(route, APIRoute):
            assert access.declared(route) is not None, f"{route.path} declares no Access"
            for method in route.methods:
                assert (method, route.path) in SAMPLES, f"no sample request for {route.path}"
        else:
            assert getattr(route, "path", None) in access.FRAMEWORK_PATHS, route


def test_the_roles_do_what_the_contract_says() -> None:
    """The permission table itself, spelled out (docs/contract.md#who-may-do-what)."""

    def may(role: str, action: Action, pattern: str = PATTERN) -> bool:
        return Principal("t", role, pattern).may(action)

    assert may("producer", Action.PUSH) and may("producer", Action.READ)
    assert not may("producer", Action.LEASE) and not may("producer", Action.OBSERVE)
    assert may("worker", Action.LEASE) and may("worker", Action.PUSH)
    assert not may("worker", Action.OPERATE) and not may("worker", Action.OBSERVE)
    assert may("reader", Action.OBSERVE) and may("reader", Action.READ)
    assert not may("reader", Action.PUSH) and not may("reader", Action.LEASE)
    assert all(may("operator", a) for a in Action if a is not Action.MANAGE_TOKENS)
    assert not may("operator", Action.MANAGE_TOKENS)
    assert may("operator", Action.MANAGE_TOKENS, "*")
    assert not any(may(role, Action.MANAGE_TOKENS, "*") for role in ROLES if role != "operator")


def _request(route: Route, method: str, session: str, lead: int) -> tuple[str, Any]:
    path = route.path.replace("{session}", session).replace("{lead_id}", str(lead))
    name = schedule_of(session) if route.path.startswith("/schedules/") else "spare"
    path = path.replace("{name}", name).replace("{key:path}", "a-key")
    sample = SAMPLES[(method, route.path)]
    return path, None if sample is None else sample(session, lead)


@pytest.mark.parametrize("role", [*ROLES, "operator*"])
async def test_every_route_for_every_role_in_and_out_of_scope(world: World, role: str) -> None:
    client = world.client
    await runtime_of(client).tokens.create("spare", "reader", "a-1")
    app: FastAPI = client.app  # type: ignore[attr-defined]
    principal = Principal(role, role.rstrip("*"), "*" if role.endswith("*") else PATTERN)
    headers = bearer(world.tokens[role])
    checked = set()
    for route in api_routes(app):
        declared = access.declared(route)
        assert declared is not None
        for method in sorted((route.methods or set()) - {"HEAD"}):
            for session in (IN, OUT):
                path, body = _request(route, method, session, world.leads[session])
                before = await fingerprint(client)
                answer = await client.request(method, path, json=body, headers=headers)
                where = f"{role} {method} {path} -> {answer.status_code} {answer.text[:200]}"
                assert answer.status_code < 500, where
                assert answer.status_code != 401, where
                inside = principal.covers(session)
                if declared.public:
                    assert answer.status_code == 200, where
                elif not principal.may(declared.action):
                    shapes.problem(answer, 403, "forbidden")
                    assert await fingerprint(client) == before, where
                elif declared.where is Where.OWN or inside or declared.where is Where.NONE:
                    assert answer.status_code != 403, where
                    if declared.where is Where.OWN and not principal.everywhere:
                        assert OUT not in answer.text, where
                elif declared.where in (Where.LEAD, Where.SCHEDULE) and declared.action in (
                    Action.READ,
                    Action.OBSERVE,
                ):
                    shapes.problem(answer, 404, "not_found")
                else:
                    shapes.problem(answer, 403, "forbidden")
                    assert await fingerprint(client) == before, where
                checked.add((method, route.path))
    assert checked == set(SAMPLES)
