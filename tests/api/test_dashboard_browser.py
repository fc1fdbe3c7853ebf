"""The dashboard in a real browser: headless Chromium (the system's) driven by Playwright.

Runs ``leaseq serve`` as a process, opens ``/dashboard``, and checks that the
page shows what ``/stats`` says, follows the queue as it moves, cancels and
retries leads, asks for the token when the service wants one, and shows the
autovacuum warning exactly when the server says ``autovacuum = off``. The page
must not reach anything but the service (it works offline). A screenshot is
kept in ``test-artifacts/dashboard.png``.

Chromium comes from the system (``tests.support.browser``); without it these tests
skip, saying what to install.
"""

from __future__ import annotations

import itertools
import json
import re
from typing import Any

import httpx
import psycopg
import pytest

from app.service.maintenance import AUTOVACUUM_OFF
from app.store.pool import libpq_url
from tests.api.test_api_docs import ELSEWHERE
from tests.support.browser import WAIT_MS, requests_of
from tests.support.scrapes import autovacuum_on
from tests.support.serving import ROOT, Services

pytestmark = pytest.mark.service

ARTIFACTS = ROOT / "test-artifacts"
SESSION = "crawl"
TOKEN = "dashboard-token"
AGE = "oldest_available_age_s"  # a reading of the clock: the page's and /stats' differ
NOT_COUNTS = (AGE, "paused_until", "blocked")  # blocked: within queued, not a column


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
        counts = {k: v for k, v in stats["sessions"][SESSION].items() if k not in NOT_COUNTS}
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
        wait_for_counts(page, SESSION, {k: v for k, v in now.items() if k not in NOT_COUNTS})

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


HOSTILE = '<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>'


def test_a_leads_page_its_ledger_the_session_search_and_retry_all_failed(
    services: Services, database_url: str, browser: Any
) -> None:
    """From the failures list to a lead's page and its ledger; a lead found by id; a session
    found among thousands; its failed leads replayed from its page. Hostile strings stay text."""
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO leads (session) SELECT 'tenant-' || g FROM generate_series(1, 3000) AS g"
        )
    with service.client() as http:
        pushed = http.post(
            f"/sessions/{SESSION}/leads",
            json={"leads": [{"payload": {"html": HOSTILE}, "key": HOSTILE}, {"payload": {}}]},
        )
        [failing_id, waiting_id] = pushed.json()["ids"]
        [failing] = lease(http, 1, owner=HOSTILE)
        body = {"lead_id": failing_id, "token": failing["token"], "status": "failed"}
        assert http.post("/complete", json={**body, "error": HOSTILE}).status_code == 200
        html = http.get("/dashboard").text
        assert ELSEWHERE.findall(html) == []  # the page names no other host

        page = browser.new_page(viewport={"width": 1200, "height": 900})
        asked = requests_of(page)
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
        page.goto(f"{service.url}/dashboard")

        # The failures list links to the lead's page: its values and its ledger.
        page.click(f'#failures tr[data-lead="{failing_id}"] a', timeout=WAIT_MS)
        page.wait_for_selector('#lead-events tr[data-event="completed"]', timeout=WAIT_MS)
        assert page.evaluate("location.hash") == f"#lead={failing_id}"
        assert page.locator("#overview").is_hidden() and page.locator("#lead-view").is_visible()
        rows = page.locator("#lead-events tbody tr")
        timeline = [
            (row.get_attribute("data-event"), row.locator("td.owner").inner_text())
            for row in rows.all()
        ]
        assert timeline == [("pushed", "\u2013"), ("leased", HOSTILE), ("completed", HOSTILE)]
        ledger = http.get(f"/leads/{failing_id}/events").json()["events"]
        assert rows.locator("td.at").all_inner_texts() == [e["at"] for e in ledger]
        assert page.locator("#lead-error").inner_text() == HOSTILE
        assert json.loads(page.locator("#lead-payload").inner_text()) == {"html": HOSTILE}
        assert page.locator("#lead-fields td.f-key").inner_text() == HOSTILE
        assert page.locator("#lead-fields td.f-owner").inner_text() == HOSTILE

        # A lead found by its id.
        page.fill("#find-lead-id", str(waiting_id))
        page.click("#find-lead button[type=submit]")
        page.wait_for_function(
            """(id) => document.getElementById("lead-id").textContent === String(id)
                && document.querySelectorAll("#lead-events tbody tr[data-event]").length === 1""",
            arg=waiting_id,
            timeout=WAIT_MS,
        )
        assert page.locator("#lead-status").inner_text() == "queued"
        page.fill("#find-lead-id", "9007199254740991")
        page.click("#find-lead button[type=submit]")
        page.wait_for_selector("#lead-missing", state="visible", timeout=WAIT_MS)
        assert page.locator("#lead-missing").inner_text() == "no lead 9007199254740991"

        # Back to every session: one among thousands is found by a part of its name.
        page.click("#back")
        page.wait_for_selector("#overview", state="visible", timeout=WAIT_MS)
        assert page.locator('#sessions tr[data-session="tenant-2999"]').count() == 0
        assert page.locator("#sessions tbody tr").count() == 100
        page.fill("#session-search", "TENANT-2999")
        page.wait_for_selector('#sessions tr[data-session="tenant-2999"]', timeout=WAIT_MS)
        page.wait_for_function(
            "() => document.querySelectorAll('#sessions tbody tr').length === 1", timeout=WAIT_MS
        )
        page.fill("#session-search", SESSION)
        page.click(f'#sessions tr[data-session="{SESSION}"] a', timeout=WAIT_MS)

        # The session's page replays its failed leads.
        page.wait_for_selector("#session-view", state="visible", timeout=WAIT_MS)
        page.wait_for_function(
            "() => document.querySelector('#session-counts td.n-failed')?.textContent === '1'",
            timeout=WAIT_MS,
        )
        page.click("#retry-failed")
        page.wait_for_function(
            "() => document.getElementById('retry-failed-result').textContent"
            " === '1 failed leads queued again'",
            timeout=WAIT_MS,
        )
        page.wait_for_function(
            "() => document.querySelector('#session-counts td.n-failed')?.textContent === '0'",
            timeout=WAIT_MS,
        )
        assert http.get(f"/leads/{failing_id}").json()["status"] == "queued"
        events = http.get(f"/leads/{failing_id}/events").json()["events"]
        assert events[-1]["event"] == "retried"

        # ... and pauses and resumes it (SPEC "Flow control": a button each).
        page.wait_for_function(
            "() => document.getElementById('session-paused').textContent === 'leasing'",
            timeout=WAIT_MS,
        )
        page.click("#pause-session")
        page.wait_for_function(
            "() => document.getElementById('session-paused').textContent"
            " === 'paused until resumed'",
            timeout=WAIT_MS,
        )
        assert http.get(f"/sessions/{SESSION}/settings").json()["paused_until"] is not None
        assert http.post("/lease", json={"session": SESSION, "owner": "w"}).json()["leases"] == []
        page.click("#resume-session")
        page.wait_for_function(
            "() => document.getElementById('session-paused').textContent === 'leasing'",
            timeout=WAIT_MS,
        )
        assert http.get(f"/sessions/{SESSION}/settings").json()["paused_until"] is None

        # Nothing hostile ran or became markup, and the page asked nobody but the service.
        assert dialogs == [] and page.evaluate("window.pwned") is None
        assert page.locator("main img, main script").count() == 0
        ARTIFACTS.mkdir(exist_ok=True)
        page.goto(f"{service.url}/dashboard#lead={failing_id}")
        page.wait_for_selector('#lead-events tr[data-event="retried"]', timeout=WAIT_MS)
        page.screenshot(path=str(ARTIFACTS / "dashboard-lead.png"), full_page=True)
        assert asked and all(url.startswith(service.url + "/") for url in asked), asked
