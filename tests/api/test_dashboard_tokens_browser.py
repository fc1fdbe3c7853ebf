"""The dashboard with scoped tokens, in a real browser: a reader sees only its sessions and
no cancel or retry button; an operator of the same sessions gets them."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.browser import WAIT_MS
from tests.support.serving import Services

pytestmark = pytest.mark.service

BOOT = "boot-token"


def sign_in(browser: Any, url: str, token: str) -> Any:
    page = browser.new_page()
    page.goto(f"{url}/dashboard")
    page.wait_for_selector("#login", state="visible", timeout=WAIT_MS)
    page.fill("#token", token)
    page.click("#login button[type=submit]")
    page.wait_for_selector('#sessions tbody tr[data-session="tenant-a"]', timeout=WAIT_MS)
    page.wait_for_selector("#expiring tbody tr[data-lead]", timeout=WAIT_MS)
    page.wait_for_selector("#failures tbody tr[data-lead]", timeout=WAIT_MS)
    return page


def test_the_dashboard_shows_a_scoped_token_its_own_and_buttons_only_to_an_operator(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", "--token", BOOT, database_url=database_url)
    with service.client(headers={"Authorization": f"Bearer {BOOT}"}) as http:
        for session in ("tenant-a", "tenant-b"):
            assert http.post(
                f"/sessions/{session}/leads", json={"leads": [{"payload": {}}] * 2}
            ).is_success
            leases = http.post("/lease", json={"session": session, "owner": "w", "max": 2})
            [_held, failing] = leases.json()["leases"]
            done = {"lead_id": failing["lead"]["id"], "token": failing["token"], "status": "failed"}
            assert http.post("/complete", json=done).is_success
        made = {
            role: http.post("/tokens", json={"role": role, "sessions": "tenant-a"}).json()["token"]
            for role in ("reader", "operator")
        }

    page = sign_in(browser, service.url, made["reader"])
    assert page.locator('#sessions tbody tr[data-session="tenant-b"]').count() == 0
    assert "tenant-b" not in page.locator("#main").inner_text()
    assert page.locator("#expiring button, #failures button").count() == 0

    page = sign_in(browser, service.url, made["operator"])
    assert "tenant-b" not in page.locator("#main").inner_text()
    assert page.locator('#expiring button[data-action="cancel"]').count() == 1
    assert page.locator('#failures button[data-action="retry"]').count() == 1
