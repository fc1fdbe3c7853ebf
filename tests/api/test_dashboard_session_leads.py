"""A session's page lists its leads in a real browser (the system's headless Chromium driven
by Playwright): status tabs, a search by error text, paging by the list's cursor, every view a
URL to share, and the leads selected retried or cancelled at once, all without typing a URL or
an id. A screenshot is kept in ``test-artifacts/dashboard-session-leads.png``.

Chromium comes from the system (``tests.support.browser``); without it this test skips,
saying what to install.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from app.store.pool import libpq_url
from tests.support.browser import WAIT_MS, requests_of
from tests.support.serving import ROOT, Services

pytestmark = pytest.mark.service

ARTIFACTS = ROOT / "test-artifacts"
SESSION = "crawl"
HOSTILE = '<img src=x onerror="alert(1)">'


def rows(page: Any) -> list[int]:
    ids = page.locator("#session-leads tbody tr[data-lead]").evaluate_all(
        "(rows) => rows.map((r) => Number(r.dataset.lead))"
    )
    return list(ids)


def loaded_after(page: Any, before: str | None) -> str:
    """Until the list is read again after ``before`` (its ``data-loaded``); the new mark."""
    page.wait_for_function(
        "(before) => { const t = document.getElementById('session-leads');"
        " return t.dataset.loaded && t.dataset.loaded !== before; }",
        arg=before,
        timeout=WAIT_MS,
    )
    mark: str = page.locator("#session-leads").get_attribute("data-loaded")
    return mark


def test_find_failed_leads_by_error_page_them_and_retry_twenty_at_once(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO leads (session, status, attempts, owner, error, key) "
            "SELECT %s, 'failed', 1, 'w' || (g %% 3), "
            "CASE WHEN g %% 4 = 0 THEN %s ELSE 'Disk full on /var' END, 'k' || g "
            "FROM generate_series(1, 80) AS g",
            [SESSION, HOSTILE],
        )
        conn.execute(
            "INSERT INTO leads (session, key) SELECT %s, 'q' || g FROM generate_series(1, 5) AS g",
            [SESSION],
        )
    with service.client() as http:
        disk = [
            lead["id"]
            for lead in http.get(
                f"/sessions/{SESSION}/leads", params={"error": "disk", "limit": 500}
            ).json()["leads"]
        ]
        assert len(disk) == 60

        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        asked = requests_of(page)
        page.goto(f"{service.url}/dashboard")
        # From the overview to the session's page by its link; then its failed leads' tab.
        page.click(f'#sessions tbody tr[data-session="{SESSION}"] a', timeout=WAIT_MS)
        mark = loaded_after(page, None)
        assert len(rows(page)) == 50  # every status, newest first, a page of 50
        page.click('#lead-tabs button[data-status="failed"]')
        mark = loaded_after(page, mark)
        assert (
            page.locator('#lead-tabs button[data-status="failed"]').get_attribute("aria-pressed")
            == "true"
        )

        # A search by error text, in any case, sent from the keyboard.
        page.fill("#filter-error", "DISK")
        page.press("#filter-error", "Enter")
        mark = loaded_after(page, mark)
        assert rows(page) == disk[:50]
        assert "error=DISK" in page.evaluate("location.hash")

        # The next page by its link; its URL opens the same page anywhere.
        page.click("#leads-next")
        mark = loaded_after(page, mark)
        assert rows(page) == disk[50:]
        assert page.locator("#leads-next").is_hidden()
        shared = page.url
        other = browser.new_page()
        other.goto(shared)
        loaded_after(other, None)
        assert rows(other) == disk[50:]
        other.close()
        page.click("#leads-first")
        mark = loaded_after(page, mark)
        assert rows(page) == disk[:50]

        # Twenty selected, retried at once: the page says so and the list follows.
        for lead_id in disk[:20]:
            page.check(f'#session-leads tr[data-lead="{lead_id}"] input[type=checkbox]')
        assert page.locator("#retry-selected").inner_text() == "retry selected (20)"
        page.click("#retry-selected")
        mark = loaded_after(page, mark)
        assert page.locator("#bulk-result").inner_text() == "20 of 20 leads queued again"
        assert rows(page) == disk[20:60][:50]
        for lead_id in disk[:20]:
            lead = http.get(f"/leads/{lead_id}").json()
            assert (lead["status"], lead["error"]) == ("queued", None)
        events = http.get(f"/leads/{disk[0]}/events").json()["events"]
        assert events[-1]["event"] == "retried"

        # The queued leads: the whole page selected and cancelled.
        page.click('#lead-tabs button[data-status="queued"]')
        mark = loaded_after(page, mark)
        assert page.input_value("#filter-error") == "DISK"  # the search stays with the tab
        page.fill("#filter-error", "")
        page.press("#filter-error", "Enter")
        mark = loaded_after(page, mark)
        assert len(rows(page)) == 25  # the 20 retried and the 5 pushed
        page.check("#select-page")
        page.click("#cancel-selected")
        mark = loaded_after(page, mark)
        assert page.locator("#bulk-result").inner_text() == "25 of 25 leads cancelled"
        assert rows(page) == []
        assert http.get(f"/sessions/{SESSION}/stats").json()["queued"] == 0

        # Hostile error text stays text.
        page.click('#lead-tabs button[data-status="failed"]')
        loaded_after(page, mark)
        assert HOSTILE in page.locator("#session-leads tbody").inner_text()
        assert page.locator("#session-leads img").count() == 0

        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-session-leads.png"), full_page=True)
        assert asked and all(url.startswith(service.url + "/") for url in asked), asked


def test_a_reader_lists_the_leads_but_is_offered_no_action(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start(
        "--sweep-interval", "3600", database_url=database_url, env={"LEASEQ_API_TOKENS": "boot"}
    )
    with service.client(headers={"Authorization": "Bearer boot"}) as http:
        made = http.post("/tokens", json={"role": "reader", "sessions": SESSION})
        assert made.status_code == 201, made.text
        reader = made.json()["token"]
        http.post(f"/sessions/{SESSION}/leads", json={"leads": [{"payload": {}}] * 3})
        page = browser.new_page()
        page.goto(f"{service.url}/dashboard#session={SESSION}")
        page.fill("#token", reader)
        page.press("#token", "Enter")
        loaded_after(page, None)
        assert len(rows(page)) == 3
        assert page.locator("#lead-bulk").is_hidden()
        assert page.locator("#session-leads tbody input[type=checkbox]:visible").count() == 0


def test_change_a_sessions_weight_and_pause_it_for_a_minute(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with service.client() as http:
        http.post(f"/sessions/{SESSION}/leads", json={"leads": [{"payload": {}}]})
        assert http.put(f"/sessions/{SESSION}/settings", json={"max_leased": 4}).status_code == 200
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"{service.url}/dashboard")
        page.click(f'#sessions tbody tr[data-session="{SESSION}"] a', timeout=WAIT_MS)
        page.wait_for_selector(f'#settings-form[data-session="{SESSION}"]', timeout=WAIT_MS)
        assert page.input_value('#settings-form input[name="max_leased"]') == "4"
        assert page.input_value('#settings-form input[name="weight"]') == "1"

        page.fill('#settings-form input[name="weight"]', "3")
        page.fill('#settings-form input[name="rate_per_s"]', "2.5")
        page.press('#settings-form input[name="weight"]', "Enter")
        page.wait_for_function(
            "() => document.getElementById('settings-result').textContent === 'saved'",
            timeout=WAIT_MS,
        )
        stored = http.get(f"/sessions/{SESSION}/settings").json()
        assert (stored["weight"], stored["max_leased"], stored["rate_per_s"]) == (3, 4, 2.5)

        page.fill("#pause-minutes", "1")
        page.press("#pause-minutes", "Enter")
        page.wait_for_function(
            "() => document.getElementById('session-paused').textContent.startsWith('paused until')"
            " && !document.getElementById('session-paused').textContent.endsWith('resumed')",
            timeout=WAIT_MS,
        )
        paused = http.get(f"/sessions/{SESSION}/settings").json()["paused_until"]
        assert paused is not None and not paused.startswith("9999")  # for a while, not for ever
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-session-settings.png"), full_page=True)


def graph(page: Any) -> tuple[dict[int, str], set[tuple[int, int]]]:
    """The lead graph's nodes (id: status) and edges (from, to), as drawn."""
    drawn = page.evaluate(
        """() => ({
            nodes: Array.from(document.querySelectorAll('#lead-graph g[data-lead]'))
                .map((g) => [Number(g.dataset.lead), g.dataset.status]),
            edges: Array.from(document.querySelectorAll('#lead-graph line'))
                .map((l) => [Number(l.dataset.from), Number(l.dataset.to)]),
        })"""
    )
    return dict(drawn["nodes"]), {(a, b) for a, b in drawn["edges"]}


def test_a_diamond_of_dependencies_on_a_leads_page(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with service.client() as http:

        def push(after: list[int]) -> int:
            answer = http.post(
                f"/sessions/{SESSION}/leads", json={"leads": [{"payload": {}, "after": after}]}
            )
            assert answer.status_code == 201, answer.text
            lead_id: int = answer.json()["ids"][0]
            return lead_id

        top = push([])
        left, right = push([top]), push([top])
        bottom = push([left, right])
        [held] = http.post("/lease", json={"session": SESSION, "owner": "w", "max": 1}).json()[
            "leases"
        ]
        assert held["lead"]["id"] == top
        done = {"lead_id": top, "token": held["token"], "status": "done"}
        assert http.post("/complete", json=done).status_code == 200
        diamond = {(top, left), (top, right), (left, bottom), (right, bottom)}

        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"{service.url}/dashboard")
        # From the session's row to its leads, to the bottom lead's page: no URL, no id typed.
        page.click(f'#sessions tbody tr[data-session="{SESSION}"] a', timeout=WAIT_MS)
        page.click(f'#session-leads tr[data-lead="{bottom}"] a', timeout=WAIT_MS)
        page.wait_for_selector(f'#lead-graph[data-lead="{bottom}"]', timeout=WAIT_MS)
        nodes, edges = graph(page)
        assert nodes == {top: "done", left: "queued", right: "queued", bottom: "queued"}
        assert edges == diamond

        # Up the graph by its own links: the top lead's page shows the same diamond below it.
        page.click(f'#lead-graph g[data-lead="{top}"] a')
        page.wait_for_selector(f'#lead-graph[data-lead="{top}"]', timeout=WAIT_MS)
        nodes, edges = graph(page)
        assert set(nodes) == {top, left, right, bottom} and edges == diamond
        centre = page.locator(f'#lead-graph g[data-lead="{top}"]').get_attribute("class")
        assert centre == "done center"
        ARTIFACTS.mkdir(exist_ok=True)
        page.screenshot(path=str(ARTIFACTS / "dashboard-lead-graph.png"), full_page=True)


def test_a_schedules_last_leads_and_its_delete(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(  # two ticks' leads, as the scheduler keys them, and one of another's
            "INSERT INTO leads (session, key) VALUES (%s, 'schedule:nightly:2026-12-06T00:00:00Z'),"
            " (%s, 'schedule:nightly:2026-12-07T00:00:00Z'), (%s, 'schedule:other:x')",
            [SESSION, SESSION, SESSION],
        )
    with service.client() as http:
        body = {"session": SESSION, "cron": "0 0 * * *", "lead": {"payload": {}}}
        assert http.put("/schedules/nightly", json=body).status_code == 200
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"{service.url}/dashboard")
        page.click("#schedules-link", timeout=WAIT_MS)
        row = '#schedules tbody tr[data-schedule="nightly"]'
        page.click(f"{row} a.schedule-leads", timeout=WAIT_MS)
        loaded_after(page, None)
        keys = page.locator("#session-leads tbody td.key").all_text_contents()
        assert keys == [
            "schedule:nightly:2026-12-07T00:00:00Z",
            "schedule:nightly:2026-12-06T00:00:00Z",
        ]
        page.go_back()
        page.click(f'{row} button[data-action="delete-schedule"]', timeout=WAIT_MS)
        page.wait_for_selector(row, state="detached", timeout=WAIT_MS)
        assert http.get("/schedules/nightly").status_code == 404
