"""The signal to scale on (docs/beyond.md#a-signal-to-scale-on): a session's backlog, the leads
it holds, its oldest available age, its completions per second over the last minute and the
workers it calls for; the fleet's; in /metrics; bad targets refused."""

from __future__ import annotations

import math

import httpx
import pytest

from leaseq import AsyncClient, InvalidInput
from tests.support.in_process import BASE_URL
from tests.support.scrapes import samples, value


async def test_a_sessions_signal(client: httpx.AsyncClient) -> None:
    await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}] * 10})
    leases = (await client.post("/lease", json={"session": "s", "owner": "w", "max": 2})).json()
    first = leases["leases"][0]
    await client.post("/complete", json={"lead_id": first["lead"]["id"], "token": first["token"]})
    answer = await client.get("/sessions/s/scaling", params={"target_wait_s": 30})
    assert answer.status_code == 200, answer.text
    signal = answer.json()
    assert set(signal) == {
        "session",
        "backlog",
        "leased",
        "oldest_available_age_s",
        "completions_per_s",
        "suggested_workers",
    }
    assert (signal["session"], signal["backlog"], signal["leased"]) == ("s", 8, 1)
    assert signal["oldest_available_age_s"] >= 0
    assert signal["completions_per_s"] == pytest.approx(1 / 60)
    # One worker finished one lead a minute: 9 leads in 30 s want more than there are leads.
    assert signal["suggested_workers"] == 9
    patient = (await client.get("/sessions/s/scaling", params={"target_wait_s": 3600})).json()
    assert patient["suggested_workers"] == math.ceil(9 / (1 / 60 * 3600))


async def test_an_idle_session_asks_for_no_worker(client: httpx.AsyncClient) -> None:
    signal = (await client.get("/sessions/idle/scaling")).json()
    assert signal == {
        "session": "idle",
        "backlog": 0,
        "leased": 0,
        "oldest_available_age_s": None,
        "completions_per_s": 0.0,
        "suggested_workers": 0,
    }


@pytest.mark.parametrize("bad", ["0", "-1", "abc", "1e9", "nan"])
async def test_a_bad_target_is_refused(client: httpx.AsyncClient, bad: str) -> None:
    for path in ("/sessions/s/scaling", "/scaling"):
        answer = await client.get(path, params={"target_wait_s": bad})
        assert answer.status_code == 422, (path, bad, answer.text)
        assert answer.json()["code"] == "validation_error"


async def test_the_fleets_signal_and_the_metrics(client: httpx.AsyncClient) -> None:
    await client.post("/sessions/a/leads", json={"leads": [{"payload": {}}] * 3})
    await client.post("/sessions/b/leads", json={"leads": [{"payload": {}}] * 2})
    await client.post("/lease", json={"session": "b", "owner": "w"})
    every = (await client.get("/scaling")).json()
    assert set(every["sessions"]) == {"a", "b"}
    assert every["sessions"]["a"]["backlog"] == 3 and every["sessions"]["b"]["leased"] == 1
    total = every["total"]
    assert (total["session"], total["backlog"], total["leased"]) == ("*", 4, 1)
    assert total["suggested_workers"] == 2  # no rate yet: one more than the leads held
    scrape = samples((await client.get("/metrics")).text)
    assert value(scrape, "leaseq_suggested_workers", session="a") == 1
    assert value(scrape, "leaseq_suggested_workers", session="*") == 2
    assert ("leaseq_completions_per_second", (("session", "*"),)) in scrape


async def test_the_python_client_reads_it(client: httpx.AsyncClient) -> None:
    app = client.app  # type: ignore[attr-defined]
    async with AsyncClient(BASE_URL, transport=httpx.ASGITransport(app=app)) as leaseq:
        await leaseq.push("c", [{"payload": {}}])
        signal = await leaseq.scaling("c", target_wait_s=30)
        assert (signal.session, signal.backlog, signal.suggested_workers) == ("c", 1, 1)
        with pytest.raises(InvalidInput):
            await leaseq.scaling("c", target_wait_s=0)
