"""The benchmark's own parts: the raw REST contender on a real database, the complete-and-lease
loop of the HTTP workers, and the targets report."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import httpx
import psycopg
import pytest

from app.store.pool import libpq_url
from bench import cli, contenders
from bench.common import SESSION
from bench.service import RawPoster, RawRestService


@pytest.fixture
def raw_rest(database_url: str) -> Iterator[RawRestService]:
    """bench/raw_rest.py serving this test's database, stopped by pid afterwards."""
    service = RawRestService(libpq_url(database_url), pool_size=2)
    try:
        service.wait_ready()
        yield service
    finally:
        service.stop()
    assert service.process.poll() is not None


def _push(client: httpx.Client, n: int) -> list[int]:
    answer = client.post(
        f"/sessions/{SESSION}/leads", json={"leads": [{"payload": {"n": i}} for i in range(n)]}
    )
    assert answer.status_code == 201
    ids: list[int] = answer.json()["ids"]
    assert len(ids) == n
    return ids


def _statuses(url: str) -> dict[int, tuple[str, int]]:
    with psycopg.connect(libpq_url(url)) as conn:
        rows = conn.execute("SELECT id, status, attempts FROM leads").fetchall()
    return {row[0]: (row[1], row[2]) for row in rows}


def test_raw_rest_completes_and_leases_in_one_request(
    raw_rest: RawRestService, database_url: str
) -> None:
    with httpx.Client(base_url=raw_rest.base_url) as client:
        ids = _push(client, 5)
        want = {"session": SESSION, "owner": "w1", "max": 1, "ttl_s": 30, "wait_s": 0}
        [first] = client.post("/lease", json=want).json()["leases"]
        assert (first["lead"]["id"], first["attempt"], first["owner"]) == (ids[0], 1, "w1")
        assert first["lead"]["status"] == "leased" and first["ttl_s"] == 30

        item = {"lead_id": ids[0], "token": first["token"], "status": "done", "result": {"r": 1}}
        answer = client.post("/complete", json={**item, "next": {**want, "max": 2}}).json()
        assert answer["lead"]["status"] == "done" and answer["lead"]["result"] == {"r": 1}
        assert [lease["lead"]["id"] for lease in answer["leases"]] == ids[1:3]

        # A lost lease: 409 lease_lost, and nothing is leased.
        again = client.post("/complete", json={**item, "next": want})
        assert again.status_code == 409
        assert again.headers["content-type"] == "application/problem+json"
        assert again.json()["code"] == "lease_lost"

        items = [{"lead_id": x["lead"]["id"], "token": x["token"]} for x in answer["leases"]]
        items.append({"lead_id": ids[3], "token": "never-leased"})
        batch = client.post("/complete/batch", json={"items": items, "next": want}).json()
        assert batch["results"] == [
            {"lead_id": ids[1], "ok": True},
            {"lead_id": ids[2], "ok": True},
            {"lead_id": ids[3], "ok": False, "code": "lease_lost"},
        ]
        assert [lease["lead"]["id"] for lease in batch["leases"]] == [ids[3]]
        without_next = client.post("/complete/batch", json={"items": []}).json()
        assert without_next == {"results": []}

    assert _statuses(database_url) == {
        ids[0]: ("done", 1),
        ids[1]: ("done", 1),
        ids[2]: ("done", 1),
        ids[3]: ("leased", 1),
        ids[4]: ("queued", 0),
    }


@pytest.mark.parametrize("batch", [1, 10])
def test_the_next_loop_drains_raw_rest_once_each(
    raw_rest: RawRestService, database_url: str, batch: int
) -> None:
    with httpx.Client(base_url=raw_rest.base_url) as client:
        ids = _push(client, 25)

    async def drain() -> list[int]:
        posters = [RawPoster("127.0.0.1", raw_rest.port) for _ in range(3)]
        try:
            reports = await asyncio.gather(
                *(contenders._rest_next_loop(p, f"w{i}", batch) for i, p in enumerate(posters))
            )
        finally:
            for poster in posters:
                await poster.close()
        return contenders.merge(reports).done_ids

    done = asyncio.run(drain())
    assert asyncio.run(contenders.leaseq_checks(database_url, 25, ids, done)) == []


class IgnoresNext:
    """A service that answers a complete as if it had no ``next``."""

    async def post(self, path: str, body: Any) -> Any:
        if path == "/lease":
            return {"leases": [{"lead": {"id": 1}, "token": "t"}]}
        return {"lead": {"id": body["lead_id"]}}


def test_the_next_loop_fails_when_the_service_ignores_next() -> None:
    with pytest.raises(contenders.NextIgnored, match="without `leases`"):
        asyncio.run(contenders._rest_next_loop(IgnoresNext(), "w", 1))  # type: ignore[arg-type]


def test_every_rest_hop_target_is_reported_met_missed_or_not_measured() -> None:
    rate = {
        ("rest-1proc-next-b1", 4): 900.0,
        ("rawrest-next-b1", 4): 1000.0,
        ("rest-1proc-next-b10", 4): 3000.0,
        ("rawrest-next-b10", 4): 5000.0,
        ("procrastinate-b1", 4): 400.0,
    }
    found = {t["target"]: t for t in cli.hop_targets(rate, {("rest-1proc-b1", 16): 30.0})}
    assert found["REST next b1 >= 0.8 x raw REST next b1 at W=4"]["met"] is True
    assert found["REST next b1 >= 0.8 x raw REST next b1 at W=4"]["figures"]["ratio"] == 0.9
    assert found["REST next b10 >= 0.8 x raw REST next b10 at W=4"]["met"] is False
    assert found["REST next b1 ahead of procrastinate b1 at W=4"]["met"] is True
    at_16 = found["REST next b1 ahead of procrastinate b1 at W=16"]
    assert at_16["met"] is None and at_16["missing"] == [
        "rest-1proc-next-b1 W=16",
        "procrastinate-b1 W=16",
    ]
    assert found["stretch: REST next b1 ahead of pgqueuer b1 at W=4"]["stretch"] is True
    assert found["rest-1proc-b1 lease p99 < 50 ms at W=16"]["met"] is True
    assert found["rest-1proc-next-b1 lease p99 < 50 ms at W=16"]["met"] is None
    assert "NOT MEASURED" in cli.targets_markdown(list(found.values()))
