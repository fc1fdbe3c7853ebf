"""Every endpoint through HTTP: its success answer in the contract's shape
(docs/contract.md#rest-api), and its refusals."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import httpx

from leaseq.model import NewLead
from tests.api import shapes
from tests.support import leasing_of
from tests.support.in_process import runtime_of


async def push(client: httpx.AsyncClient, session: str, *leads: dict[str, Any]) -> list[int]:
    response = await client.post(f"/sessions/{session}/leads", json={"leads": list(leads)})
    assert response.status_code == 201, response.text
    ids: list[int] = response.json()["ids"]
    return ids


async def lease_one(client: httpx.AsyncClient, session: str, **body: Any) -> dict[str, Any]:
    response = await client.post("/lease", json={"session": session, "owner": "w1", **body})
    assert response.status_code == 200, response.text
    [lease] = response.json()["leases"]
    return shapes.lease(lease)


# -- push ----------------------------------------------------------------------


async def test_push_answers_ids_created_and_duplicates(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/sessions/s1/leads",
        json={
            "leads": [
                {"payload": {"url": "a"}},
                {
                    "payload": {"url": "b"},
                    "priority": 3,
                    "key": "k",
                    "depth": 1,
                    "max_attempts": 2,
                    "delay_s": 0,
                },
                {"payload": {"url": "c"}, "key": "k"},
            ]
        },
    )
    assert response.status_code == 201
    body = response.json()
    assert set(body) == {"ids", "created", "duplicates"}
    first, second, third = body["ids"]
    assert (body["created"], body["duplicates"]) == (2, 1)
    assert third == second > first

    again = await client.post(
        "/sessions/s1/leads", json={"leads": [{"payload": {}, "key": "k", "parent_id": first}]}
    )
    assert again.status_code == 201
    assert again.json() == {"ids": [second], "created": 0, "duplicates": 1}

    lead = shapes.lead((await client.get(f"/leads/{second}")).json())
    assert lead == lead | {
        "session": "s1",
        "priority": 3,
        "payload": {"url": "b"},
        "key": "k",
        "status": "queued",
        "owner": None,
        "attempts": 0,
        "max_attempts": 2,
        "depth": 1,
        "parent_id": None,
        "result": None,
        "error": None,
    }


async def test_push_with_an_idempotency_key_pushes_once(client: httpx.AsyncClient) -> None:
    body = {"leads": [{"payload": {"n": 1}}, {"payload": {"n": 2}}]}
    once = {"Idempotency-Key": "push-7f3c"}
    first = await client.post("/sessions/s/leads", json=body, headers=once)
    again = await client.post("/sessions/s/leads", json=body, headers=once)
    assert first.status_code == again.status_code == 201
    assert again.json() == first.json() and first.json()["created"] == 2
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=2)

    other = await client.post("/sessions/s/leads", json={"leads": body["leads"][:1]}, headers=once)
    assert "Idempotency-Key" in shapes.problem(other, 422, "validation_error")["detail"]
    for bad in ("", "a b", "k" * 256):
        refused = await client.post(
            "/sessions/s/leads", json=body, headers={"Idempotency-Key": bad}
        )
        shapes.problem(refused, 422, "validation_error")
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=2)


async def test_lease_with_an_idempotency_key_gets_the_same_leases(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "s", {"payload": {}}, {"payload": {}}, {"payload": {}})
    body = {"session": "s", "owner": "w1", "max": 2, "ttl_s": 60}
    once = {"Idempotency-Key": "lease-1"}
    first = await client.post("/lease", json=body, headers=once)
    again = await client.post("/lease", json=body, headers=once)
    assert [x["token"] for x in again.json()["leases"]] == [
        x["token"] for x in first.json()["leases"]
    ]
    for item in again.json()["leases"]:
        shapes.lease(item, ttl_s=60, attempt=1)
    shapes.counts((await client.get("/sessions/s/stats")).json(), queued=1, leased=2)


# -- lease, renew, complete, release --------------------------------------------


async def test_lease_hands_out_highest_priority_first(client: httpx.AsyncClient) -> None:
    low, high = await push(client, "s", {"payload": {"n": 1}}, {"payload": {"n": 2}, "priority": 5})
    response = await client.post(
        "/lease", json={"session": "s", "owner": "w1", "max": 5, "ttl_s": 60, "wait_s": 0}
    )
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"leases"}
    leases = [shapes.lease(item, owner="w1", attempt=1) for item in body["leases"]]
    assert [item["lead"]["id"] for item in leases] == [high, low]
    expires = shapes.timestamp(leases[0]["expires_at"])
    now = await runtime_of(client).queue.db_now()
    assert timedelta(seconds=55) < expires - now <= timedelta(seconds=60)

    empty = await client.post("/lease", json={"session": "s", "owner": "w1"})
    assert empty.status_code == 200
    assert empty.json() == {"leases": []}


async def test_lease_without_ttl_uses_the_configured_default(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}}, {"payload": {}})
    lease = await lease_one(client, "s")
    now = await runtime_of(client).queue.db_now()
    assert shapes.timestamp(lease["expires_at"]) - now > timedelta(seconds=290)  # 300 s default
    assert lease["ttl_s"] == 300  # said in the answer: the worker times itself from it
    assert (await lease_one(client, "s", ttl_s=7))["ttl_s"] == 7


async def test_renew_extends_and_a_lost_lease_answers_409(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s", ttl_s=10)
    lead_id, token = lease["lead"]["id"], lease["token"]

    renewed = await client.post("/renew", json={"lead_id": lead_id, "token": token, "ttl_s": 600})
    assert renewed.status_code == 200
    assert set(renewed.json()) == {"expires_at", "ttl_s", "fence"}
    assert renewed.json()["ttl_s"] == 600
    assert shapes.timestamp(renewed.json()["expires_at"]) > shapes.timestamp(lease["expires_at"])
    default = await client.post("/renew", json={"lead_id": lead_id, "token": token})
    assert default.json()["ttl_s"] == 300

    wrong = await client.post("/renew", json={"lead_id": lead_id, "token": "not-the-token"})
    shapes.problem(wrong, 409, "lease_lost")


async def test_renew_batch_answers_in_the_order_given(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}}, {"payload": {}})
    a = await lease_one(client, "s")
    b = await lease_one(client, "s")
    response = await client.post(
        "/renew/batch",
        json={
            "items": [
                {"lead_id": b["lead"]["id"], "token": b["token"], "ttl_s": 100},
                {"lead_id": a["lead"]["id"], "token": "stale"},
                {"lead_id": a["lead"]["id"], "token": a["token"]},
            ]
        },
    )
    assert response.status_code == 200
    results = response.json()["results"]
    assert [set(r) for r in results] == [
        {"lead_id", "ok", "expires_at", "ttl_s", "fence"},
        {"lead_id", "ok", "code"},
        {"lead_id", "ok", "expires_at", "ttl_s", "fence"},
    ]
    assert (results[0]["ttl_s"], results[2]["ttl_s"]) == (100, 300)
    assert results[1] == {"lead_id": a["lead"]["id"], "ok": False, "code": "lease_lost"}
    assert [r["lead_id"] for r in results] == [b["lead"]["id"], a["lead"]["id"], a["lead"]["id"]]
    assert results[0]["ok"] and results[2]["ok"]
    shapes.timestamp(results[0]["expires_at"])


async def test_complete_finishes_once_and_a_retry_gets_the_same_answer(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s")
    body = {"lead_id": lease["lead"]["id"], "token": lease["token"], "result": {"rows": [1, 2]}}

    done = await client.post("/complete", json=body)
    assert done.status_code == 200
    assert set(done.json()) == {"lead"}
    shapes.lead(done.json()["lead"], status="done", result={"rows": [1, 2]}, owner="w1")

    # docs/contract.md#complete: the same lead, token and status again is answered as the first
    # (a lost answer) ...
    again = await client.post("/complete", json=body | {"result": {"other": True}})
    assert again.status_code == 200 and again.json() == done.json()
    # ... any other completion of the finished lead is lease_lost.
    other = body | {"status": "failed"}
    shapes.problem(await client.post("/complete", json=other), 409, "lease_lost")
    not_for_renew = await client.post("/renew", json=body | {"result": None})
    shapes.problem(not_for_renew, 422, "validation_error")


async def test_complete_as_failed_or_cached(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}}, {"payload": {}})
    a = await lease_one(client, "s")
    b = await lease_one(client, "s")
    failed = await client.post(
        "/complete",
        json={"lead_id": a["lead"]["id"], "token": a["token"], "status": "failed", "error": "boom"},
    )
    shapes.lead(failed.json()["lead"], status="failed", error="boom")
    cached = await client.post(
        "/complete", json={"lead_id": b["lead"]["id"], "token": b["token"], "status": "cached"}
    )
    shapes.lead(cached.json()["lead"], status="cached")
    shapes.counts((await client.get("/sessions/s/stats")).json(), failed=1, cached=1)


async def test_complete_batch_answers_in_the_order_given(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}}, {"payload": {}})
    a = await lease_one(client, "s")
    b = await lease_one(client, "s")
    response = await client.post(
        "/complete/batch",
        json={
            "items": [
                {"lead_id": a["lead"]["id"], "token": a["token"], "result": {"x": 1}},
                {"lead_id": b["lead"]["id"], "token": "stale", "status": "failed"},
                {"lead_id": b["lead"]["id"], "token": b["token"], "status": "cached"},
            ]
        },
    )
    assert response.status_code == 200
    assert response.json() == {
        "results": [
            {"lead_id": a["lead"]["id"], "ok": True},
            {"lead_id": b["lead"]["id"], "ok": False, "code": "lease_lost"},
            {"lead_id": b["lead"]["id"], "ok": True},
        ]
    }
    shapes.counts((await client.get("/sessions/s/stats")).json(), done=1, cached=1)


async def test_release_queues_the_lead_again(client: httpx.AsyncClient) -> None:
    [lead_id] = await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s")
    body = {"lead_id": lead_id, "token": lease["token"], "delay_s": 0}

    released = await client.post("/release", json=body)
    assert released.status_code == 200
    shapes.lead(released.json()["lead"], status="queued", attempts=1)
    shapes.problem(await client.post("/release", json=body), 409, "lease_lost")

    again = await lease_one(client, "s")
    assert (again["lead"]["id"], again["attempt"]) == (lead_id, 2)


async def test_release_on_the_last_attempt_fails_the_lead_saying_why(
    client: httpx.AsyncClient,
) -> None:
    [lead_id] = await push(client, "s", {"payload": {}, "max_attempts": 2})
    for attempt, status in ((1, "queued"), (2, "failed")):
        lease = await lease_one(client, "s")
        assert lease["attempt"] == attempt
        body = {"lead_id": lead_id, "token": lease["token"], "error": "disk full"}
        released = await client.post("/release", json=body)
        assert released.status_code == 200
        shapes.lead(released.json()["lead"], status=status, attempts=attempt)
    assert released.json()["lead"]["error"] == "released on attempt 2 of 2: disk full"
    assert (await client.post("/lease", json={"session": "s", "owner": "w1"})).json() == {
        "leases": []
    }


async def test_release_with_a_delay_hides_the_lead(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s")
    body = {"lead_id": lease["lead"]["id"], "token": lease["token"], "delay_s": 3600}
    assert (await client.post("/release", json=body)).status_code == 200
    empty = await client.post("/lease", json={"session": "s", "owner": "w1"})
    assert empty.json() == {"leases": []}


# -- sweep ---------------------------------------------------------------------


async def test_sweep_requeues_expired_leases_of_a_session_or_all(
    client: httpx.AsyncClient,
) -> None:
    await push(client, "a", {"payload": {}})
    await push(client, "b", {"payload": {}, "max_attempts": 1})
    a = await lease_one(client, "a", ttl_s=1)
    await lease_one(client, "b", ttl_s=1)
    nothing = await client.post("/sweep", json={"session": "a"})
    assert nothing.json() == {"requeued": 0, "failed": 0}

    # The leases expire on the database clock after a second.
    swept = await _sweep_until(client, {"session": "a"}, lambda total: total["requeued"] >= 1)
    assert swept == {"requeued": 1, "failed": 0}
    shapes.lead((await client.get(f"/leads/{a['lead']['id']}")).json(), status="queued")
    shapes.counts((await client.get("/sessions/b/stats")).json(), leased=1)

    swept = await _sweep_until(client, {"all": True}, lambda total: total["failed"] >= 1)
    assert swept == {"requeued": 0, "failed": 1}
    shapes.counts((await client.get("/sessions/b/stats")).json(), failed=1)


async def _sweep_until(
    client: httpx.AsyncClient, body: dict[str, Any], done: Callable[[dict[str, int]], bool]
) -> dict[str, int]:
    """POST /sweep, summing answers, until ``done`` (leases of ttl 1 s expire on their own)."""
    total = {"requeued": 0, "failed": 0}
    async with asyncio.timeout(5):
        while not done(total):
            response = await client.post("/sweep", json=body)
            assert response.status_code == 200
            total = {k: total[k] + v for k, v in response.json().items()}
            await asyncio.sleep(0.1)
    return total


# -- stats, report, leads --------------------------------------------------------


async def test_stats_per_session_and_all(client: httpx.AsyncClient) -> None:
    shapes.counts((await client.get("/sessions/nobody/stats")).json())
    await push(client, "a", {"payload": {}}, {"payload": {}})
    await push(client, "b", {"payload": {}})
    await lease_one(client, "a")

    shapes.counts((await client.get("/sessions/a/stats")).json(), queued=1, leased=1)
    body = (await client.get("/stats")).json()
    assert set(body) == {"sessions", "total"}
    assert set(body["sessions"]) == {"a", "b"}
    shapes.counts(body["sessions"]["a"], queued=1, leased=1)
    shapes.counts(body["sessions"]["b"], queued=1)
    shapes.counts(body["total"], queued=2, leased=1)


async def test_report_audits_the_ledger(client: httpx.AsyncClient) -> None:
    await push(client, "s", *({"payload": {"i": i}} for i in range(3)))
    done = await lease_one(client, "s")
    released = await lease_one(client, "s")
    expired = await lease_one(client, "s", ttl_s=1)
    await client.post("/complete", json={"lead_id": done["lead"]["id"], "token": done["token"]})
    await client.post(
        "/release", json={"lead_id": released["lead"]["id"], "token": released["token"]}
    )
    queue = runtime_of(client).queue
    await queue.sweep("s", now=await queue.db_now() + timedelta(seconds=5))
    assert expired["lead"]["id"] not in (done["lead"]["id"], released["lead"]["id"])

    response = await client.get("/sessions/s/report")
    assert response.status_code == 200
    assert response.json() == {
        "leads": 3,
        "pushed": 3,
        "leases": 3,
        "completed": 1,
        "completions": 1,
        "double_completions": 0,
        "overlapping_leases": 0,
        "wasted_attempts": 2,
        "expired": 1,
        "released": 1,
        "cancelled": 0,
        "retried": 0,
        "failed": 0,
        "attempts_per_lead": {"1": 3},
        "owners": [{"owner": "w1", "leases": 3, "completions": 1, "wasted": 2}],
    }
    empty = (await client.get("/sessions/other/report")).json()
    assert empty.pop("attempts_per_lead") == {}
    assert empty.pop("owners") == []
    assert set(empty.values()) == {0}


async def test_get_lead_and_unknown_lead(client: httpx.AsyncClient) -> None:
    [lead_id] = await push(client, "s", {"payload": {"a": [1, {"b": None}]}, "key": "x"})
    response = await client.get(f"/leads/{lead_id}")
    assert response.status_code == 200
    shapes.lead(response.json(), id=lead_id, payload={"a": [1, {"b": None}]}, key="x")

    lease = await lease_one(client, "s")
    leased = shapes.lead((await client.get(f"/leads/{lead_id}")).json(), status="leased")
    assert lease["token"] not in str(leased)

    shapes.problem(await client.get(f"/leads/{lead_id + 1000}"), 404, "not_found")


async def test_cancel_fails_a_lead_and_its_lease_is_lost(client: httpx.AsyncClient) -> None:
    [lead_id, queued_id] = await push(client, "s", {"payload": {}}, {"payload": {}})
    lease = await lease_one(client, "s")
    assert lease["lead"]["id"] == lead_id

    cancelled = await client.post(f"/leads/{lead_id}/cancel")
    assert cancelled.status_code == 200
    shapes.lead(cancelled.json(), status="failed", error="cancelled")
    body = {"lead_id": lead_id, "token": lease["token"]}
    shapes.problem(await client.post("/renew", json=body), 409, "lease_lost")
    shapes.problem(await client.post("/complete", json=body), 409, "lease_lost")

    shapes.lead((await client.post(f"/leads/{queued_id}/cancel")).json(), status="failed")
    shapes.problem(await client.post(f"/leads/{lead_id}/cancel"), 409, "conflict")
    shapes.problem(await client.post("/leads/999999/cancel"), 404, "not_found")


async def test_retry_replays_a_failed_lead_only(client: httpx.AsyncClient) -> None:
    [lead_id] = await push(client, "s", {"payload": {}})
    shapes.problem(await client.post(f"/leads/{lead_id}/retry"), 409, "conflict")
    lease = await lease_one(client, "s")
    await client.post(
        "/complete", json={"lead_id": lead_id, "token": lease["token"], "status": "failed"}
    )

    retried = await client.post(f"/leads/{lead_id}/retry")
    assert retried.status_code == 200
    shapes.lead(retried.json(), status="queued", error=None)
    again = await lease_one(client, "s")
    assert (again["lead"]["id"], again["attempt"]) == (lead_id, 2)
    shapes.problem(await client.post("/leads/999999/retry"), 404, "not_found")


# -- probes, metrics, dashboard, openapi ---------------------------------------------


async def test_healthz_and_readyz(client: httpx.AsyncClient) -> None:
    health = await client.get("/healthz")
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    ready = await client.get("/readyz")
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})


async def test_metrics_count_the_queue_operations(client: httpx.AsyncClient) -> None:
    await push(client, "s", {"payload": {}})
    lease = await lease_one(client, "s")
    await client.post("/renew", json={"lead_id": lease["lead"]["id"], "token": "stale"})
    await client.post("/complete", json={"lead_id": lease["lead"]["id"], "token": lease["token"]})

    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    text = response.text
    for name in (
        "leaseq_leases_total ",
        "leaseq_renewals_total ",
        'leaseq_lost_leases_total{operation="renew"} ',
        'leaseq_completions_total{status="done"} ',
        'leaseq_sweeps_total{trigger="boot"} ',
        "leaseq_long_poll_waiters ",
        'leaseq_request_duration_seconds_count{method="POST",route="/lease",status="200"} ',
        'route="/sessions/{session}/leads"',
    ):
        assert name in text, name


async def test_dashboard_shell_and_its_data(client: httpx.AsyncClient) -> None:
    response = await client.get("/dashboard")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert "dashboard/data" in response.text
    assert "<script src" not in response.text  # everything inline: works offline

    await push(client, "crawl-1", *({"payload": {"i": i}} for i in range(4)))
    await push(client, "crawl-2", {"payload": {}})
    done = await lease_one(client, "crawl-1")
    held = await lease_one(client, "crawl-1", ttl_s=60)
    failed = await lease_one(client, "crawl-1")
    await client.post("/complete", json={"lead_id": done["lead"]["id"], "token": done["token"]})
    await client.post(
        "/complete",
        json={
            "lead_id": failed["lead"]["id"],
            "token": failed["token"],
            "status": "failed",
            "error": "<b>boom</b>",
        },
    )

    found = (await client.get("/dashboard/data")).json()
    stats = (await client.get("/stats")).json()
    by_name = {s["name"]: s for s in found["sessions"]}
    assert set(by_name) == {"crawl-1", "crawl-2"}
    age = shapes.AGE  # read a moment apart: the same lead, older
    for name, view in by_name.items():
        counts = {k: view[k] for k in stats["sessions"][name] if k != age}
        assert counts == {k: v for k, v in stats["sessions"][name].items() if k != age}
        assert (view[age] is None) == (stats["sessions"][name][age] is None)
    assert {k: found["total"][k] for k in stats["total"] if k != age} == {
        k: v for k, v in stats["total"].items() if k != age
    }
    assert sum(by_name["crawl-1"]["completed_per_minute"]) == 2
    assert found["total"]["completed_per_minute"][-1] == 2
    assert by_name["crawl-1"]["oldest_available_age_s"] >= 0
    assert by_name["crawl-1"]["weight"] == 1 and by_name["crawl-1"]["max_leased"] is None
    assert [(e["lead_id"], e["owner"], e["attempt"]) for e in found["expiring"]] == [
        (held["lead"]["id"], "w1", 1)
    ]
    assert 0 < found["expiring"][0]["expires_in_s"] <= 60
    [failure] = found["failures"]
    assert (failure["lead_id"], failure["error"]) == (failed["lead"]["id"], "<b>boom</b>")


async def test_cancel_and_retry_refuse_cross_site_browsers(client: httpx.AsyncClient) -> None:
    [lead_id] = await push(client, "s", {"payload": {}})
    for headers in ({"Sec-Fetch-Site": "cross-site"}, {"Origin": "https://evil.example"}):
        refused = await client.post(f"/leads/{lead_id}/cancel", headers=headers)
        shapes.problem(refused, 403, "forbidden")
        shapes.problem(
            await client.post(f"/leads/{lead_id}/retry", headers=headers), 403, "forbidden"
        )
    assert (await client.get(f"/leads/{lead_id}")).json()["status"] == "queued"
    same = {"Sec-Fetch-Site": "same-origin", "Origin": "http://leaseq.test"}
    assert (await client.post(f"/leads/{lead_id}/cancel", headers=same)).status_code == 200
    assert (await client.post(f"/leads/{lead_id}/retry")).status_code == 200  # no browser


async def test_openapi_describes_every_route_with_its_limits(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    assert set(spec["paths"]) == {
        "/sessions/{session}/leads",
        "/sessions/{session}/pushes/{key}",
        "/sessions/{session}/leads/retry",
        "/sessions/{session}/leads/cancel",
        "/sessions/{session}/throughput",
        "/lease",
        "/renew",
        "/renew/batch",
        "/complete",
        "/complete/batch",
        "/release",
        "/sweep",
        "/sessions/{session}/stats",
        "/stats",
        "/sessions/{session}/scaling",
        "/scaling",
        "/sessions/{session}/report",
        "/sessions/{session}/settings",
        "/leads/{lead_id}",
        "/leads/{lead_id}/cancel",
        "/leads/{lead_id}/retry",
        "/leads/{lead_id}/events",
        "/sessions/{session}/retry-failed",
        "/sessions/{session}/pause",
        "/sessions/{session}/resume",
        "/healthz",
        "/readyz",
        "/metrics",
        "/dashboard",
        "/dashboard/data",
        "/tokens",
        "/tokens/{name}",
        "/tokens/self",
        "/schedules",
        "/schedules/{name}",
    }
    lead = spec["paths"]["/leads/{lead_id}"]["get"]["parameters"]
    [wait_s] = [p for p in lead if p["name"] == "wait_s"]
    assert (wait_s["schema"]["minimum"], wait_s["schema"]["maximum"]) == (0, 30)
    assert set(spec["paths"]["/schedules/{name}"]) == {"put", "get", "delete"}
    lease_in = spec["components"]["schemas"]["LeaseIn"]["properties"]
    assert (lease_in["max"]["minimum"], lease_in["max"]["maximum"]) == (1, 100)
    assert lease_in["wait_s"]["maximum"] == 30
    push_in = spec["components"]["schemas"]["PushIn"]["properties"]["leads"]
    assert push_in["maxItems"] == 1000
    assert "lease_token" not in str(spec["components"]["schemas"]["LeadOut"])
    renew = spec["paths"]["/renew"]["post"]["responses"]
    assert "application/problem+json" in renew["409"]["content"]
    assert (await client.get("/docs")).status_code == 200


async def test_dashboard_data_ignores_events_stamped_in_the_future(
    client: httpx.AsyncClient,
) -> None:
    """Tests inject a clock: events at a later instant stay off the chart instead of breaking it."""
    queue = runtime_of(client).queue
    later = await queue.db_now() + timedelta(hours=1)
    await queue.push("future", [NewLead({})], now=later)
    [lease] = await leasing_of(queue).lease_next("future", "w", now=later)
    await queue.complete(lease.lead.id, lease.token, now=later)
    found = (await client.get("/dashboard/data")).json()
    assert found["total"]["done"] == 1
    assert sum(found["total"]["completed_per_minute"]) == 0
