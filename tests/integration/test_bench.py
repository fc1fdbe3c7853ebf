"""The benchmark's own parts: the raw REST contender on a real database, the complete-and-lease
loop of the HTTP workers, and the targets report."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from app.store.pool import libpq_url
from bench import cli, contenders, users_before_after
from bench.common import SESSION
from bench.service import RawPoster, RawRestService
from tests.support import system
from tests.support.golang import GO_TOOL


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

    async def post(self, path: str, body: Any, key: str | None = None) -> Any:
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


def test_the_targets_of_what_users_run_are_reported() -> None:
    rate = {
        ("sdk", 4): 500.0,
        ("rest-1proc-next-keyed-b1", 4): 520.0,
        ("procrastinate-b1", 4): 510.0,
        ("cli-true", 4): 270.0,
        ("xargs-true", 4): 1000.0,
    }
    found = {t["target"]: t for t in cli.hop_targets(rate, {})}
    assert found["sdk >= 0.9 x bare REST loop (next, keyed) at W=4"]["met"] is True
    assert found["sdk ahead of procrastinate b1 at W=4"]["met"] is False
    assert found["stretch: sdk ahead of pgqueuer b1 at W=16"]["met"] is None
    assert (
        found[
            f"cli-true >= 5 x {cli.CLI_TRUE_BEFORE} leads/s (leaseq worker before round 3) at W=4"
        ]["met"]
        is True
    )
    assert found["cli-true >= 0.3 x xargs-true at W=4"]["figures"]["ratio"] == 0.27


@pytest.mark.parametrize(
    "family",
    [
        # A drain against `leaseq serve` takes about 15 s: CI's run, not the default one.
        pytest.param("sdk", marks=pytest.mark.slow),
        pytest.param("go", marks=[pytest.mark.tools, pytest.mark.slow]),
        pytest.param("cli", marks=pytest.mark.slow),
        "xargs",
    ],
)
def test_what_users_run_drains_every_lead_once_and_is_measured(
    server_url: str, template_db: str, family: str
) -> None:
    """The SDK's Worker, the Go client's and `leaseq worker -- true` against a real `leaseq
    serve` (each lead completed once, by the ledger), and xargs beside them."""
    if family == "go":
        system.need(GO_TOOL)
    result = contenders.run_once(contenders.Contender(family, 1), server_url, template_db, 30, 2, 0)
    assert result.leads == 30 and result.drain_per_s > 0 and result.drain_s > 0
    if family == "xargs":
        assert result.checks == ["xargs exited 0"] and result.service_cpu_ms_per_lead is None
        return
    assert result.checks == contenders.CHECKED
    assert result.client_cpu_ms_per_lead > 0 and result.service_cpu_ms_per_lead is not None
    assert (result.exit_s is not None) == (family in ("cli", "go"))


def _run(name: str, repeat: int, rate: float) -> contenders.RunResult:
    return contenders.RunResult(
        contender=name,
        workers=4,
        repeat=repeat,
        leads=100,
        drain_per_s=rate,
        push_bulk_per_s=1.0,
        push_single_per_s=1.0,
        lease_p50_ms=2.0,
        lease_p99_ms=9.0,
        complete_p50_ms=2.0,
        complete_p99_ms=9.0,
        lease_calls=100,
        client_cpu_ms_per_lead=0.1,
        drain_s=1.0,
        load_before=1.0,
        load_after=1.0,
    )


def test_before_pairs_each_rest_contender_and_reports_its_ratio_round_by_round(
    tmp_path: Path,
) -> None:
    chosen = [c for c in contenders.all_contenders() if c.name in ("ceiling-b1", "rest-1proc-b1")]
    paired = contenders.with_before(chosen, tmp_path)
    assert [c.name for c in paired] == ["ceiling-b1", "rest-1proc-b1", "rest-1proc-b1 (before)"]
    assert [[c.name for c in group] for group in contenders.twins(paired)] == [
        ["ceiling-b1"],
        ["rest-1proc-b1", "rest-1proc-b1 (before)"],
    ]
    older = paired[2]
    assert older.source == tmp_path and older.schema == contenders.BEFORE_SCHEMA
    assert older.label.endswith("(before)") and paired[1].schema == "leaseq"
    results = [
        _run("rest-1proc-b1", 0, 900.0),
        _run("rest-1proc-b1 (before)", 0, 1000.0),
        _run("rest-1proc-b1", 1, 1100.0),
        _run("rest-1proc-b1 (before)", 1, 1000.0),
        _run("rest-1proc-b1", 2, 1000.0),
        _run("rest-1proc-b1 (before)", 2, 800.0),
    ]
    [row] = cli.before_and_after(results, paired, [4])
    assert row["contender"] == "rest-1proc-b1"
    assert (row["after_median"], row["before_median"], row["ratio"]) == (1000.0, 1000.0, 1.0)
    assert row["ratio_rounds"] == [0.9, 1.1, 1.25]
    assert (row["before_min"], row["before_max"]) == (800.0, 1000.0)
    assert (
        "| 1 | 4 | 1,000 (900-1,100) | 1,000 (800-1,000) | 1.00 | 0.90, 1.10, 1.25 |"
        in cli.before_and_after_markdown([row])
    )


def test_users_before_and_after_compare_each_round_with_its_own() -> None:
    """Each round's after over the same round's before, and their median: the machine's load
    moves between rounds, so only runs side by side are compared."""

    def run(contender: str, side_round: int, per_s: float) -> dict[str, Any]:
        return {
            "contender": contender,
            "workers": 4,
            "round": side_round,
            "drain_per_s": per_s,
            "client_cpu_ms_per_lead": per_s / 1000,
            "service_cpu_ms_per_lead": None,
        }

    found = {
        "before": [run("sdk", 0, 100.0), run("sdk", 1, 200.0), run("sdk", 2, 100.0)],
        "after": [run("sdk", 0, 150.0), run("sdk", 1, 500.0), run("sdk", 2, 120.0)],
    }
    [row] = users_before_after.table(found, [4])
    assert row["ratios"] == [1.5, 2.5, 1.2] and row["ratio"] == 1.5
    assert (row["before_per_s"], row["after_per_s"]) == (100.0, 150.0)
    document = {"before": "a" * 40, "after": "b" * 40, "leads": 10, "repeats": 3}
    text = users_before_after.markdown([row], {**document, "load_avg": [(1.0, 1.0, 1.0)]})
    assert "| sdk | 4 | 100 | 150 | 1.50 (1.50, 2.50, 1.20) |" in text
