"""GET /metrics in one process: text that parses, and numbers that move with the queue."""

from __future__ import annotations

import httpx

from app import metrics
from leaseq.model import AllCounts, Counts
from tests.support.scrapes import Samples, samples, value


async def scrape(client: httpx.AsyncClient) -> Samples:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    return samples(response.text)


async def test_metrics_parse_and_move_with_the_leads(client: httpx.AsyncClient) -> None:
    before = await scrape(client)
    pushed = await client.post(
        "/sessions/m1/leads", json={"leads": [{"payload": {"i": i}} for i in range(3)]}
    )
    assert pushed.status_code == 201
    leased = (await client.post("/lease", json={"session": "m1", "owner": "w", "max": 2})).json()
    [first, second] = leased["leases"]
    await client.post(
        "/complete",
        json={"lead_id": first["lead"]["id"], "token": first["token"], "status": "cached"},
    )
    await client.post("/renew", json={"lead_id": second["lead"]["id"], "token": second["token"]})
    await client.post("/renew", json={"lead_id": second["lead"]["id"], "token": "stale"})
    await client.post("/sweep", json={"session": "m1"})

    after = await scrape(client)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    assert moved("leaseq_pushed_leads_total") == 3
    assert moved("leaseq_leases_total") == 2
    assert moved("leaseq_renewals_total") == 1
    assert moved("leaseq_lost_leases_total", operation="renew") == 1
    assert moved("leaseq_completions_total", status="cached") == 1
    assert moved("leaseq_sweeps_total", trigger="api") == 1
    assert value(after, "leaseq_leads", session="m1", status="queued") == 1
    assert value(after, "leaseq_leads", session="m1", status="leased") == 1
    assert value(after, "leaseq_leads", session="m1", status="cached") == 1
    assert value(after, "leaseq_db_pool_connections", state="size") >= 10
    assert value(after, "leaseq_db_pool_connections", state="checked_out") >= 0
    assert value(after, "leaseq_long_poll_waiters") == 0
    latency = ("leaseq_request_duration_seconds_count", "POST", "/sessions/{session}/leads")
    assert value(after, latency[0], method=latency[1], route=latency[2], status="201") >= 1
    assert not any(
        labels and dict(labels).get("route") == "/sessions/m1/leads" for _, labels in after
    )


def test_sessions_beyond_the_cap_are_summed_as_other() -> None:
    stats = AllCounts(
        sessions={f"s{i}": Counts(queued=i, done=1) for i in range(5)}, total=Counts()
    )
    family = metrics.leads_family(stats, max_sessions=3)
    by = {(s.labels["session"], s.labels["status"]): s.value for s in family.samples}
    assert {session for session, _ in by} == {"s4", "s3", "s2", metrics.OTHER_SESSIONS}
    assert by[(metrics.OTHER_SESSIONS, "queued")] == 1  # s0 and s1
    assert by[(metrics.OTHER_SESSIONS, "done")] == 2
