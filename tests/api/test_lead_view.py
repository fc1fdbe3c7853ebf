"""An operator's view of one lead and the replay of a session's dead letters, through a real
``leaseq serve``: ``GET /leads/{id}/events``, ``POST /sessions/{session}/retry-failed`` and the
dashboard data's ``search``.

Each test works in sessions of its own on the module's service (``service``); expiry is
driven by moving a lease's expiry into the past in the database, never by sleeping.
"""

from __future__ import annotations

import uuid
from typing import Any

import httpx
import psycopg
import pytest

from app.domain.timeline import MAX_EVENTS
from app.store.pool import libpq_url
from tests.api import shapes
from tests.support.serving import Service

pytestmark = pytest.mark.service

EVENT_KEYS = {"id", "event", "status", "attempt", "owner", "at", "expires_at"}
HOSTILE = '<img src=x onerror="alert(1)"><script>alert(2)</script>'
CROSS_SITE = ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"})


def fresh(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def push(client: httpx.AsyncClient, session: str, n: int, **lead: Any) -> list[int]:
    leads = [{"payload": {"i": i}, **lead} for i in range(n)]
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": leads})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


async def lease(client: httpx.AsyncClient, session: str, owner: str, n: int = 1) -> list[Any]:
    answer = await client.post("/lease", json={"session": session, "owner": owner, "max": n})
    leases: list[Any] = answer.json()["leases"]
    assert len(leases) == n, answer.text
    return leases


async def fail(client: httpx.AsyncClient, held: dict[str, Any], error: str = "boom") -> None:
    body = {"lead_id": held["lead"]["id"], "token": held["token"], "status": "failed"}
    answer = await client.post("/complete", json={**body, "error": error})
    assert answer.status_code == 200, answer.text


def events_of(answer: httpx.Response) -> list[dict[str, Any]]:
    """The shape of a ``/leads/{id}/events`` answer, checked; its events."""
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert set(body) == {"lead", "events", "earlier_events", "dependents"}
    shapes.lead(body["lead"])
    assert isinstance(body["earlier_events"], int) and body["earlier_events"] >= 0
    events: list[dict[str, Any]] = body["events"]
    for event in events:
        assert set(event) == EVENT_KEYS, event
        shapes.timestamp(event["at"])
        if event["expires_at"] is not None:
            shapes.timestamp(event["expires_at"])
    assert [e["id"] for e in events] == sorted(e["id"] for e in events)
    times = [shapes.timestamp(e["at"]) for e in events]
    assert times == sorted(times)  # the database clock, in the order written
    return events


async def test_a_leads_events_are_its_whole_ledger_in_order(service: Service, db_url: str) -> None:
    session = fresh("timeline")
    async with httpx.AsyncClient(base_url=service.url) as client:
        [lead_id] = await push(client, session, 1, max_attempts=3)
        [first] = await lease(client, session, owner=HOSTILE)
        async with await psycopg.AsyncConnection.connect(libpq_url(db_url)) as conn:
            await conn.execute(
                "UPDATE leads SET lease_expires_at = now() - interval '1 second' WHERE id = %s",
                [lead_id],
            )
            await conn.commit()
        swept = await client.post("/sweep", json={"session": session})
        assert swept.json() == {"requeued": 1, "failed": 0}
        [second] = await lease(client, session, owner="w2")
        released = {"lead_id": lead_id, "token": second["token"]}
        assert (await client.post("/release", json=released)).status_code == 200
        [third] = await lease(client, session, owner="w3")
        await fail(client, third, error=HOSTILE)
        assert (await client.post(f"/leads/{lead_id}/retry")).status_code == 200
        [fourth] = await lease(client, session, owner="w4")
        done = {"lead_id": lead_id, "token": fourth["token"], "result": {"html": HOSTILE}}
        assert (await client.post("/complete", json=done)).status_code == 200

        answer = await client.get(f"/leads/{lead_id}/events")
        events = events_of(answer)
        lead = answer.json()["lead"]
        assert (lead["status"], lead["attempts"], lead["result"]) == ("done", 4, {"html": HOSTILE})
        assert [(e["event"], e["status"], e["attempt"], e["owner"]) for e in events] == [
            ("pushed", "queued", 0, None),
            ("leased", "leased", 1, HOSTILE),
            ("expired", "queued", 1, HOSTILE),
            ("leased", "leased", 2, "w2"),
            ("released", "queued", 2, "w2"),
            ("leased", "leased", 3, "w3"),
            ("completed", "failed", 3, "w3"),
            ("retried", "queued", 3, "w3"),
            ("leased", "leased", 4, "w4"),
            ("completed", "done", 4, "w4"),
        ]
        # A lease says the expiry it was granted; an expiry the one the sweeper found.
        assert shapes.timestamp(events[1]["expires_at"]) == shapes.timestamp(first["expires_at"])
        assert shapes.timestamp(events[2]["expires_at"]) < shapes.timestamp(events[2]["at"])
        assert answer.json()["earlier_events"] == 0


async def test_a_lead_with_many_events_lists_the_newest(service: Service, db_url: str) -> None:
    session = fresh("long")
    async with httpx.AsyncClient(base_url=service.url) as client:
        [lead_id] = await push(client, session, 1)
        extra = MAX_EVENTS + 5
        async with await psycopg.AsyncConnection.connect(libpq_url(db_url)) as conn:
            await conn.execute(
                "INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at) "
                "SELECT %s, %s, 'released', 'queued', g, 'w', now() "
                "FROM generate_series(1, %s) AS g",
                [lead_id, session, extra],
            )
            await conn.commit()
        answer = await client.get(f"/leads/{lead_id}/events")
        events = events_of(answer)
        assert len(events) == MAX_EVENTS
        assert answer.json()["earlier_events"] == extra + 1 - MAX_EVENTS  # and its push
        assert events[-1]["attempt"] == extra  # the newest last


async def test_the_events_of_no_lead_are_refused(service: Service) -> None:
    async with httpx.AsyncClient(base_url=service.url) as client:
        shapes.problem(await client.get("/leads/9007199254740991/events"), 404, "not_found")
        for bad in ("0", "-1", "x", "9007199254740992"):
            shapes.problem(await client.get(f"/leads/{bad}/events"), 422, "validation_error")


async def test_retry_failed_requeues_every_failed_lead_of_the_session_and_nothing_else(
    service: Service,
) -> None:
    session, other = fresh("dead"), fresh("dead-other")
    async with httpx.AsyncClient(base_url=service.url) as client:
        await push(client, session, 6, max_attempts=1)
        [other_lead] = await push(client, other, 1)
        held = await lease(client, session, owner="w", n=5)
        for failing in held[:3]:
            await fail(client, failing)
        done = {"lead_id": held[3]["lead"]["id"], "token": held[3]["token"]}
        assert (await client.post("/complete", json=done)).status_code == 200
        assert (await client.post(f"/leads/{held[4]['lead']['id']}/cancel")).status_code == 200
        await fail(client, (await lease(client, other, owner="w"))[0])

        answer = await client.post(f"/sessions/{session}/retry-failed")
        assert answer.status_code == 200 and answer.json() == {"requeued": 4}  # 3 and the cancel
        stats = (await client.get(f"/sessions/{session}/stats")).json()
        shapes.counts(stats, queued=5, done=1)
        assert (await client.get(f"/leads/{other_lead}")).json()["status"] == "failed"
        for replayed in [*held[:3], held[4]]:
            lead_id = replayed["lead"]["id"]
            events = events_of(await client.get(f"/leads/{lead_id}/events"))
            assert [e["event"] for e in events][-1] == "retried"
            lead = (await client.get(f"/leads/{lead_id}")).json()
            shapes.lead(lead, status="queued", error=None, attempts=1, max_attempts=2)
        # The next lease of a replayed lead is a new attempt like any other.
        again = await lease(client, session, owner="w", n=5)
        assert sorted(x["attempt"] for x in again) == [1, 2, 2, 2, 2]
        assert (await client.post(f"/sessions/{session}/retry-failed")).json() == {"requeued": 0}
        report = (await client.get(f"/sessions/{session}/report")).json()
        assert (report["retried"], report["double_completions"]) == (4, 0)
        assert report["overlapping_leases"] == 0


async def test_retry_failed_refuses_cross_site_browsers_and_bad_names(service: Service) -> None:
    session = fresh("csrf")
    async with httpx.AsyncClient(base_url=service.url) as client:
        await push(client, session, 1)
        await fail(client, (await lease(client, session, owner="w"))[0])
        for headers in CROSS_SITE:
            refused = await client.post(f"/sessions/{session}/retry-failed", headers=headers)
            shapes.problem(refused, 403, "forbidden")
        shapes.counts((await client.get(f"/sessions/{session}/stats")).json(), failed=1)
        for bad in ("-x", "a" * 129, "a%20b"):
            refused = await client.post(f"/sessions/{bad}/retry-failed")
            shapes.problem(refused, 422, "validation_error")
        shapes.problem(
            await client.get(f"/sessions/{session}/retry-failed"), 405, "method_not_allowed"
        )
        same = {"Sec-Fetch-Site": "same-origin", "Origin": service.url}
        answer = await client.post(f"/sessions/{session}/retry-failed", headers=same)
        assert answer.json() == {"requeued": 1}


async def test_the_dashboard_data_searches_every_session(service: Service, db_url: str) -> None:
    """More sessions than the dashboard lists: a search finds any of them, in any case."""
    prefix = fresh("many")
    async with await psycopg.AsyncConnection.connect(libpq_url(db_url)) as conn:
        await conn.execute(
            "INSERT INTO leads (session) SELECT %s || '-' || g FROM generate_series(1, 150) AS g",
            [prefix],
        )
        await conn.commit()
    async with httpx.AsyncClient(base_url=service.url) as client:
        everything = (await client.get("/dashboard/data")).json()
        assert everything["hidden_sessions"] >= 50
        found = (await client.get("/dashboard/data", params={"search": f"{prefix}-149"})).json()
        assert [s["name"] for s in found["sessions"]] == [f"{prefix}-149"]
        assert found["hidden_sessions"] == 0 and found["sessions"][0]["queued"] == 1
        assert found["total"]["pending"] == everything["total"]["pending"]  # every session
        upper = (await client.get("/dashboard/data", params={"search": prefix.upper()})).json()
        assert len(upper["sessions"]) == 100 and upper["hidden_sessions"] == 50
        none = (await client.get("/dashboard/data", params={"search": "<no such>"})).json()
        assert none["sessions"] == [] and none["hidden_sessions"] == 0
        too_long = await client.get("/dashboard/data", params={"search": "a" * 129})
        shapes.problem(too_long, 422, "validation_error")


async def test_the_new_routes_are_in_the_openapi_document(service: Service) -> None:
    async with httpx.AsyncClient(base_url=service.url) as client:
        spec = (await client.get("/openapi.json")).json()
    events = spec["paths"]["/leads/{lead_id}/events"]["get"]["responses"]
    assert {"200", "404", "422", "503"} <= set(events)
    retry = spec["paths"]["/sessions/{session}/retry-failed"]["post"]
    assert {"200", "403", "422", "503"} <= set(retry["responses"])
    assert "requestBody" not in retry  # bodiless, as cancel and retry
    assert "application/problem+json" in retry["responses"]["403"]["content"]
    [search] = spec["paths"]["/dashboard/data"]["get"]["parameters"]
    assert search["name"] == "search" and search["in"] == "query"
