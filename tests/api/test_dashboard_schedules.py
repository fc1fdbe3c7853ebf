"""The dashboard lists the schedules with their next ticks: in its data, and on the page."""

from __future__ import annotations

from itertools import pairwise
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
        "next_ticks": shown["next_ticks"],
    }
    assert shapes.timestamp(shown["next_tick"]).weekday() == 0  # a Monday
    # The next five, a week apart, the first the one due.
    ticks = [shapes.timestamp(tick) for tick in shown["next_ticks"]]
    assert shown["next_ticks"][0] == put["next_tick"] and len(ticks) == 5
    assert all(round((b - a).total_seconds() / 86400) == 7 for a, b in pairwise(ticks))


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
        page.click("#schedules-link", timeout=WAIT_MS)
        row = page.wait_for_selector(
            '#schedules tbody tr[data-schedule="every-five"]', timeout=WAIT_MS
        )
        cells = row.query_selector_all("td")
        assert [c.text_content() for c in cells[:4]] == ["every-five", "s", "*/5 * * * *", "UTC"]
        ticks = row.query_selector_all("td.next-ticks time")
        assert len(ticks) == 5  # the next five, each its instant in UTC
        instants = [t.get_attribute("datetime") for t in ticks]
        assert instants == sorted(instants) and len(set(instants)) == 5
        assert all(int(i[14:16]) % 5 == 0 and i.endswith(":00Z") for i in instants)
        page.screenshot(path=str(services.tmp_path / "schedules.png"), full_page=True)
