"""Each session's share of the workers' time (docs/beyond.md#fair-share-by-time) and the workers
it calls for (docs/beyond.md#a-signal-to-scale-on), where an operator looks: ``/metrics``
(``leaseq_lease_seconds_per_second``, ``leaseq_suggested_workers``) and the dashboard's data
(each line's ``lease_seconds``, ``time_share`` and ``suggested_workers``).

The leases are held for known times on the injected database clock: one lead of ``long``
for 9 s, one of ``short`` for 3 s, both ended within the last minute, so ``long`` took
three quarters of the workers' time. A scoped token sees only its own sessions, and shares
among them. In a real Chromium (skipped without it, saying what to install), the overview's
"time share" and "workers" columns show the same.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import timedelta
from typing import Any

import httpx
import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.model import NewLead
from tests.api.test_dashboard_fullness import shown
from tests.support import leasing_of
from tests.support.in_process import Serve, runtime_of
from tests.support.scrapes import samples, value
from tests.support.serving import Services

HELD_S = {"long": 9.0, "short": 3.0}
WINDOW_S = 60.0
BOOT = "boot-token"


async def hold(client: httpx.AsyncClient, held_s: dict[str, float]) -> None:
    """Per session, two leads pushed and one of them leased at one instant of the database
    clock and completed ``held_s`` later, the last a second ago; the other stays queued."""
    await hold_in(runtime_of(client).queue, held_s)


async def hold_in(queue: Queue, held_s: dict[str, float]) -> None:
    start = await queue.db_now() - timedelta(seconds=max(held_s.values()) + 1)
    for session, seconds in held_s.items():
        await queue.push(session, [NewLead({}), NewLead({})], now=start)
        [lease] = await leasing_of(queue).lease_next(session, "w", now=start)
        await queue.complete(lease.lead.id, lease.token, now=start + timedelta(seconds=seconds))


async def test_the_metrics_and_the_dashboard_show_each_sessions_share(
    client: httpx.AsyncClient,
) -> None:
    await hold(client, HELD_S)

    scrape = samples((await client.get("/metrics")).text)
    rate = {
        name: value(scrape, "leaseq_lease_seconds_per_second", session=name)
        for name in ("long", "short", "*")
    }
    assert rate == pytest.approx({"long": 9 / WINDOW_S, "short": 3 / WINDOW_S, "*": 12 / WINDOW_S})
    assert rate["long"] / rate["*"] == pytest.approx(0.75)

    data = (await client.get("/dashboard/data")).json()
    lines = {s["name"]: s for s in data["sessions"]}
    assert lines["long"]["lease_seconds"] == pytest.approx(9.0)
    assert lines["short"]["lease_seconds"] == pytest.approx(3.0)
    assert lines["long"]["time_share"] == pytest.approx(0.75)
    assert lines["short"]["time_share"] == pytest.approx(0.25)
    assert data["total"]["lease_seconds"] == pytest.approx(12.0)
    assert data["total"]["time_share"] == pytest.approx(1.0)

    # The workers each calls for are the signal's, as GET /scaling answers them: one queued
    # lead each, and one lead a minute finished by one worker.
    signal = (await client.get("/scaling")).json()
    for name in HELD_S:
        assert lines[name]["suggested_workers"] == signal["sessions"][name]["suggested_workers"]
        assert lines[name]["suggested_workers"] == 1
        assert value(scrape, "leaseq_suggested_workers", session=name) == 1
    assert data["total"]["suggested_workers"] == signal["total"]["suggested_workers"] == 1


async def test_without_leases_that_ended_there_is_no_share(client: httpx.AsyncClient) -> None:
    assert (await client.post("/sessions/idle/leads", json={"leads": [{"payload": {}}]})).is_success
    data = (await client.get("/dashboard/data")).json()
    [line] = data["sessions"]
    assert (line["lease_seconds"], line["time_share"], line["suggested_workers"]) == (0.0, None, 1)
    assert (data["total"]["lease_seconds"], data["total"]["time_share"]) == (0.0, None)
    scrape = samples((await client.get("/metrics")).text)
    assert ("leaseq_lease_seconds_per_second", (("session", "idle"),)) in scrape
    assert value(scrape, "leaseq_lease_seconds_per_second", session="*") == 0


async def test_a_scoped_token_shares_among_its_own_sessions(serve: Serve) -> None:
    async with serve(api_tokens=BOOT) as client:
        await hold(client, {"a-long": 9.0, "a-short": 3.0, "b-other": 36.0})
        reader = await runtime_of(client).tokens.create("r", "reader", "a*")
        headers = {"Authorization": f"Bearer {reader.token}"}

        scrape = samples((await client.get("/metrics", headers=headers)).text)
        assert value(scrape, "leaseq_lease_seconds_per_second", session="*") == pytest.approx(
            12 / WINDOW_S
        )
        assert ("leaseq_lease_seconds_per_second", (("session", "b-other"),)) not in scrape

        data = (await client.get("/dashboard/data", headers=headers)).json()
        lines = {s["name"]: s for s in data["sessions"]}
        assert set(lines) == {"a-long", "a-short"}
        assert lines["a-long"]["time_share"] == pytest.approx(0.75)
        assert data["total"]["lease_seconds"] == pytest.approx(12.0)

        # The full token sees the third session, and every share of all three.
        everything = (
            await client.get("/dashboard/data", headers={"Authorization": f"Bearer {BOOT}"})
        ).json()
        shares = {s["name"]: s["time_share"] for s in everything["sessions"]}
        assert shares == pytest.approx({"a-long": 0.1875, "a-short": 0.0625, "b-other": 0.75})


async def hold_on(database_url: str, held_s: dict[str, float]) -> None:
    async with Database.from_settings(Settings(statement_timeout_ms=30_000), database_url) as db:
        await hold_in(Queue(db), held_s)


@pytest.mark.service
def test_the_overview_shows_each_sessions_share_and_workers(
    services: Services, database_url: str, browser: Any
) -> None:
    service = services.start(database_url=database_url)
    # Playwright's own loop runs in this thread: the queue's, in one of its own.
    with ThreadPoolExecutor(1) as aside:
        aside.submit(asyncio.run, hold_on(database_url, HELD_S)).result()
    page = browser.new_page(viewport={"width": 1600, "height": 900})
    page.goto(f"{service.url}/dashboard")
    for name, share in (("long", "75%"), ("short", "25%")):
        row = f'#sessions tbody tr[data-session="{name}"]'
        shown(page, f"{row} td.share", share)
        shown(page, f"{row} td.workers", "1")
        held = page.get_attribute(f"{row} td.share", "data-lease-seconds")
        assert held is not None and float(held) == pytest.approx(HELD_S[name])
    shown(page, "#total td.share", "100%")
    shown(page, "#total td.workers", "1")
    page.screenshot(path=str(services.tmp_path / "time-share.png"), full_page=True)
