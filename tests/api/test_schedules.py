"""Schedules: PUT/GET/DELETE /schedules, and exactly one lead per tick on the database clock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest

from app.config import Settings
from app.domain.schedules import Schedules, tick_key
from app.store.pool import Database, libpq_url
from tests.api import shapes
from tests.support.in_process import Serve, runtime_of, until

T0 = datetime(2030, 1, 1, 0, 2, tzinfo=UTC)  # an injected "now": 2 past midnight
BODY: dict[str, Any] = {
    "session": "nightly",
    "cron": "*/5 * * * *",
    "timezone": "UTC",
    "lead": {"payload": {"job": "report"}, "priority": 3},
}


def leads_of(database_url: str, session: str) -> list[tuple[str, int, dict[str, Any]]]:
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT key, priority, payload FROM leads WHERE session = %s ORDER BY id", (session,)
        ).fetchall()
    return [(key, priority, payload) for key, priority, payload in rows]


async def test_put_get_list_delete(client: httpx.AsyncClient) -> None:
    put = await client.put("/schedules/report", json=BODY)
    assert put.status_code == 200, put.text
    schedule = put.json()
    assert {k: schedule[k] for k in ("name", "session", "cron", "timezone")} == {
        "name": "report",
        "session": "nightly",
        "cron": "*/5 * * * *",
        "timezone": "UTC",
    }
    assert schedule["lead"] == {"payload": {"job": "report"}, "priority": 3}
    next_tick = shapes.timestamp(schedule["next_tick"])
    assert next_tick.minute % 5 == 0 and next_tick.second == 0
    assert (await client.get("/schedules/report")).json() == schedule
    assert (await client.get("/schedules")).json() == {"schedules": [schedule]}

    deleted = await client.delete("/schedules/report")
    assert deleted.status_code == 204 and deleted.content == b""
    shapes.problem(await client.delete("/schedules/report"), 404, "not_found")
    shapes.problem(await client.get("/schedules/report"), 404, "not_found")
    assert (await client.get("/schedules")).json() == {"schedules": []}


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"cron": "*/5 * * *"}, "cron"),
        ({"cron": "61 * * * *"}, "cron"),
        ({"cron": "0 0 30 2 *"}, "cron"),
        ({"timezone": "Mars/Olympus_Mons"}, "timezone"),
        ({"timezone": "../etc/passwd"}, "timezone"),
        ({"session": "not a session"}, "session"),
        ({"lead": {"payload": {}, "key": "mine"}}, "key"),
        ({"lead": {"payload": [1]}}, "payload"),
        ({"lead": {"priority": 1}}, "payload"),
        ({"lead": {"payload": {}, "max_attempts": 0}}, "max_attempts"),
    ],
)
async def test_a_bad_schedule_is_422_and_stores_nothing(
    client: httpx.AsyncClient, change: dict[str, Any], named: str
) -> None:
    response = await client.put("/schedules/bad", json=BODY | change)
    problem = shapes.problem(response, 422, "validation_error")
    assert named in str(problem)
    assert (await client.get("/schedules")).json() == {"schedules": []}


async def test_each_tick_pushes_one_lead_on_the_injected_clock(
    db: Database, database_url: str
) -> None:
    schedules = Schedules(db)
    put = await schedules.put("report", "nightly", "*/5 * * * *", "UTC", BODY["lead"], now=T0)
    assert put.next_tick == T0.replace(minute=5)
    assert await schedules.tick(now=T0.replace(minute=4, second=59)) == []
    [tick] = await schedules.tick(now=T0.replace(minute=5))
    assert tick.tick == T0.replace(minute=5)
    assert await schedules.tick(now=T0.replace(minute=5, second=30)) == []
    assert (await schedules.get("report")).next_tick == T0.replace(minute=10)
    assert leads_of(database_url, "nightly") == [
        ("schedule:report:2030-01-01T00:05:00Z", 3, {"job": "report"})
    ]


async def test_two_processes_ticking_at_once_push_one_lead_per_tick(
    settings: Settings, database_url: str
) -> None:
    """Two pools (two API processes), eight tick calls at each instant from each: every tick
    of an hour of five-minute ticks is pushed exactly once."""
    async with (
        Database.from_settings(settings, database_url) as one,
        Database.from_settings(settings, database_url) as two,
    ):
        first, second = Schedules(one), Schedules(two)
        await first.put("report", "nightly", "*/5 * * * *", "UTC", BODY["lead"], now=T0)
        await second.put("other", "nightly", "*/10 * * * *", "UTC", {"payload": {}}, now=T0)
        pushed = []
        for minute in range(5, 65, 5):
            now = T0.replace(minute=0) + timedelta(minutes=minute, seconds=1)
            calls = [s.tick(now=now) for s in (first, second) for _ in range(8)]
            pushed.extend(t for ticks in await asyncio.gather(*calls) for t in ticks)
    keys = [key for key, _, _ in leads_of(database_url, "nightly")]
    assert len(keys) == len(set(keys)) == 12 + 6
    assert sorted(f"{t.name}:{t.tick:%H:%M}" for t in pushed) == sorted(
        [f"report:{m // 60:02d}:{m % 60:02d}" for m in range(5, 65, 5)]
        + [f"other:{m // 60:02d}:{m % 60:02d}" for m in range(10, 65, 10)]
    )


async def test_missed_ticks_push_only_the_latest_once(db: Database, database_url: str) -> None:
    schedules = Schedules(db)
    await schedules.put("report", "nightly", "*/5 * * * *", "UTC", BODY["lead"], now=T0)
    # No process ran from 00:05 to 01:03: twelve ticks missed; only 01:00 is pushed.
    later = T0.replace(hour=1, minute=3)
    [tick] = await schedules.tick(now=later)
    assert tick.tick == T0.replace(hour=1, minute=0)
    assert await schedules.tick(now=later) == []
    assert (await schedules.get("report")).next_tick == T0.replace(hour=1, minute=5)
    assert [key for key, _, _ in leads_of(database_url, "nightly")] == [
        tick_key("report", T0.replace(hour=1, minute=0))
    ]


async def test_a_time_zone_moves_the_ticks(db: Database) -> None:
    schedules = Schedules(db)
    winter = await schedules.put("paris", "s", "0 9 * * *", "Europe/Paris", {"payload": {}}, now=T0)
    assert winter.next_tick == datetime(2030, 1, 1, 8, 0, tzinfo=UTC)
    july = datetime(2030, 7, 1, tzinfo=UTC)
    summer = await schedules.put(
        "paris", "s", "0 9 * * *", "Europe/Paris", {"payload": {}}, now=july
    )
    assert summer.next_tick == datetime(2030, 7, 1, 7, 0, tzinfo=UTC)


async def test_two_api_processes_running_their_schedulers_push_one_lead(
    serve: Serve, database_url: str
) -> None:
    """The real loops of two API processes, on the database clock: a tick that has come is
    pushed once, by one of them."""
    async with serve() as one, serve() as two:
        # Once a year: no tick of its own comes during the test, only the one made due below.
        response = await one.put("/schedules/report", json=BODY | {"cron": "0 0 1 1 *"})
        assert response.status_code == 200
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            # A tick came a moment ago (as if the year had turned).
            conn.execute("UPDATE schedules SET next_tick = date_trunc('second', now())")
            await until(lambda: len(leads_of(database_url, "nightly")) >= 1, within_s=5)
            await asyncio.sleep(1.5)  # both loops have looked again meanwhile
        [(key, _, _)] = leads_of(database_url, "nightly")
        assert key.startswith("schedule:report:")
        assert runtime_of(two).schedules is not runtime_of(one).schedules
        after = (await two.get("/schedules/report")).json()
        assert shapes.timestamp(after["next_tick"]) > datetime.now(UTC)


async def test_a_tick_pushed_but_not_moved_on_is_found_by_its_key(
    db: Database, database_url: str
) -> None:
    """A process that pushed a tick's lead and stopped before moving the schedule on (or whose
    advance could not reach every node of a cluster): the next look pushes the tick again,
    finds its lead by the key, and moves on: one lead."""
    schedules = Schedules(db)
    await schedules.put("report", "nightly", "*/5 * * * *", "UTC", BODY["lead"], now=T0)
    tick = T0.replace(minute=5)
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        [(first,)] = conn.execute(
            "SELECT leaseq_push('nightly', '{\"x\": 1}'::jsonb, 0, %s)", (tick_key("report", tick),)
        ).fetchall()
    [ticked] = await schedules.tick(now=tick)
    assert ticked.lead_id == first
    assert [key for key, _, _ in leads_of(database_url, "nightly")] == [tick_key("report", tick)]
    assert (await schedules.get("report")).next_tick == T0.replace(minute=10)
    [later] = await schedules.tick(now=T0.replace(minute=10))
    assert leads_of(database_url, "nightly")[1:] == [
        (tick_key("report", later.tick), 3, {"job": "report"})
    ]
