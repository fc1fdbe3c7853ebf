"""The ``leaseq`` client verbs (push, stats, sweep, sessions) against a real ``leaseq serve``.

Each verb runs as a subprocess; failures must be one line on stderr and a
non-zero exit. The only sleep lets a 1 s lease expire before a sweep.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.support.serving import Service, Services, free_port, leaseq

pytestmark = pytest.mark.service


@pytest.fixture
def service(services: Services, database_url: str) -> Service:
    return services.start("--sweep-interval", "3600", database_url=database_url)


def one_error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1, stderr
    assert lines[0].startswith("error: "), stderr
    return lines[0]


def test_push_from_a_file(service: Service, tmp_path: Path) -> None:
    leads = tmp_path / "leads.jsonl"
    leads.write_text(
        '{"payload": {"url": "https://a.example"}}\n'
        "\n"
        '{"payload": {"url": "https://b.example"}, "priority": 5, "key": "b"}\n'
        '{"payload": {"url": "https://b.example"}, "key": "b"}\n'
        '{"payload": {"text": "a lead whose payload holds a payload"}, "depth": 1}\n'
    )
    pushed = leaseq("push", "--session", "crawl", str(leads), "--url", service.url)
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.strip() == ("4 leads to session crawl: 3 created, 1 duplicate; ids 1-3")

    with service.client() as http:
        first = http.get("/leads/1").json()
        assert first["payload"] == {"url": "https://a.example"} and first["priority"] == 0
        second = http.get("/leads/2").json()
        assert second["payload"] == {"url": "https://b.example"} and second["priority"] == 5
        assert second["key"] == "b"
        third = http.get("/leads/3").json()
        assert third["payload"] == {"text": "a lead whose payload holds a payload"}
        assert third["depth"] == 1


def test_push_of_large_leads_is_packed_under_the_body_limit(service: Service) -> None:
    """1,500 leads of 1.5 kB: 2.2 MB in all, more than one 1 MiB body can carry."""
    lines = "".join(json.dumps({"n": i, "blob": "é" * 750}) + "\n" for i in range(1500))
    assert len(lines.encode()) > 2 * 1024 * 1024
    pushed = leaseq(
        "push", "-s", "large", "--payloads", "--json", "--url", service.url, input=lines
    )
    assert pushed.returncode == 0, pushed.stderr
    answer = json.loads(pushed.stdout)
    assert answer["created"] == 1500 and answer["ids"] == list(range(1, 1501))
    with service.client() as http:
        assert http.get("/sessions/large/stats").json()["queued"] == 1500
        assert http.get("/leads/1500").json()["payload"] == {"n": 1499, "blob": "é" * 750}


def test_push_from_stdin_in_batches(service: Service) -> None:
    lines = "".join(json.dumps({"n": i}) + "\n" for i in range(2500))
    pushed = leaseq("push", "-s", "big", "--payloads", "--json", "--url", service.url, input=lines)
    assert pushed.returncode == 0, pushed.stderr
    answer = json.loads(pushed.stdout)
    assert answer["created"] == 2500 and answer["duplicates"] == 0
    assert answer["ids"] == list(range(1, 2501))  # in input order, over three batches

    stats = leaseq("stats", "--session", "big", "--json", "--url", service.url)
    assert json.loads(stats.stdout)["queued"] == 2500


def test_stats_table(service: Service) -> None:
    leaseq("push", "-s", "alpha", "--payloads", "--url", service.url, input='{"x": 1}\n{"x": 2}\n')
    leaseq("push", "-s", "beta", "--payloads", "--url", service.url, input='{"x": 3}\n')

    table = leaseq("stats", "--url", service.url)
    assert table.returncode == 0, table.stderr
    rows = {line.split()[0]: line.split()[1:] for line in table.stdout.splitlines() if line.strip()}
    header = ["queued", "leased", "done", "failed", "cached", "pending", "oldest", "available"]
    assert rows["session"] == header
    assert rows["alpha"][:6] == ["2", "0", "0", "0", "0", "2"]
    assert rows["beta"][:6] == ["1", "0", "0", "0", "0", "1"]
    assert rows["total"][:6] == ["3", "0", "0", "0", "0", "3"]
    assert all(rows[name][-1] == "s" for name in ("alpha", "beta", "total"))  # seconds old

    one = leaseq("stats", "--session", "alpha", "--url", service.url)
    assert "alpha" in one.stdout and "beta" not in one.stdout

    every = json.loads(leaseq("stats", "--json", "--url", service.url).stdout)
    assert every["total"]["pending"] == 3 and set(every["sessions"]) == {"alpha", "beta"}
    assert every["sessions"]["alpha"]["oldest_available_age_s"] >= 0


def test_stats_json_carries_every_field_the_service_answers(service: Service) -> None:
    """``stats --json`` is ``GET /stats`` (and a session's, ``GET /sessions/{s}/stats``):
    the same fields with the same values, a blocked lead and a pause among them."""
    with service.client() as http:
        [first] = http.post("/sessions/alpha/leads", json={"leads": [{"payload": {}}]}).json()[
            "ids"
        ]
        pushed = http.post(
            "/sessions/alpha/leads", json={"leads": [{"payload": {}, "after": [first]}]}
        )
        assert pushed.status_code == 201, pushed.text
        assert http.post("/sessions/alpha/pause", json={"for_s": 600}).status_code == 200
        every, one = http.get("/stats").json(), http.get("/sessions/alpha/stats").json()

    shown = leaseq("stats", "--json", "--url", service.url)
    assert shown.returncode == 0, shown.stderr
    printed = json.loads(shown.stdout)
    alpha = printed["sessions"]["alpha"]
    assert (alpha["blocked"], alpha["queued"]) == (1, 2)
    assert alpha["paused_until"] == every["sessions"]["alpha"]["paused_until"] is not None

    def without_age(counts: dict[str, object]) -> dict[str, object]:
        """The counts but their age, a reading of the clock at each request."""
        return {k: v for k, v in counts.items() if k != "oldest_available_age_s"}

    assert list(alpha) == list(every["sessions"]["alpha"])
    assert without_age(alpha) == without_age(every["sessions"]["alpha"])
    assert without_age(printed["total"]) == without_age(every["total"])
    alone = json.loads(leaseq("stats", "-s", "alpha", "--json", "--url", service.url).stdout)
    assert without_age(alone) == without_age(one)


def test_sweep_requeues_expired_leases(service: Service) -> None:
    leaseq("push", "-s", "s", "--payloads", "--url", service.url, input='{"x": 1}\n')
    with service.client() as http:
        answer = http.post("/lease", json={"session": "s", "owner": "w", "ttl_s": 1})
        assert len(answer.json()["leases"]) == 1
    time.sleep(1.2)  # just over the ttl

    swept = leaseq("sweep", "--session", "other", "--url", service.url)
    assert swept.stdout.strip() == "swept session other: 0 requeued, 0 failed"
    swept = leaseq("sweep", "--session", "s", "--url", service.url)
    assert swept.returncode == 0, swept.stderr
    assert swept.stdout.strip() == "swept session s: 1 requeued, 0 failed"
    swept = leaseq("sweep", "--all", "--url", service.url)
    assert swept.stdout.strip() == "swept every session: 0 requeued, 0 failed"


def test_sweep_wants_a_session_or_all() -> None:
    for args in ([], ["--session", "s", "--all"]):
        result = leaseq("sweep", *args, "--url", "http://127.0.0.1:9")
        assert result.returncode == 2
        assert "--session NAME or --all" in one_error_line(result.stderr)


def test_errors_are_one_line(service: Service) -> None:
    down = f"http://127.0.0.1:{free_port()}"
    lead = '{"payload": {"x": 1}}\n'
    for args in (["stats"], ["sweep", "--all"], ["push", "-s", "s"]):
        result = leaseq(*args, "--url", down, input=lead)
        assert result.returncode == 1, result
        assert f"cannot reach leaseq at {down}" in one_error_line(result.stderr)

    for verb in ("push", "stats", "sweep"):
        bad = leaseq(verb, "-s", "no/slashes!", "--url", service.url, input=lead)
        assert bad.returncode == 1
        assert "session 'no/slashes!': must match" in one_error_line(bad.stderr)

    invalid = '{"payload": {"x": 1}, "priority": "high"}\n'
    refused = leaseq("push", "-s", "s", "--url", service.url, input=invalid)
    assert refused.returncode == 1
    assert "line 1: priority must be an integer" in one_error_line(refused.stderr)

    not_json = leaseq("push", "-s", "s", "--url", service.url, input=lead + '{"x": \n')
    assert not_json.returncode == 1
    assert one_error_line(not_json.stderr).startswith("error: line 2: not JSON")
    not_object = leaseq("push", "-s", "s", "--url", service.url, input="[1, 2]\n")
    assert "line 1: a lead is a JSON object, not an array" in one_error_line(not_object.stderr)


def test_a_url_that_is_not_one_is_a_usage_error_in_every_verb() -> None:
    """Refused where the URL is read, before any request: never retried as a service down."""
    no_scheme = "127.0.0.1:8000"
    verbs = (  # the command's words, and what follows --url
        (["push"], ["-s", "s"]),
        (["stats"], []),
        (["sweep"], ["--all"]),
        (["sessions", "show"], []),
        (["sessions", "set"], ["s", "--weight", "2"]),
        (["worker"], ["-s", "s", "--", "true"]),  # after "--" every word is the command's
    )
    for words, rest in verbs:
        result = leaseq(*words, "--url", no_scheme, *rest, input='{"payload": {}}\n')
        assert result.returncode == 2, (words, result)
        assert one_error_line(result.stderr) == (
            "error: --url '127.0.0.1:8000': give the scheme, as in http://127.0.0.1:8000"
        )
        assert result.stdout == ""

    for url, says in (
        ("localhost:8000", "give the scheme, as in http://localhost:8000"),
        ("ftp://127.0.0.1:8000", "must be an http:// or https:// URL"),
        ("http://", "names no host"),
        ("http://127.0.0.1:port", "not a URL"),
    ):
        by_env = leaseq("stats", env={"LEASEQ_URL": url})
        assert by_env.returncode == 2, by_env
        assert one_error_line(by_env.stderr).startswith(f"error: --url {url!r}: {says}")


def test_token(services: Services, database_url: str) -> None:
    service = services.start("--token", "s3cret", "--token", "other", database_url=database_url)
    refused = leaseq("stats", "--url", service.url)
    assert refused.returncode == 1
    assert "401 unauthorized" in one_error_line(refused.stderr)
    assert leaseq("stats", "--url", service.url, "--token", "s3cret").returncode == 0
    by_env = leaseq("stats", "--url", service.url, env={"LEASEQ_TOKEN": "other"})
    assert by_env.returncode == 0, by_env.stderr


def test_url_from_the_environment(service: Service) -> None:
    result = leaseq("stats", "--json", env={"LEASEQ_URL": service.url})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["sessions"] == {}


def test_help() -> None:
    top = leaseq("--help")
    assert top.returncode == 0
    for verb in ("serve", "push", "stats", "sweep", "db"):
        assert verb in top.stdout
    for verb in ("serve", "push", "stats", "sweep"):
        page = leaseq(verb, "--help")
        assert page.returncode == 0, page.stderr
        assert f"leaseq {verb}" in page.stdout  # the usage line and the examples


def test_sessions_set_and_show(service: Service) -> None:
    leaseq("push", "-s", "tenant", "--payloads", "--url", service.url, input='{"x": 1}\n{"x": 2}\n')
    args = ["--weight", "3", "--max-leased", "10", "--rate", "300/min", "--url", service.url]
    done = leaseq("sessions", "set", "tenant", *args)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "tenant: weight 3, max leased 10, rate 5/s (burst 1 s worth)"
    again = leaseq("sessions", "set", "tenant", "--burst", "20", "--url", service.url)
    assert "weight 3, max leased 10, rate 5/s (burst 20)" in again.stdout  # the rest kept

    one = json.loads(leaseq("sessions", "show", "tenant", "--json", "--url", service.url).stdout)
    assert one == {
        "session": "tenant",
        "weight": 3.0,
        "max_leased": 10,
        "rate_per_s": 5.0,
        "burst": 20,
        "max_leased_per_key": None,
        "max_runtime_s": None,
        "max_queued": None,
        "paused_until": None,
        "leased": 0,
        "oldest_available_age_s": one["oldest_available_age_s"],
    }
    assert one["oldest_available_age_s"] >= 0
    every = leaseq("sessions", "show", "--url", service.url)
    assert every.returncode == 0, every.stderr
    rows = [line.split() for line in every.stdout.splitlines() if line.strip().startswith("tenant")]
    assert len(rows) == 1, every.stdout
    [row] = rows
    assert row[:6] == ["tenant", "3", "0", "10", "5", "20"]

    lifted = leaseq(
        "sessions", "set", "tenant", "--rate", "none", "--max-leased", "none", "--url", service.url
    )
    assert lifted.stdout.strip() == "tenant: weight 3, no cap, no rate"

    for bad, says, status in (
        (["--rate", "fast"], "--rate", 2),  # a usage error, found before anything is sent
        (["--weight", "0"], "weight", 1),  # the service refuses it (422)
        (["--burst", "2"], "burst", 1),  # no rate for a bucket to size
    ):
        refused = leaseq("sessions", "set", "tenant", *bad, "--url", service.url)
        assert refused.returncode == status, refused.stderr
        assert says in one_error_line(refused.stderr)
    shown = json.loads(leaseq("sessions", "show", "tenant", "--json", "--url", service.url).stdout)
    assert (shown["weight"], shown["max_leased"], shown["rate_per_s"]) == (3.0, None, None)


def test_sessions_retry_failed(service: Service) -> None:
    with service.client() as http:
        http.post("/sessions/dead/leads", json={"leads": [{"payload": {}}] * 3})
        leases = http.post("/lease", json={"session": "dead", "owner": "w", "max": 2}).json()
        for held in leases["leases"]:
            body = {"lead_id": held["lead"]["id"], "token": held["token"], "status": "failed"}
            assert http.post("/complete", json=body).status_code == 200
        replayed = leaseq("sessions", "retry-failed", "dead", "--url", service.url)
        assert replayed.returncode == 0, replayed.stderr
        assert replayed.stdout.strip() == "dead: 2 failed leads queued again"
        assert http.get("/sessions/dead/stats").json()["queued"] == 3
    again = leaseq("sessions", "retry-failed", "dead", "--url", service.url)
    assert again.stdout.strip() == "dead: 0 failed leads queued again"
    bad = leaseq("sessions", "retry-failed", "no/such", "--url", service.url)
    assert bad.returncode == 1
    assert "session 'no/such': must match" in one_error_line(bad.stderr)
