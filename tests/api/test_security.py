"""Secrets stay out of the logs: API tokens and lease tokens, through a real ``leaseq serve``."""

from __future__ import annotations

import secrets

import pytest

from app.domain.lease_tokens import mint
from tests.support.serving import Services

pytestmark = pytest.mark.service


def test_tokens_never_appear_in_the_service_log(services: Services, database_url: str) -> None:
    api_token = secrets.token_urlsafe(24)
    wrong = secrets.token_urlsafe(24)
    service = services.start(
        "--token",
        api_token,
        "--access-log",
        "--log-level",
        "debug",
        database_url=database_url,
    )
    lease_tokens: list[str] = []
    with service.client(headers={"Authorization": f"Bearer {api_token}"}) as http:
        pushed = http.post("/sessions/s/leads", json={"leads": [{"payload": {}}] * 3})
        assert pushed.status_code == 201, pushed.text
        leases = http.post("/lease", json={"session": "s", "owner": "w", "max": 3}).json()
        for held in leases["leases"]:
            lease_tokens.append(held["token"])
            item = {"lead_id": held["lead"]["id"], "token": held["token"]}
            assert http.post("/renew", json=item).status_code == 200
            assert http.post("/complete", json=item).status_code == 200
            assert http.post("/complete", json=item).status_code == 200  # a retry: the same
            cached = {**item, "status": "cached"}
            assert http.post("/complete", json=cached).status_code == 409  # lease_lost
        assert http.post("/renew", json={"lead_id": 1, "token": mint("s")}).status_code == 409
        assert http.get("/openapi.json").status_code == 200
        assert http.get("/leads/999999").status_code == 404
    with service.client(headers={"Authorization": f"Bearer {wrong}"}) as http:
        assert http.get("/stats").status_code == 401
    with service.client() as http:
        assert http.get("/stats").status_code == 401
        assert http.get("/healthz").status_code == 200
    service.terminate()
    service.wait()

    log = service.log()
    assert "POST /complete" in log, log  # the access log was on
    for secret in [api_token, wrong, *lease_tokens]:
        assert secret not in log
    assert len(lease_tokens) == 3
