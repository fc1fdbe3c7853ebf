"""``leaseq leads list|retry|cancel`` and the Python client's ``list_leads``, ``retry_leads``
and ``cancel_leads`` against a real ``leaseq serve``."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from leaseq import Client
from tests.support.serving import Service, Services, leaseq

pytestmark = pytest.mark.service

S = "crawl"


@pytest.fixture
def service(services: Services, database_url: str) -> Service:
    return services.start("--sweep-interval", "3600", database_url=database_url)


def _fill(http: httpx.Client) -> list[int]:
    """Five leads keyed k0…k4; the oldest two leased by w1 and failed with errors."""
    leads = [{"payload": {"i": i}, "key": f"k{i}"} for i in range(5)]
    ids: list[int] = http.post(f"/sessions/{S}/leads", json={"leads": leads}).json()["ids"]
    leases = http.post("/lease", json={"session": S, "owner": "w1", "max": 2}).json()["leases"]
    for held, error in zip(leases, ("Disk full", "timeout"), strict=True):
        body = {"lead_id": held["lead"]["id"], "token": held["token"], "status": "failed"}
        assert http.post("/complete", json={**body, "error": error}).status_code == 200
    return ids


def run(service: Service, *args: str) -> list[str]:
    done = leaseq("leads", *args, "--url", service.url)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().splitlines()


def test_list_as_json_lines_and_as_a_table(service: Service) -> None:
    with service.client() as http:
        ids = _fill(http)
        every = [json.loads(line) for line in run(service, "list", S, "--json")]
        assert [lead["id"] for lead in every] == ids[::-1]
        assert every[0] == http.get(f"/leads/{ids[-1]}").json()  # the API's shape
    failed = run(service, "list", S, "--status", "failed", "--error", "DISK", "--json")
    assert [json.loads(line)["id"] for line in failed] == [ids[0]]
    oldest = run(service, "list", S, "--oldest", "--limit", "3", "--json")
    assert [json.loads(line)["id"] for line in oldest] == ids[:3]
    paged = run(service, "list", S, "--all", "--key-prefix", "k", "--owner", "w1", "--json")
    assert [json.loads(line)["id"] for line in paged] == ids[1::-1]
    table = run(service, "list", S, "--limit", "2")
    assert table[0].split() == ["id", "status", "key", "owner", "attempts", "updated", "error"]
    assert [line.split()[0] for line in table[1:3]] == [str(ids[4]), str(ids[3])]
    assert table[-1] == "2 leads shown; more match (--limit N or --all for more)"


def test_retry_and_cancel_by_filter_and_by_id(service: Service) -> None:
    with service.client() as http:
        ids = _fill(http)
        assert run(service, "cancel", S, "--status", "queued", "--key-prefix", "k") == [
            f"{S}: 3 leads cancelled"
        ]
        assert run(service, "retry", S, "--id", str(ids[0]), "--id", str(ids[2])) == [
            f"{S}: 2 leads queued again"
        ]
        assert run(service, "retry", S, "--error", "cancel") == [f"{S}: 2 leads queued again"]
        statuses = {i: http.get(f"/leads/{i}").json()["status"] for i in ids}
    assert statuses == {ids[0]: "queued", ids[1]: "failed", **dict.fromkeys(ids[2:], "queued")}


@pytest.mark.parametrize(
    "args",
    [
        ["cancel", S],
        ["cancel", S, "--id", "1", "--status", "queued"],
        ["list", S, "--created-after", "yesterday"],
        ["list", S, "--updated-before", "2026-12-07T10:00:00"],
    ],
)
def test_a_bad_selection_is_a_one_line_usage_error(args: list[str]) -> None:
    done = leaseq("leads", *args, "--url", "http://127.0.0.1:9")
    assert done.returncode == 2, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr


def test_a_refusal_of_the_service_is_one_line(service: Service) -> None:
    done = leaseq("leads", "list", S, "--status", "lost", "--url", service.url)
    assert done.returncode == 1
    assert done.stderr.strip().startswith("error: 422 validation_error"), done.stderr


def test_the_python_client_pages_and_acts(service: Service) -> None:
    with service.client() as http:
        ids = _fill(http)
    with Client(service.url) as client:
        seen: list[int] = []
        query: dict[str, Any] = {"order": "oldest", "limit": 2}
        page = client.list_leads(S, **query)
        while True:
            seen += [lead.id for lead in page.leads]
            if page.next_cursor is None:
                break
            page = client.list_leads(S, **query, cursor=page.next_cursor)
        assert seen == ids
        failed = client.list_leads(S, status=["failed"], error="disk")
        assert [lead.id for lead in failed.leads] == [ids[0]]
        assert failed.leads[0].error == "Disk full" and failed.next_cursor is None
        cancelled = client.cancel_leads(S, ids=ids)
        assert (cancelled.changed, cancelled.more) == (3, False)
        retried = client.retry_leads(S, status="failed", updated_after=failed.leads[0].updated_at)
        assert (retried.changed, retried.more) == (5, False)
        assert client.stats(S).queued == 5
