"""GET /leads/{id}?wait_s=n: held until the lead ends, woken by a NOTIFY through any process."""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import httpx
import psycopg
import pytest

from app.store.pool import libpq_url
from tests.api import shapes
from tests.support.in_process import POOLER_URL_ENV, Serve, listening, runtime_of, until

# Far longer than any wake-up by notification: a waiter answering well before it was woken.
WAIT_S = 20
# The re-check every waiter makes anyway, pushed out of the way so only a NOTIFY wakes one.
NO_POLL_S = 60.0


async def leased_lead(client: httpx.AsyncClient, session: str = "s") -> tuple[int, str]:
    pushed = await client.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}]})
    assert pushed.status_code == 201
    [lease] = (await client.post("/lease", json={"session": session, "owner": "w"})).json()[
        "leases"
    ]
    return lease["lead"]["id"], lease["token"]


async def outcome_waiters(client: httpx.AsyncClient, n: int) -> None:
    listener = runtime_of(client).listener
    await until(lambda: listener.outcome_waiters >= n, within_s=20)


async def complete(client: httpx.AsyncClient, lead_id: int, token: str, **body: Any) -> None:
    done = await client.post("/complete", json={"lead_id": lead_id, "token": token, **body})
    assert done.status_code == 200, done.text


async def test_wait_s_0_answers_at_once(client: httpx.AsyncClient) -> None:
    lead_id, _ = await leased_lead(client)
    started = time.monotonic()
    response = await client.get(f"/leads/{lead_id}", params={"wait_s": 0})
    assert time.monotonic() - started < WAIT_S / 4
    shapes.lead(response.json(), id=lead_id, status="leased")
    assert runtime_of(client).listener.outcome_waiters == 0


@pytest.mark.parametrize("wait_s", ["-1", "30.5", "31", "soon", "nan", "inf"])
async def test_a_bad_wait_s_is_422(client: httpx.AsyncClient, wait_s: str) -> None:
    lead_id, _ = await leased_lead(client)
    response = await client.get(f"/leads/{lead_id}?wait_s={wait_s}")
    problem = shapes.problem(response, 422, "validation_error")
    assert "wait_s" in str(problem)


async def test_an_unknown_lead_is_404_at_once(client: httpx.AsyncClient) -> None:
    response = await client.get("/leads/999999", params={"wait_s": WAIT_S})
    shapes.problem(response, 404, "not_found")


async def test_a_lead_already_ended_answers_at_once(client: httpx.AsyncClient) -> None:
    lead_id, token = await leased_lead(client)
    await complete(client, lead_id, token, status="cached", result={"n": 1})
    started = time.monotonic()
    response = await client.get(f"/leads/{lead_id}", params={"wait_s": WAIT_S})
    assert time.monotonic() - started < WAIT_S / 4
    shapes.lead(response.json(), id=lead_id, status="cached", result={"n": 1})


async def test_a_waiter_wakes_when_another_process_completes_the_lead(serve: Serve) -> None:
    """Two API processes on one database: the wait is held by one, the lead completed by the
    other; only the NOTIFY can wake the waiter well before its wait ends."""
    async with serve(poll_interval_s=NO_POLL_S) as one, serve(poll_interval_s=NO_POLL_S) as two:
        await listening(one)
        lead_id, token = await leased_lead(two)
        started = time.monotonic()
        waiting = asyncio.create_task(one.get(f"/leads/{lead_id}", params={"wait_s": WAIT_S}))
        await outcome_waiters(one, 1)
        await complete(two, lead_id, token, status="done", result={"ok": True})
        response = await asyncio.wait_for(waiting, timeout=WAIT_S)
        assert time.monotonic() - started < WAIT_S / 4
        shapes.lead(response.json(), id=lead_id, status="done", result={"ok": True})
        assert runtime_of(one).listener.outcome_waiters == 0


async def test_each_way_a_lead_ends_wakes_its_waiter(serve: Serve) -> None:
    """A release on the last attempt and an operator's cancel end a lead too."""
    async with serve(poll_interval_s=NO_POLL_S) as client:
        await listening(client)
        pushed = await client.post(
            "/sessions/s/leads",
            json={"leads": [{"payload": {}, "max_attempts": 1}, {"payload": {}}]},
        )
        last_attempt, queued = pushed.json()["ids"]
        [lease] = (await client.post("/lease", json={"session": "s", "owner": "w"})).json()[
            "leases"
        ]
        assert lease["lead"]["id"] == last_attempt
        waits = [
            asyncio.create_task(client.get(f"/leads/{i}", params={"wait_s": WAIT_S}))
            for i in (last_attempt, queued)
        ]
        await outcome_waiters(client, 2)
        started = time.monotonic()
        released = await client.post(
            "/release", json={"lead_id": last_attempt, "token": lease["token"]}
        )
        assert released.status_code == 200
        assert (await client.post(f"/leads/{queued}/cancel")).status_code == 200
        answers = await asyncio.wait_for(asyncio.gather(*waits), timeout=WAIT_S)
        assert time.monotonic() - started < WAIT_S / 4
        assert [a.json()["status"] for a in answers] == ["failed", "failed"]
        assert answers[1].json()["error"] == "cancelled"


async def test_a_wait_with_no_end_answers_the_lead_as_it_is(client: httpx.AsyncClient) -> None:
    lead_id, _ = await leased_lead(client)
    response = await client.get(f"/leads/{lead_id}", params={"wait_s": 0.5})
    shapes.lead(response.json(), id=lead_id, status="leased")
    assert runtime_of(client).listener.outcome_waiters == 0


async def test_a_lost_notification_is_made_up_by_the_re_check(serve: Serve) -> None:
    """No LISTEN at all (a listener that cannot connect): the waiter still answers the
    outcome, at its next look, within its wait."""
    async with serve(
        listen_database_url="postgresql://postgres@127.0.0.1:1/nowhere", poll_interval_s=0.2
    ) as client:
        lead_id, token = await leased_lead(client)
        waiting = asyncio.create_task(client.get(f"/leads/{lead_id}", params={"wait_s": WAIT_S}))
        await outcome_waiters(client, 1)
        assert not runtime_of(client).listener.connected
        started = time.monotonic()
        await complete(client, lead_id, token)
        response = await asyncio.wait_for(waiting, timeout=WAIT_S)
        assert time.monotonic() - started < WAIT_S / 4
        assert response.json()["status"] == "done"


async def test_500_waiters_hold_no_database_connection(serve: Serve, database_url: str) -> None:
    async with serve(pool_size=5, poll_interval_s=NO_POLL_S) as one, serve(pool_size=5) as two:
        await listening(one)
        leads = [await leased_lead(two, "many") for _ in range(5)]
        waits = [
            asyncio.create_task(one.get(f"/leads/{leads[i % 5][0]}", params={"wait_s": WAIT_S}))
            for i in range(500)
        ]
        await outcome_waiters(one, 500)
        db = runtime_of(one).db

        def watches() -> int:
            with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
                [(found,)] = conn.execute("SELECT count(*) FROM lead_waits").fetchall()
            return int(found)

        # A waiter counts once it waits; its watch is written by the next group of watches
        # (one statement at a time), so they are all there a moment later.
        await until(lambda: watches() == 500, within_s=20)
        await until(lambda: db.stats().checked_out == 0, within_s=20)
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            [(backends,)] = conn.execute(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
                "AND pid <> pg_backend_pid() AND backend_type = 'client backend' "
                "AND application_name NOT LIKE 'citus%'"  # a cluster's own, between its nodes
            ).fetchall()
        # Two pools of 5 and one LISTEN connection each, however many wait (through the
        # tests' PgBouncer, its own server connections instead: still nothing like 500).
        assert backends <= (5 + 5 + 2 if not os.environ.get(POOLER_URL_ENV) else 50)
        for lead_id, token in leads:
            await complete(two, lead_id, token)
        answers = await asyncio.wait_for(asyncio.gather(*waits), timeout=WAIT_S)
        assert {a.json()["status"] for a in answers} == {"done"}
        assert runtime_of(one).listener.outcome_waiters == 0
        with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
            await until(
                lambda: conn.execute("SELECT count(*) FROM lead_waits").fetchall() == [(0,)]
            )


async def test_waiters_beyond_the_bound_get_503(serve: Serve) -> None:
    async with serve(max_outcome_waiters=1) as client:
        lead_id, token = await leased_lead(client)
        held = asyncio.create_task(client.get(f"/leads/{lead_id}", params={"wait_s": WAIT_S}))
        await outcome_waiters(client, 1)
        refused = await client.get(f"/leads/{lead_id}", params={"wait_s": WAIT_S})
        shapes.problem(refused, 503, "unavailable")
        await complete(client, lead_id, token)
        assert (await asyncio.wait_for(held, WAIT_S)).json()["status"] == "done"
        # A lead that has ended needs no slot.
        assert (await client.get(f"/leads/{lead_id}", params={"wait_s": 1})).status_code == 200


def test_a_completion_notifies_only_when_someone_waits(database_url: str) -> None:
    """The trigger leads_ended: no NOTIFY while no one waits; with a watch, one per statement,
    naming the watched leads that ended."""
    url = libpq_url(database_url)
    with (
        psycopg.connect(url, autocommit=True) as listen,
        psycopg.connect(url, autocommit=True) as c,
    ):
        listen.execute("LISTEN leaseq_ended")
        c.execute(
            "INSERT INTO leads (session, status, lease_token, lease_expires_at, attempts) "
            "SELECT 's', 'leased', 't', now() + interval '1 hour', 1 FROM generate_series(1, 3)"
        )
        ids = [row[0] for row in c.execute("SELECT id FROM leads ORDER BY id")]
        ended = "UPDATE leads SET status = 'done', lease_expires_at = NULL WHERE id = ANY(%s)"
        c.execute(ended, ([ids[0]],))
        assert list(listen.notifies(timeout=0.3)) == []
        c.execute(
            "INSERT INTO lead_waits (id, lead_id, until) "
            "SELECT gen_random_uuid(), unnest(%s::bigint[]), now() + interval '1 minute'",
            ([ids[1], ids[1], 999_999],),
        )
        # A renewal (no lead ends) sends nothing, watched or not.
        c.execute("UPDATE leads SET updated_at = now() WHERE id = %s", (ids[1],))
        assert list(listen.notifies(timeout=0.3)) == []
        c.execute(ended, (ids[1:],))
        [notify] = list(listen.notifies(timeout=0.5))
        assert notify.payload == str(ids[1])
