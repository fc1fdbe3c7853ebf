"""Bearer auth: off by default; when tokens are set, everything but the probes needs one."""

from __future__ import annotations

import httpx
import pytest

from tests.api import shapes
from tests.support.in_process import Serve

GUARDED = [
    ("GET", "/stats"),
    ("GET", "/sessions/s/stats"),
    ("GET", "/sessions/s/report"),
    ("GET", "/leads/1"),
    ("POST", "/lease"),
    ("POST", "/sessions/s/leads"),
    ("POST", "/sweep"),
    ("GET", "/metrics"),
    ("GET", "/dashboard/data"),
    ("POST", "/leads/1/cancel"),
    ("POST", "/leads/1/retry"),
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/no/such/route"),
]


async def test_without_tokens_nothing_asks_for_one(client: httpx.AsyncClient) -> None:
    assert (await client.get("/stats")).status_code == 200
    assert (await client.get("/stats", headers={"Authorization": "Bearer x"})).status_code == 200


@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "Bearer ", "Basic dG9rZW4tb25lOg==", "token-one", "Bearer token-one2"],
)
async def test_with_tokens_a_missing_or_wrong_token_gets_401(
    serve: Serve, authorization: str | None
) -> None:
    headers = {} if authorization is None else {"Authorization": authorization}
    async with serve(api_tokens="token-one, token-two") as client:
        before = (await client.get("/stats", headers={"Authorization": "Bearer token-one"})).json()
        for method, path in GUARDED:
            response = await client.request(
                method, path, headers=headers, json={"session": "s", "owner": "w"}
            )
            shapes.problem(response, 401, "unauthorized")
            assert response.headers["www-authenticate"].startswith("Bearer")
            assert "token-one" not in response.text
        after = (await client.get("/stats", headers={"Authorization": "Bearer token-one"})).json()
        assert after == before


async def test_with_tokens_any_configured_token_is_accepted(serve: Serve) -> None:
    async with serve(api_tokens="token-one,token-two") as client:
        for token in ("token-one", "token-two"):
            headers = {"Authorization": f"Bearer {token}"}
            pushed = await client.post(
                "/sessions/s/leads", json={"leads": [{"payload": {}}]}, headers=headers
            )
            assert pushed.status_code == 201
            for path in ("/stats", "/metrics", "/dashboard/data", "/openapi.json"):
                assert (await client.get(path, headers=headers)).status_code == 200, path
        lowercase = {"Authorization": "bearer token-two"}
        assert (await client.get("/stats", headers=lowercase)).status_code == 200


async def test_with_tokens_the_probes_stay_open(serve: Serve) -> None:
    async with serve(api_tokens="token-one") as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/readyz")).status_code == 200


async def test_with_tokens_the_dashboard_shell_is_open_and_holds_no_data(serve: Serve) -> None:
    async with serve(api_tokens="token-one") as client:
        headers = {"Authorization": "Bearer token-one"}
        pushed = await client.post(
            "/sessions/secret-session/leads", json={"leads": [{"payload": {}}]}, headers=headers
        )
        assert pushed.status_code == 201
        shell = await client.get("/dashboard")
        assert shell.status_code == 200
        assert "secret-session" not in shell.text
        assert "token-one" not in shell.text
        assert shell.headers["x-frame-options"] == "DENY"
        shapes.problem(await client.get("/dashboard/data"), 401, "unauthorized")
        found = (await client.get("/dashboard/data", headers=headers)).json()
        assert [s["name"] for s in found["sessions"]] == ["secret-session"]


async def test_openapi_declares_bearer_security_with_tokens_or_without(serve: Serve) -> None:
    async with serve(api_tokens="token-one") as client:
        headers = {"Authorization": "Bearer token-one"}
        spec = (await client.get("/openapi.json", headers=headers)).json()
        assert spec["components"]["securitySchemes"]["bearerAuth"]["scheme"] == "bearer"
        assert spec["paths"]["/lease"]["post"]["security"] == [{"bearerAuth": []}]
        assert spec["paths"]["/healthz"]["get"]["security"] == []
    async with serve(api_tokens="") as client:
        assert (await client.get("/openapi.json")).json() == spec
