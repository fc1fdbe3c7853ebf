"""``leaseq push`` against a real ``leaseq serve``: a line is a lead or, when told, a payload.

Never a guess between the two; a bad line is one line on stderr naming it;
from a file (or stdin) every line is checked before anything is pushed, and
``--stream`` says exactly which lines it pushed before it stopped. The
module's service is shared, each test in sessions of its own.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import psycopg
import pytest

from app.store.pool import libpq_url
from tests.support.serving import ROOT, Service, child_env, leaseq

pytestmark = pytest.mark.service

MAX_PAYLOAD_BYTES = 4096
SERVE_ENV = {  # the module's service (conftest)
    "LEASEQ_MAX_PAYLOAD_BYTES": str(MAX_PAYLOAD_BYTES),
    "LEASEQ_QUOTA_RETRY_AFTER_S": "1",
}
NEWCOMER = '{"payload": "https://example.com/page/9", "key": "page-9"}'
DEADLINE_S = 10.0


def error_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    return lines[0]


def payload_numbers(db_url: str, session: str) -> list[int]:
    """The ``n`` of each of the session's payloads, in id order."""
    with psycopg.connect(libpq_url(db_url)) as conn:
        rows = conn.execute(
            "SELECT (payload->>'n')::int FROM leads WHERE session = %s ORDER BY id", (session,)
        ).fetchall()
    return [n for (n,) in rows]


def numbered(count: int, bad: dict[int, str] | None = None) -> str:
    """``count`` lead lines ``{"payload": {"n": i}}`` (i from 1), line i replaced by bad[i]."""
    bad = bad or {}
    return "".join(
        bad.get(i, json.dumps({"payload": {"n": i}})) + "\n" for i in range(1, count + 1)
    )


def test_a_lead_with_a_key_is_pushed_once(service: Service) -> None:
    line = '{"payload": {"url": "https://example.com/page/9"}, "key": "page-9"}\n'
    first = leaseq("push", "-s", "keyed", "--json", "--url", service.url, input=line)
    assert first.returncode == 0, first.stderr
    created = json.loads(first.stdout)
    assert (created["created"], created["duplicates"]) == (1, 0)

    again = leaseq("push", "-s", "keyed", "--url", service.url, input=line)
    assert again.returncode == 0, again.stderr
    [lead_id] = created["ids"]
    assert again.stdout.strip() == (
        f"1 lead to session keyed: 0 created, 1 duplicate; ids {lead_id}"
    )
    with service.client() as http:
        stored = http.get(f"/leads/{lead_id}").json()
    assert stored["key"] == "page-9"
    assert stored["payload"] == {"url": "https://example.com/page/9"}


def test_the_newcomers_line_is_a_lead_never_a_payload(service: Service) -> None:
    """A line with ``payload`` is a lead: its key is never dropped by taking the line for a
    payload. Its payload is a string, which a lead cannot carry (the API refuses it too)."""
    for _ in range(2):
        refused = leaseq("push", "-s", "newcomer", "--url", service.url, input=NEWCOMER + "\n")
        assert refused.returncode == 1
        said = error_line(refused.stderr)
        assert said.startswith("error: line 1: payload must be a JSON object, not a string")
        assert said.endswith("; nothing was pushed")
    with service.client() as http:
        assert http.get("/sessions/newcomer/stats").json()["queued"] == 0


def test_payloads_takes_each_line_whole(service: Service) -> None:
    lines = NEWCOMER + '\n\n{"url": "https://b.example"}\n'
    pushed = leaseq(
        "push", "-s", "whole", "--payloads", "--json", "--url", service.url, input=lines
    )
    assert pushed.returncode == 0, pushed.stderr
    ids = json.loads(pushed.stdout)["ids"]
    assert len(ids) == 2  # the blank line is skipped
    with service.client() as http:
        first, second = (http.get(f"/leads/{lead_id}").json() for lead_id in ids)
    assert first["payload"] == json.loads(NEWCOMER) and first["key"] is None
    assert second["payload"] == {"url": "https://b.example"}

    not_an_object = leaseq("push", "-s", "whole", "--payloads", "--url", service.url, input="[1]\n")
    assert not_an_object.returncode == 1
    assert "line 1: the payload must be a JSON object, not an array" in error_line(
        not_an_object.stderr
    )


def test_without_payloads_a_bare_object_is_refused_by_name(service: Service) -> None:
    bare = leaseq(
        "push", "-s", "bare", "--url", service.url, input='{"url": "https://a.example"}\n'
    )
    assert bare.returncode == 1
    said = error_line(bare.stderr)
    assert 'line 1: a lead needs "payload"' in said and "--payloads" in said


@pytest.mark.parametrize(
    ("line", "why"),
    [
        ('{"payload": {"n": 1500', "not JSON"),
        ('{"payload": {}, "url": "https://a.example"}', "'url' is not a field of a lead"),
        ('{"payload": {}, "priority": "high"}', "priority must be an integer"),
        ('{"payload": {}, "key": "a", "key": "b"}', "the name 'key' appears twice"),
        ('{"payload": {"x": NaN}}', "NaN is not a JSON number"),
        ('{"payload": {}, "delay_s": -1}', "delay_s must be a number of seconds"),
        ('{"payload": {"x": "\\u0000"}}', "NUL character"),
        ('"just a string"', "a lead is a JSON object, not a string"),
    ],
)
def test_a_bad_line_in_the_middle_of_a_file_pushes_nothing(
    service: Service, tmp_path: Path, line: str, why: str
) -> None:
    leads = tmp_path / "leads.jsonl"
    leads.write_text(numbered(3000, {1500: line}))
    session = f"file-{abs(hash(line)) % 10**8}"
    refused = leaseq("push", "-s", session, str(leads), "--url", service.url)
    assert refused.returncode == 1
    said = error_line(refused.stderr)
    assert said.startswith("error: line 1500: ") and why in said, said
    assert said.endswith("; nothing was pushed")
    with service.client() as http:
        assert http.get(f"/sessions/{session}/stats").json()["queued"] == 0


def test_every_bad_line_is_counted_but_the_first_is_named(service: Service) -> None:
    lines = numbered(10, {4: "{", 7: "[]", 9: "{}"})
    refused = leaseq("push", "-s", "many-bad", "--url", service.url, input=lines)
    assert refused.returncode == 1
    said = error_line(refused.stderr)
    assert said.startswith("error: line 4: not JSON") and "(2 more bad lines after it)" in said


def test_stream_says_exactly_what_was_pushed(service: Service, db_url: str) -> None:
    lines = numbered(3000, {1500: '{"payload": {"n": 1500'})
    stopped = leaseq("push", "-s", "streamed", "--stream", "--url", service.url, input=lines)
    assert stopped.returncode == 1
    said = error_line(stopped.stderr)
    found = re.fullmatch(
        r"error: line 1500: not JSON \(.*\); lines 1-(\d+) were pushed, nothing from line (\d+) on",
        said,
    )
    assert found is not None, said
    through, first_not = int(found[1]), int(found[2])
    assert first_not == through + 1 and through < 1500
    # Exactly those lines are in the session, in order, and nothing of the rest.
    assert payload_numbers(db_url, "streamed") == list(range(1, through + 1))


def test_stream_pushes_whole_input_in_order(service: Service, db_url: str) -> None:
    pushed = leaseq(
        "push", "-s", "stream-all", "--stream", "--json", "--url", service.url, input=numbered(2500)
    )
    assert pushed.returncode == 0, pushed.stderr
    answer = json.loads(pushed.stdout)
    assert answer["created"] == 2500 and len(answer["ids"]) == 2500
    assert payload_numbers(db_url, "stream-all") == list(range(1, 2501))


def test_stream_pushes_a_line_before_the_input_ends(service: Service, db_url: str) -> None:
    """Endless input: each line goes out as it arrives, not when a batch fills up."""
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "leaseq.cli",
            "push",
            "-s",
            "slow",
            "--stream",
            "--url",
            service.url,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )
    assert process.stdin is not None
    try:
        for n in (1, 2):
            process.stdin.write(json.dumps({"payload": {"n": n}}) + "\n")
            process.stdin.flush()
            deadline = time.monotonic() + DEADLINE_S
            while payload_numbers(db_url, "slow") != list(range(1, n + 1)):
                assert process.poll() is None, process.communicate()
                assert time.monotonic() < deadline, f"line {n} not pushed while the input is open"
                time.sleep(0.05)
        out, err = process.communicate(timeout=DEADLINE_S)  # closes stdin: the input ends
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert out.startswith("2 leads to session slow: 2 created, 0 duplicates")


def test_a_refusal_of_the_service_names_the_line_and_what_was_pushed(
    service: Service, db_url: str
) -> None:
    """What only the service judges (its LEASEQ_MAX_PAYLOAD_BYTES) refuses one call; the calls
    before it stay pushed, and the error says which lines they were."""
    big = json.dumps({"payload": {"n": 1200, "blob": "x" * MAX_PAYLOAD_BYTES}})
    refused = leaseq(
        "push", "-s", "refused", "--url", service.url, input=numbered(1500, {1200: big})
    )
    assert refused.returncode == 1
    said = error_line(refused.stderr)
    assert said.startswith("error: line 1200: 422 validation_error: "), said
    assert f"at most {MAX_PAYLOAD_BYTES} bytes" in said
    assert said.endswith("; lines 1-1000 were pushed, nothing from line 1001 on"), said
    assert payload_numbers(db_url, "refused") == list(range(1, 1001))


def test_a_push_past_max_queued_fails_clearly_or_waits_for_room(
    service: Service, tmp_path: Path
) -> None:
    """docs/beyond.md#backpressure: without --wait-for-room the refused call stops the push,
    saying so and how to wait; with it, the call is sent again once there is room."""
    bound = leaseq("sessions", "set", "bounded", "--max-queued", "1", "--url", service.url)
    assert bound.returncode == 0 and "max queued 1" in bound.stdout, bound.stderr
    assert leaseq("push", "-s", "bounded", "--url", service.url, input=numbered(1)).returncode == 0
    refused = leaseq("push", "-s", "bounded", "--url", service.url, input=numbered(1))
    assert refused.returncode == 1
    said = error_line(refused.stderr)
    assert "429 quota_exceeded" in said and "retry after 1 s" in said
    assert "--wait-for-room" in said and said.endswith("nothing was pushed")

    lines = tmp_path / "one.jsonl"
    lines.write_text(numbered(1))
    command = [sys.executable, "-m", "leaseq.cli", "push", "-s", "bounded", str(lines), "--json"]
    command += ["--wait-for-room", "600", "--url", service.url]
    with subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    ) as waiting:
        try:
            with service.client() as http:
                deadline = time.monotonic() + 60
                while refusals(http.get("/metrics").text) < 2:  # the CLI's wait has begun
                    assert time.monotonic() < deadline, "the waiting push was never refused"
                    time.sleep(0.05)
                assert waiting.poll() is None
                assert http.post("/lease", json={"session": "bounded", "owner": "w"}).is_success
            out, err = waiting.communicate(timeout=60)
        finally:
            waiting.kill()
    assert waiting.returncode == 0, err
    assert json.loads(out)["created"] == 1


def refusals(scrape: str) -> float:
    """``leaseq_push_refusals_total`` of session ``bounded`` in a scrape."""
    found = re.search(r'^leaseq_push_refusals_total\{session="bounded"\} (\S+)$', scrape, re.M)
    return float(found[1]) if found else 0.0
