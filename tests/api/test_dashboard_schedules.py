"""The dashboard lists the schedules with their next ticks: in its data, and on the page."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.api import shapes
from tests.support.serving import Services

WAIT_MS = 15_000


async def test_the_dashboard_data_lists_the_schedules(client: httpx.AsyncClient) -> None:
    body = {
        "session": "s",
        "cron": "0 9 * * 1",
        "timezone": "Europe/Paris",
        "lead": {"payload": {}},
    }
    put = (await client.put("/schedules/weekly", json=body)).json()
    data = (await client.get("/dashboard/data")).json()
    [shown] = data["schedules"]
    assert shown == {
        "name": "weekly",
        "session": "s",
        "cron": "0 9 * * 1",
        "timezone": "Europe/Paris",
        "next_tick": put["next_tick"],
    }
    assert shapes.timestamp(shown["next_tick"]).weekday() == 0  # a Monday


@pytest.mark.service
def test_the_page_shows_each_schedule_and_its_next_tick(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start(database_url=database_url)
    with service.client() as http:
        body = {"session": "s", "cron": "*/5 * * * *", "lead": {"payload": {}}}
        assert http.put("/schedules/every-five", json=body).status_code == 200
        page = browser.new_page(viewport={"width": 1200, "height": 900})
        page.goto(f"{service.url}/dashboard")
        row = page.wait_for_selector(
            '#schedules tbody tr[data-schedule="every-five"]', timeout=WAIT_MS
        )
        cells = row.query_selector_all("td")
        assert [c.text_content() for c in cells[:4]] == ["every-five", "s", "*/5 * * * *", "UTC"]
        assert cells[4].text_content()
        page.screenshot(path=str(services.tmp_path / "schedules.png"), full_page=True)
