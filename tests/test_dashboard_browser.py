"""The dashboard in a real browser: headless Chromium (the system's) driven by Playwright.

Runs ``leaseq serve`` as a process, opens ``/dashboard``, and checks that the
page shows what ``/stats`` says, follows the queue as it moves, cancels and
retries leads, asks for the token when the service wants one, and shows the
autovacuum warning exactly when the server says ``autovacuum = off``. The page
must not reach anything but the service (it works offline). A screenshot is
kept in ``test-artifacts/dashboard.png``.

Chromium comes from the system (``tests.browser``); without it these tests
skip, saying what to install.
"""

from __future__ import annotations

import itertools
import re
from typing import Any

import httpx
import pytest

from app.service.maintenance import AUTOVACUUM_OFF
from tests.browser import WAIT_MS, requests_of
from tests.serving import ROOT, Services
from tests.test_autovacuum import autovacuum_on

pytestmark = pytest.mark.service

ARTIFACTS = ROOT / "test-artifacts"
SESSION = "crawl"
TOKEN = "dashboard-token"
AGE = "oldest_available_age_s"  # a reading of the clock: the page's and /stats' differ


def push(http: httpx.Client, n: int) -> list[int]:
    answer = http.post(
        f"/sessions/{SESSION}/leads", json={"leads": [{"payload": {"i": i}} for i in range(n)]}
    )
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


def lease(http: httpx.Client, n: int, owner: str) -> list[dict[str, Any]]:
    answer = http.post("/lease", json={"session": SESSION, "owner": owner, "max": n, "ttl_s": 120})
    leases: list[dict[str, Any]] = answer.json()["leases"]
    assert len(leases) == n
    return leases


def shown_counts(page: Any, session: str) -> dict[str, int]:
    row = page.locator(f'#sessions tbody tr[data-session="{session}"]')
    columns = ("queued", "leased", "done", "failed", "cached", "pending")
    return {c: int(row.locator(f"td.n-{c}").inner_text()) for c in columns}


def wait_for_counts(page: Any, session: str, expected: dict[str, int]) -> None:
    """Until the page's row of ``session`` shows ``expected`` (the page polls on its own)."""
    page.wait_for_function(
        """([session, expected]) => {
            const row = document.querySelector(`#sessions tbody tr[data-session="${session}"]`);
            if (!row) return false;
            return Object.entries(expected).every(
                ([k, v]) => row.querySelector(`td.n-${k}`).textContent === String(v));
        }""",
        arg=[session, expected],
        timeout=WAIT_MS,
    )


def assert_the_chart_has_a_time_axis(page: Any) -> None:
    """Ticks every 5 minutes, each labelled with its minutes ago and its clock time."""
    ticks = page.locator("#chart .x-axis text[data-minutes-ago]").all_text_contents()
    assert ticks == ["15 min ago", "10 min ago", "5 min ago", "now"]
    clocks = page.locator("#chart .x-axis text.clock").all_text_contents()
    minutes = [int(hh) * 60 + int(mm) for hh, mm in (clock.split(":") for clock in clocks)]
    assert len(minutes) == 4 and all(re.fullmatch(r"\d\d:\d\d", clock) for clock in clocks)
    assert [(b - a) % (24 * 60) for a, b in itertools.pairwise(minutes)] == [5, 5, 5], clocks


def assert_the_chart_fills_a_wide_window(page: Any) -> None:
    """In a wide window the chart spans the page's width, its bars and axis with it."""
    width = 1800
    page.set_viewport_size({"width": width, "height": 900})
    page.wait_for_function(
        "() => { const svg = document.getElementById('chart');"
        " return svg.viewBox.baseVal.width === svg.clientWidth; }",
        timeout=WAIT_MS,
    )
    shown = page.evaluate(
        """() => {
            const svg = document.getElementById('chart');
            const bars = svg.querySelectorAll('rect');
            const last = bars[bars.length - 1];
            return {
                page: document.documentElement.clientWidth,
                chart: svg.getBoundingClientRect().width,
                bars_end: last.x.baseVal.value + last.width.baseVal.value,
                drawn: svg.viewBox.baseVal.width,
            };
        }"""
    )
    assert shown["chart"] > 0.9 * shown["page"] and shown["page"] == width, shown
    assert shown["bars_end"] > shown["drawn"] - 2, shown


def test_the_dashboard_follows_the_queue_and_operates_on_leads(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with service.client() as http:
        push(http, 5)
        [done, held, failing] = lease(http, 3, owner="worker-7")
        http.post("/complete", json={"lead_id": done["lead"]["id"], "token": done["token"]})
        http.post(
            "/complete",
            json={
                "lead_id": failing["lead"]["id"],
                "token": failing["token"],
                "status": "failed",
                "error": "<img src=x> timed out",
            },
        )

        page = browser.new_page(viewport={"width": 1200, "height": 900})
        asked = requests_of(page)
        page.goto(f"{service.url}/dashboard")
        page.wait_for_selector(f'#sessions tbody tr[data-session="{SESSION}"]', timeout=WAIT_MS)

        stats = http.get("/stats").json()
        counts = {k: v for k, v in stats["sessions"][SESSION].items() if k != AGE}
        assert shown_counts(page, SESSION) == counts
        assert counts == {
            "queued": 2, "leased": 1, "done": 1, "failed": 1, "cached": 0, "pending": 3
        }  # fmt: skip
        row = page.locator(f'#sessions tbody tr[data-session="{SESSION}"]')
        assert row.locator("td.oldest").inner_text().endswith(" s")  # its oldest available lead
        assert row.locator("td.weight").inner_text() == "1"
        assert (
            row.locator("td.cap").inner_text() == row.locator("td.rate").inner_text() == "\u2013"
        )  # none: a dash
        total = page.locator("#total")
        assert total.locator("td.n-pending").inner_text() == str(stats["total"]["pending"])
        expiring = page.locator(f'#expiring tr[data-lead="{held["lead"]["id"]}"]')
        assert "worker-7" in expiring.inner_text()
        failure = page.locator(f'#failures tr[data-lead="{failing["lead"]["id"]}"]')
        assert "<img src=x> timed out" in failure.inner_text()  # shown as text, not markup
        assert page.locator("#failures img").count() == 0
        assert page.locator("#chart rect").count() == 15
        assert_the_chart_has_a_time_axis(page)

        # It follows the queue without a reload.
        push(http, 4)
        wait_for_counts(page, SESSION, {"queued": 6, "pending": 7})
        page.wait_for_function(
            "() => document.getElementById('chart').dataset.values.endsWith(',2')",
            timeout=WAIT_MS,
        )

        # Cancel the held lease from the page: it fails with "cancelled".
        page.click(f'#expiring button[data-action="cancel"][data-lead="{held["lead"]["id"]}"]')
        page.wait_for_selector(
            f'#failures button[data-action="retry"][data-lead="{held["lead"]["id"]}"]',
            timeout=WAIT_MS,
        )
        cancelled = http.get(f"/leads/{held['lead']['id']}").json()
        assert (cancelled["status"], cancelled["error"]) == ("failed", "cancelled")
        renewed = http.post("/renew", json={"lead_id": held["lead"]["id"], "token": held["token"]})
        assert renewed.json()["code"] == "lease_lost"

        # Retry the failed lead from the page: it is queued again.
        page.click(f'#failures button[data-action="retry"][data-lead="{failing["lead"]["id"]}"]')
        page.wait_for_selector(
            f'#failures tr[data-lead="{failing["lead"]["id"]}"]', state="detached", timeout=WAIT_MS
        )
        assert http.get(f"/leads/{failing['lead']['id']}").json()["status"] == "queued"
        now = http.get(f"/sessions/{SESSION}/stats").json()
        wait_for_counts(page, SESSION, {k: v for k, v in now.items() if k != AGE})

        # A session's settings show in its row: weight, leased against its cap, its rate.
        limits = {"weight": 3, "max_leased": 5, "rate_per_s": 2, "burst": 4}
        assert http.put(f"/sessions/{SESSION}/settings", json=limits).status_code == 200
        page.wait_for_function(
            """(session) => {
                const row = document.querySelector(`#sessions tbody tr[data-session="${session}"]`);
                return row && row.querySelector("td.weight").textContent === "3";
            }""",
            arg=SESSION,
            timeout=WAIT_MS,
        )
        assert row.locator("td.cap").inner_text() == f"{now['leased']} / 5"
        assert row.locator("td.rate").inner_text() == "2/s \u00d74"  # burst 4

        assert_the_chart_fills_a_wide_window(page)
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard.png"), full_page=True)
        assert (ARTIFACTS / "dashboard.png").stat().st_size > 0
        assert asked and all(url.startswith(service.url + "/") for url in asked), asked


def test_with_tokens_the_dashboard_asks_for_one_and_keeps_it(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start(
        "--sweep-interval", "3600", "--token", TOKEN, database_url=database_url
    )
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with service.client(headers=auth) as http:
        push(http, 3)
        [held] = lease(http, 1, owner="worker-1")

        page = browser.new_page()
        asked = requests_of(page)
        page.goto(f"{service.url}/dashboard")
        page.wait_for_selector("#login", state="visible", timeout=WAIT_MS)
        assert page.locator("#main").is_hidden()

        page.fill("#token", "wrong")
        page.click("#login button[type=submit]")
        page.wait_for_function(
            "() => document.getElementById('login-error').textContent.includes('refused')",
            timeout=WAIT_MS,
        )

        page.fill("#token", TOKEN)
        page.click("#login button[type=submit]")
        wait_for_counts(page, SESSION, {"queued": 2, "leased": 1, "pending": 3})
        assert page.evaluate("sessionStorage.getItem('leaseq-token')") == TOKEN

        # Kept for the tab: a reload does not ask again, and the page keeps up.
        page.reload()
        wait_for_counts(page, SESSION, {"queued": 2, "leased": 1})
        push(http, 1)
        wait_for_counts(page, SESSION, {"queued": 3, "pending": 4})

        page.click(f'#expiring button[data-action="cancel"][data-lead="{held["lead"]["id"]}"]')
        page.wait_for_selector(
            f'#failures button[data-action="retry"][data-lead="{held["lead"]["id"]}"]',
            timeout=WAIT_MS,
        )
        assert http.get(f"/leads/{held['lead']['id']}").json()["error"] == "cancelled"
        assert all(TOKEN not in url for url in asked)  # never in a URL


def test_the_page_shows_the_autovacuum_warning_when_the_server_says_off(
    services: Services, database_url: str, browser: Any
) -> None:
    enabled = autovacuum_on(database_url)
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    page = browser.new_page()
    page.goto(f"{service.url}/dashboard")
    page.wait_for_function("() => document.body.dataset.updated", timeout=WAIT_MS)
    warnings = page.locator("#warnings")
    if enabled:
        assert warnings.is_hidden()
        assert warnings.locator("li").count() == 0
    else:
        assert warnings.is_visible()
        assert warnings.locator("li").all_inner_texts() == [AUTOVACUUM_OFF]
