"""An operator's dashboard in a real browser (the system's headless Chromium driven by
Playwright): a session's finished and failed leads per minute, the leads a tab and search
select retried or cancelled at once on every page, the schedules page with each schedule's
next ticks, and the issue's walk done by keyboard, with a screenshot of each page kept in
``test-artifacts/``.

Chromium comes from the system (``tests.support.browser``); without it these tests skip,
saying what to install.
"""

from __future__ import annotations

from typing import Any

import psycopg
import pytest

from app.store.pool import libpq_url
from tests.api.test_dashboard_session_leads import graph, loaded_after, rows
from tests.support.browser import WAIT_MS, requests_of
from tests.support.serving import ROOT, Services

pytestmark = pytest.mark.service

ARTIFACTS = ROOT / "test-artifacts"
SESSION = "crawl"
# The wait for an action on 10,050 leads (two calls of the bulk verb) on a shared machine:
# a deadline that only a stuck action misses.
ACTION_MS = 120_000
MAX_TABS = 400  # presses of Tab to reach an element before the walk counts as stuck


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"dashboard-{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 0


def tab_to(page: Any, selector: str, *, backward: bool = False) -> None:
    """Press Tab (Shift+Tab backward) until ``selector`` has the focus, as a keyboard user
    moves through the page."""
    key = "Shift+Tab" if backward else "Tab"
    for _ in range(MAX_TABS):
        if page.evaluate("(s) => document.activeElement.matches(s)", selector):
            return
        page.keyboard.press(key)
    raise AssertionError(f"{key} never reached {selector}")


def acted(page: Any) -> str:
    """Until an action on every matching lead ends (its buttons usable again); what it said."""
    page.wait_for_function(
        "() => !document.getElementById('retry-matching').disabled"
        " && document.getElementById('bulk-result').textContent !== ''",
        timeout=ACTION_MS,
    )
    said: str = page.locator("#bulk-result").inner_text()
    return said


def sql(database_url: str, statement: str, *params: Any) -> None:
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(statement, list(params))  # type: ignore[arg-type]


def test_a_sessions_page_draws_its_finished_and_failed_leads_per_minute(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    # One statement, one now(): the finished leads of a minute fall in the same minute.
    sql(
        database_url,
        "INSERT INTO leads (session, status, attempts, error, updated_at)"
        " SELECT s, st, 1, CASE WHEN st = 'failed' THEN 'boom' END, now() - ago::interval"
        " FROM (VALUES (%s, 'done', '90 seconds', 3), (%s, 'cached', '90 seconds', 1),"
        " (%s, 'failed', '10 minutes', 2),"
        " (%s, 'done', '2 hours', 4),"  # before the hour
        " ('other', 'done', '90 seconds', 5)) AS v (s, st, ago, n),"  # another session
        " generate_series(1, n)",
        SESSION,
        SESSION,
        SESSION,
        SESSION,
    )
    with service.client() as http:
        answer = http.get(f"/sessions/{SESSION}/throughput").json()
        completed, failed = answer["completed"], answer["failed"]
        assert len(completed) == len(failed) == 60
        assert (sum(completed), sum(failed)) == (4, 2)
        # The finished leads changed after the failed ones: nearer the end (now).
        [done_at] = [i for i, n in enumerate(completed) if n]
        [failed_at] = [i for i, n in enumerate(failed) if n]
        assert done_at > failed_at

        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        asked = requests_of(page)
        page.goto(f"{service.url}/dashboard")
        page.click(f'#sessions tbody tr[data-session="{SESSION}"] a', timeout=WAIT_MS)
        chart = page.wait_for_selector(
            f'#session-throughput[data-session="{SESSION}"]', timeout=WAIT_MS
        )
        drawn = [int(n) for n in chart.get_attribute("data-completed").split(",")]
        drawn_failed = [int(n) for n in chart.get_attribute("data-failed").split(",")]
        assert (sum(drawn), sum(drawn_failed)) == (4, 2) and len(drawn) == 60
        assert page.locator("#session-throughput rect.done").count() == 1
        assert page.locator("#session-throughput rect.failed").count() == 1
        summary = page.locator("#session-throughput-summary").inner_text()
        assert summary.startswith("last hour: 4 finished, 2 failed")
        shot(page, "session")
        # Offline: nothing but the service is asked (no chart library from a CDN).
        assert asked and all(url.startswith(service.url + "/") for url in asked), asked


def test_retry_and_cancel_every_lead_the_tab_and_search_select(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    failed = (
        "INSERT INTO leads (session, status, attempts, error)"
        " SELECT %s, 'failed', 1, %s FROM generate_series(1, %s)"
    )
    sql(database_url, failed, SESSION, "Disk full on /var", 10_050)  # more than one call's
    sql(database_url, failed, SESSION, "timeout", 30)
    queued = "INSERT INTO leads (session, key) SELECT %s, %s || g FROM generate_series(1, %s) g"
    sql(database_url, queued, SESSION, "batch-", 20)
    sql(database_url, queued, SESSION, "keep-", 5)
    with service.client() as http:
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"{service.url}/dashboard#session={SESSION}&status=failed")
        mark = loaded_after(page, None)
        page.fill("#filter-error", "disk")
        page.press("#filter-error", "Enter")
        mark = loaded_after(page, mark)
        assert len(rows(page)) == 50  # one page of 50 shown, 10,050 selected

        # Declined: nothing changes.
        page.once("dialog", lambda dialog: dialog.dismiss())
        page.click("#retry-matching")
        assert http.get(f"/sessions/{SESSION}/stats").json()["failed"] == 10_080

        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#retry-matching")
        assert acted(page) == "10050 matching leads queued again"
        mark = loaded_after(page, mark)
        assert rows(page) == []
        stats = http.get(f"/sessions/{SESSION}/stats").json()
        assert (stats["failed"], stats["queued"]) == (30, 10_050 + 25)

        # Every status, by key prefix: the 20 queued leads of the batch, not the others.
        page.click('#lead-tabs button[data-status=""]')
        mark = loaded_after(page, mark)
        page.fill("#filter-error", "")
        page.fill("#filter-key", "batch-")
        page.press("#filter-key", "Enter")
        mark = loaded_after(page, mark)
        page.once("dialog", lambda dialog: dialog.accept())
        page.click("#cancel-matching")
        assert acted(page) == "20 matching leads cancelled"
        loaded_after(page, mark)
        kept = http.get(f"/sessions/{SESSION}/leads", params={"key_prefix": "keep-"}).json()
        assert {lead["status"] for lead in kept["leads"]} == {"queued"}
        batch = http.get(f"/sessions/{SESSION}/leads", params={"key_prefix": "batch-"}).json()
        assert {(lead["status"], lead["error"]) for lead in batch["leads"]} == {
            ("failed", "cancelled")
        }


def test_a_reader_sees_the_throughput_and_schedules_but_no_action(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start(
        "--sweep-interval", "3600", database_url=database_url, env={"LEASEQ_API_TOKENS": "boot"}
    )
    with service.client(headers={"Authorization": "Bearer boot"}) as http:
        reader = http.post("/tokens", json={"role": "reader", "sessions": SESSION}).json()["token"]
        body = {"session": SESSION, "cron": "0 * * * *", "lead": {"payload": {}}}
        assert http.put("/schedules/hourly", json=body).status_code == 200
        other = {**body, "session": "other"}
        assert http.put("/schedules/elsewhere", json=other).status_code == 200
        denied = http.get(
            "/sessions/other/throughput", headers={"Authorization": f"Bearer {reader}"}
        )
        assert denied.status_code == 403

        page = browser.new_page()
        page.goto(f"{service.url}/dashboard#session={SESSION}")
        page.fill("#token", reader)
        page.press("#token", "Enter")
        page.wait_for_selector(f'#session-throughput[data-session="{SESSION}"]', timeout=WAIT_MS)
        loaded_after(page, None)
        assert page.locator("#retry-matching").is_hidden()
        assert page.locator("#cancel-matching").is_hidden()

        page.click("#to-schedules")
        page.wait_for_selector('#schedules tbody tr[data-schedule="hourly"]', timeout=WAIT_MS)
        assert page.locator('#schedules tbody tr[data-schedule="elsewhere"]').count() == 0
        assert page.locator('#schedules button[data-action="delete-schedule"]').count() == 0
        assert page.locator("#schedules td.next-ticks time").count() == 5


def test_the_operators_walk_by_keyboard_with_a_screenshot_of_each_page(
    services: Services, database_url: str, browser: Any
) -> None:
    """The issue's walk: find a session's failed leads by an error text, retry twenty at once,
    change its weight and pause it for a minute, see a diamond of dependencies on a lead's
    page, and the schedules: Tab, Shift+Tab, Enter, Space and typing only."""
    service = services.start("--sweep-interval", "3600", database_url=database_url)
    sql(
        database_url,
        "INSERT INTO leads (session, status, attempts, error)"
        " SELECT %s, 'failed', 1, CASE WHEN g %% 6 = 0 THEN 'timeout' ELSE 'Disk full' END"
        " FROM generate_series(1, 36) AS g",
        SESSION,
    )
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
        body = {"session": SESSION, "cron": "*/15 * * * *", "lead": {"payload": {}}}
        assert http.put("/schedules/quarterly", json=body).status_code == 200
        disk = [
            lead["id"]
            for lead in http.get(
                f"/sessions/{SESSION}/leads", params={"error": "disk full", "status": "failed"}
            ).json()["leads"]
        ]
        assert len(disk) == 30

        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"{service.url}/dashboard")
        page.wait_for_selector(f'#sessions tbody tr[data-session="{SESSION}"]', timeout=WAIT_MS)
        shot(page, "keyboard-overview")

        # The session's page from its row; its failed tab; a search by error text.
        tab_to(page, f'#sessions tbody tr[data-session="{SESSION}"] a')
        page.keyboard.press("Enter")
        mark = loaded_after(page, None)
        tab_to(page, '#lead-tabs button[data-status="failed"]')
        page.keyboard.press("Enter")
        mark = loaded_after(page, mark)
        tab_to(page, "#filter-error")
        page.keyboard.type("disk full")
        page.keyboard.press("Enter")
        mark = loaded_after(page, mark)
        assert rows(page) == disk

        # Twenty ticked with Space, retried with Enter.
        for lead_id in disk[:20]:
            tab_to(page, f'#session-leads tr[data-lead="{lead_id}"] input[type=checkbox]')
            page.keyboard.press("Space")
        assert page.locator("#retry-selected").inner_text() == "retry selected (20)"
        tab_to(page, "#retry-selected", backward=True)
        page.keyboard.press("Enter")
        mark = loaded_after(page, mark)
        assert page.locator("#bulk-result").inner_text() == "20 of 20 leads queued again"
        assert rows(page) == disk[20:]
        for lead_id in disk[:20]:
            assert http.get(f"/leads/{lead_id}").json()["status"] == "queued"

        # Its weight, then a pause of a minute.
        tab_to(page, '#settings-form input[name="weight"]', backward=True)
        page.keyboard.press("Control+A")
        page.keyboard.type("3")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.getElementById('settings-result').textContent === 'saved'",
            timeout=WAIT_MS,
        )
        assert http.get(f"/sessions/{SESSION}/settings").json()["weight"] == 3
        tab_to(page, "#pause-minutes")
        page.keyboard.type("1")
        page.keyboard.press("Enter")
        page.wait_for_function(
            "() => document.getElementById('session-paused')"
            ".textContent.startsWith('paused until')",
            timeout=WAIT_MS,
        )
        paused = http.get(f"/sessions/{SESSION}/settings").json()["paused_until"]
        assert paused is not None and not paused.startswith("9999")
        shot(page, "keyboard-session")

        # Every status, newest first: the diamond's bottom lead is the first; its page.
        tab_to(page, '#lead-tabs button[data-status=""]')
        page.keyboard.press("Enter")
        mark = loaded_after(page, mark)
        tab_to(page, "#filter-error")
        page.keyboard.press("Control+A")
        page.keyboard.press("Delete")
        page.keyboard.press("Enter")
        loaded_after(page, mark)
        assert rows(page)[0] == bottom
        tab_to(page, f'#session-leads tr[data-lead="{bottom}"] a')
        page.keyboard.press("Enter")
        page.wait_for_selector(f'#lead-graph[data-lead="{bottom}"]', timeout=WAIT_MS)
        nodes, edges = graph(page)
        assert set(nodes) == {top, left, right, bottom}
        assert edges == {(top, left), (top, right), (left, bottom), (right, bottom)}
        shot(page, "keyboard-lead")

        # The schedules page, from the tools.
        tab_to(page, "#to-schedules", backward=True)
        page.keyboard.press("Enter")
        page.wait_for_selector('#schedules tbody tr[data-schedule="quarterly"]', timeout=WAIT_MS)
        assert page.locator("#schedules td.next-ticks time").count() == 5
        shot(page, "keyboard-schedules")
