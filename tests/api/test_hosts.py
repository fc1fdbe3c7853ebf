"""DNS rebinding: without API tokens only loopback Host names and LEASEQ_ALLOWED_HOSTS are
served; any other Host gets 403 ``forbidden`` and changes nothing."""

from __future__ import annotations

import httpx
import pytest

from app.api.hosts import host_name, is_loopback
from tests.api import shapes
from tests.support.in_process import Serve

PUSH = {"leads": [{"payload": {}}]}


@pytest.mark.parametrize(
    ("header", "name"),
    [("localhost:8000", "localhost"), ("[::1]:80", "[::1]"), ("Evil.Example", "evil.example")],
)
def test_a_host_name_drops_its_port(header: str, name: str) -> None:
    assert host_name(header) == name


@pytest.mark.parametrize("name", ["localhost", "app.localhost", "127.0.0.1", "127.9.9.9", "[::1]"])
def test_loopback_names(name: str) -> None:
    assert is_loopback(name)


@pytest.mark.parametrize("name", ["evil.example", "10.0.0.1", "localhost.evil.example", "[::2]"])
def test_other_names_are_not_loopback(name: str) -> None:
    assert not is_loopback(name)


async def test_a_rebinding_request_is_forbidden_and_changes_nothing(
    client: httpx.AsyncClient,
) -> None:
    [lead_id] = (await client.post("/sessions/s/leads", json=PUSH)).json()["ids"]
    evil = {"Host": "evil.example:8000", "Origin": "http://evil.example:8000"}
    for method, path, body in (
        ("POST", f"/leads/{lead_id}/cancel", None),
        ("POST", "/sessions/s/leads", PUSH),
        ("GET", f"/leads/{lead_id}", None),
        ("GET", "/dashboard/data", None),
        ("GET", "/openapi.json", None),
    ):
        response = await client.request(method, path, json=body, headers=evil)
        problem = shapes.problem(response, 403, "forbidden")
        assert "LEASEQ_ALLOWED_HOSTS" in problem["detail"]
    lead = (await client.get(f"/leads/{lead_id}")).json()
    assert lead["status"] == "queued"
    assert (await client.get("/sessions/s/stats")).json()["queued"] == 1
    # The probes answer whatever the Host.
    assert (await client.get("/healthz", headers=evil)).status_code == 200


async def test_loopback_names_are_served_with_any_port(client: httpx.AsyncClient) -> None:
    for host in ("localhost", "localhost:8000", "127.0.0.1:1", "[::1]:8000", "LOCALHOST"):
        response = await client.get("/sessions/s/stats", headers={"Host": host})
        assert response.status_code == 200, host


async def test_allowed_hosts_are_served(serve: Serve) -> None:
    async with serve(allowed_hosts="api, Queue.Internal") as client:
        for host, status in (("api:8000", 200), ("queue.internal", 200), ("leaseq.test", 403)):
            response = await client.get("/stats", headers={"Host": host})
            assert response.status_code == status, host
    async with serve(allowed_hosts="*") as client:
        assert (await client.get("/stats", headers={"Host": "any.example"})).status_code == 200


async def test_with_tokens_the_token_decides_not_the_host(serve: Serve) -> None:
    async with serve(api_tokens="s3cret", allowed_hosts="") as client:
        bearer = {"Authorization": "Bearer s3cret", "Host": "evil.example"}
        assert (await client.get("/stats", headers=bearer)).status_code == 200
        refused = await client.get("/stats", headers={"Host": "evil.example"})
        shapes.problem(refused, 401, "unauthorized")
