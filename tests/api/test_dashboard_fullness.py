"""How full each session is (docs/beyond.md#backpressure): its queued leads against the
``max_queued`` that binds it, its own or the service's, in the dashboard's data and, in a real
Chromium, as a bar and "queued / max" on the overview and on the session's page."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.support.browser import WAIT_MS
from tests.support.in_process import Serve
from tests.support.serving import Services


async def test_the_data_names_the_bound_of_each_session(serve: Serve) -> None:
    async with serve(max_queued=10) as client:
        await client.put("/sessions/own/settings", json={"max_queued": 4})
        for session, n in (("own", 3), ("default", 2)):
            leads: dict[str, Any] = {"leads": [{"payload": {}}] * n}
            assert (await client.post(f"/sessions/{session}/leads", json=leads)).is_success
        data = (await client.get("/dashboard/data")).json()
        lines = {s["name"]: s for s in data["sessions"]}
        assert data["max_queued_default"] == 10
        assert (lines["own"]["queued"], lines["own"]["queued_bound"]) == (3, 4)
        assert (lines["default"]["queued"], lines["default"]["queued_bound"]) == (2, 10)
        assert data["total"]["queued_bound"] is None


async def test_without_a_bound_the_data_names_none(client: httpx.AsyncClient) -> None:
    assert (await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})).is_success
    data = (await client.get("/dashboard/data")).json()
    assert data["max_queued_default"] is None
    assert data["sessions"][0]["queued_bound"] is None


def shown(page: Any, selector: str, expected: str) -> dict[str, Any]:
    """Wait until ``selector`` reads ``expected`` (the page polls on its own); its meter."""
    page.wait_for_function(
        """([selector, expected]) => {
            const node = document.querySelector(selector);
            return node !== null && node.textContent.trim() === expected;
        }""",
        arg=[selector, expected],
        timeout=WAIT_MS,
    )
    meter: dict[str, Any] = page.eval_on_selector(
        selector,
        """node => {
            const m = node.querySelector("meter");
            const warn = node.classList.contains("warn");
            return m === null ? {} : {value: m.value, max: m.max, warn};
        }""",
    )
    return meter


@pytest.mark.service
def test_the_overview_and_the_session_page_show_how_full_a_session_is(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start(database_url=database_url, env={"LEASEQ_MAX_QUEUED": "5"})
    with service.client() as http:
        assert http.put("/sessions/tight/settings", json={"max_queued": 2}).status_code == 200
        for session, n in (("tight", 2), ("roomy", 1)):
            pushed = http.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}] * n})
            assert pushed.status_code == 201, pushed.text
        refused = http.post("/sessions/tight/leads", json={"leads": [{"payload": {}}]})
        assert refused.status_code == 429
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.goto(f"{service.url}/dashboard")
        tight = shown(page, '#sessions tbody tr[data-session="tight"] td.full', "2 / 2")
        assert tight == {"value": 2, "max": 2, "warn": True}
        # Without its own bound, the service's LEASEQ_MAX_QUEUED binds it.
        roomy = shown(page, '#sessions tbody tr[data-session="roomy"] td.full', "1 / 5")
        assert roomy == {"value": 1, "max": 5, "warn": False}
        assert shown(page, "#total td.full", "\u2013") == {}
        page.screenshot(path=str(services.tmp_path / "fullness.png"), full_page=True)

        # Room frees as a lead is leased: the page follows.
        assert http.post("/lease", json={"session": "tight", "owner": "w"}).status_code == 200
        tight = shown(page, '#sessions tbody tr[data-session="tight"] td.full', "1 / 2")
        assert tight == {"value": 1, "max": 2, "warn": False}

        # The session's own page, opened directly (no overview drawn first).
        direct = browser.new_page(viewport={"width": 1400, "height": 900})
        direct.goto(f"{service.url}/dashboard#session=roomy")
        assert shown(direct, "#session-full", "1 / 5") == {"value": 1, "max": 5, "warn": False}
        # From the overview, the service's bound known already.
        page.goto(f"{service.url}/dashboard#session=tight")
        assert shown(page, "#session-full", "1 / 2") == {"value": 1, "max": 2, "warn": False}
        assert http.put("/sessions/tight/settings", json={"max_queued": None}).status_code == 200
        assert shown(page, "#session-full", "1 / 5") == {"value": 1, "max": 5, "warn": False}
