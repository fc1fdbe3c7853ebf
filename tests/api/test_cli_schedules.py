"""``leaseq schedules``: list, put, show, delete against a real ``leaseq serve``."""

from __future__ import annotations

import json

import pytest

from tests.support.serving import Service, leaseq

pytestmark = pytest.mark.service


def test_put_list_show_delete(service: Service) -> None:
    at = ("--url", service.url)
    put = leaseq(
        "schedules", "put", "report", "-s", "nightly", "--cron", "*/5 * * * *",
        "--payload", '{"job": "report"}', *at,
    )  # fmt: skip
    assert put.returncode == 0, put.stderr
    assert put.stdout.startswith("report: session nightly, '*/5 * * * *' in UTC, next tick ")
    shown = json.loads(leaseq("schedules", "show", "report", "--json", *at).stdout)
    assert shown["lead"] == {"payload": {"job": "report"}}
    assert shown["next_tick"].endswith("Z")
    listed = json.loads(leaseq("schedules", "list", "--json", *at).stdout)
    assert listed == {"schedules": [shown]}
    assert "report" in leaseq("schedules", "list", *at).stdout

    deleted = leaseq("schedules", "delete", "report", *at)
    assert (deleted.returncode, deleted.stdout) == (0, "report: deleted\n")
    again = leaseq("schedules", "delete", "report", *at)
    assert again.returncode == 1
    assert again.stderr.count("\n") == 1 and "not_found" in again.stderr


# Exit 2: a usage error found before any call; 1: the service refused (422), as for every verb.
@pytest.mark.parametrize(
    ("args", "said", "code"),
    [
        (("--cron", "every day", "--payload", "{}"), "cron", 1),
        (("--cron", "0 9 * * *", "--timezone", "Nowhere/City", "--payload", "{}"), "timezone", 1),
        (("--cron", "0 9 * * *", "--lead", '{"payload": {}, "key": "k"}'), "key", 1),
        (("--cron", "0 9 * * *", "--payload", "[1]"), "--payload", 2),
        (("--cron", "0 9 * * *", "--lead", "{not json"), "--lead", 2),
        (("--cron", "0 9 * * *"), "--payload or --lead", 2),
    ],
)
def test_a_bad_schedule_is_one_line_and_stores_nothing(
    service: Service, args: tuple[str, ...], said: str, code: int
) -> None:
    refused = leaseq("schedules", "put", "bad", "-s", "s", *args, "--url", service.url)
    assert refused.returncode == code, refused.stderr
    assert refused.stderr.count("\n") == 1 and said in refused.stderr
    listed = leaseq("schedules", "list", "--json", "--url", service.url)
    assert "bad" not in json.loads(listed.stdout)["schedules"]
