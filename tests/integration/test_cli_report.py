"""``leaseq report`` (and ``prune``): the ledger's audit read from the database.

Exit 1 on a broken promise; exit 3, in one line, where there is no leaseq
database to read, and never a cluster started there (or anywhere else).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import Database
from leaseq.cli.output import EXIT_NO_DATABASE, EXIT_NOTHING_TO_AUDIT
from leaseq.model import NewLead
from tests.support import T0, at, leasing_of
from tests.support.serving import Services, leaseq, postgres_running, stop_postgres

pytestmark = pytest.mark.service


async def _clean_run(queue: Queue) -> list[int]:
    ids = (await queue.push("s", [NewLead({"i": i}) for i in range(3)], now=T0)).ids
    leases = await leasing_of(queue).lease_next("s", "w1", max=3, ttl_s=10, now=at(1))
    for lease in leases:
        await queue.complete(lease.lead.id, lease.token, now=at(2))
    return ids


async def test_a_clean_run_reports_no_breach(queue: Queue, database_url: str) -> None:
    await _clean_run(queue)

    shown = leaseq("report", "--session", "s", "--database-url", database_url)
    assert shown.returncode == 0, shown.stderr
    assert "double completions" in shown.stdout
    assert "w1" in shown.stdout
    assert "no double completion, no overlapping lease" in shown.stdout

    as_json = leaseq("report", "-s", "s", "--json", env={"LEASEQ_DATABASE_URL": database_url})
    assert as_json.returncode == 0, as_json.stderr
    found = json.loads(as_json.stdout)
    assert (found["double_completions"], found["overlapping_leases"]) == (0, 0)
    assert (found["wasted_attempts"], found["completions"], found["leases"]) == (0, 3, 3)
    assert found["attempts_per_lead"] == {"1": 3}
    assert found["owners"] == [{"owner": "w1", "leases": 3, "completions": 3, "wasted": 0}]


async def test_a_tampered_ledger_exits_1(queue: Queue, db: Database, database_url: str) -> None:
    [first, second, _] = await _clean_run(queue)
    # A second completion of the first lead, and a lease of the second given
    # while its first lease was still valid (leased at 1 s for 10 s).
    await db.rows(
        "INSERT INTO lead_events (lead_id, session, event, status, attempt, owner, at) "
        "VALUES (%(first)s, 's', 'completed', 'done', 1, 'w9', %(late)s), "
        "(%(second)s, 's', 'leased', 'leased', 2, 'w9', %(early)s)",
        {"first": first, "second": second, "late": at(3), "early": at(1.5)},
    )

    shown = leaseq("report", "--session", "s", "--database-url", database_url)
    assert shown.returncode == 1, shown.stdout + shown.stderr
    assert "broken promise" in shown.stderr

    as_json = leaseq("report", "--session", "s", "--json", "--database-url", database_url)
    assert as_json.returncode == 1
    found = json.loads(as_json.stdout)
    assert (found["double_completions"], found["overlapping_leases"]) == (1, 1)


async def test_a_session_with_no_leads_is_said_so_not_audited(
    db: Database, database_url: str
) -> None:
    """A typo never reads as a clean audit: its own exit status, one line, nothing on stdout."""
    await _clean_run(Queue(db))
    for extra in ([], ["--json"]):
        typo = leaseq("report", "--session", "typo", *extra, "--database-url", database_url)
        assert typo.returncode == EXIT_NOTHING_TO_AUDIT, typo
        assert one_line(typo.stderr) == "error: session 'typo' has no leads"
        assert typo.stdout == ""

    await Queue(db, ledger=False).push("quiet", [NewLead({"i": i}) for i in range(2)], now=T0)
    unrecorded = leaseq("report", "--session", "quiet", "--database-url", database_url)
    assert unrecorded.returncode == EXIT_NOTHING_TO_AUDIT, unrecorded
    said = one_line(unrecorded.stderr)
    assert "session 'quiet' has 2 leads but no ledger rows" in said and "nothing to audit" in said


def test_a_bad_session_name_is_one_line(database_url: str) -> None:
    shown = leaseq("report", "--session", "no spaces", "--database-url", database_url)
    assert shown.returncode == 2  # a usage error, not "a promise was broken" (1)
    assert "validation_error" in one_line(shown.stderr)


def one_line(stderr: str) -> str:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    return lines[0]


@pytest.fixture
def home(tmp_path: Path) -> dict[str, str]:
    """A home of the test's own, so the default data folder is one the test can watch."""
    return {"HOME": str(tmp_path), "XDG_DATA_HOME": str(tmp_path / "data")}


@pytest.mark.parametrize("verb", [["report", "-s", "s"], ["prune", "--older-than", "1d"]])
def test_an_empty_data_folder_is_refused_and_stays_empty(
    tmp_path: Path, home: dict[str, str], verb: list[str]
) -> None:
    empty = tmp_path / "pgdata"
    empty.mkdir()
    told = leaseq(*verb, "--data-dir", str(empty), env=home)
    assert told.returncode == EXIT_NO_DATABASE, told
    line = one_line(told.stderr)
    assert f"no embedded PostgreSQL in {empty}" in line
    assert "set LEASEQ_DATABASE_URL or --data-dir" in line
    assert list(empty.iterdir()) == []

    # Without a URL or a folder: the default folder, named, and left uncreated.
    default = Path(home["XDG_DATA_HOME"]) / "leaseq" / "pgdata"
    told = leaseq(*verb, env=home)
    assert told.returncode == EXIT_NO_DATABASE, told
    assert f"no embedded PostgreSQL in {default}" in one_line(told.stderr)
    assert not default.exists() and not (tmp_path / "data").exists()

    # The variable is the flag.
    told = leaseq(*verb, env={**home, "LEASEQ_DATA_DIR": str(empty)})
    assert f"no embedded PostgreSQL in {empty}" in one_line(told.stderr)


@pytest.mark.parametrize("verb", [["report", "-s", "s"], ["prune", "--older-than", "1d"]])
def test_an_unmigrated_database_is_refused(empty_database_url: str, verb: list[str]) -> None:
    told = leaseq(*verb, "--database-url", empty_database_url)
    assert told.returncode == EXIT_NO_DATABASE, told
    line = one_line(told.stderr)
    assert "no leaseq schema in the database at" in line
    assert "is this the service's database? set LEASEQ_DATABASE_URL or --data-dir" in line
    assert migrate.current(empty_database_url) is None  # nothing was created there either

    by_env = leaseq(*verb, env={"LEASEQ_DATABASE_URL": empty_database_url})
    assert by_env.returncode == EXIT_NO_DATABASE, by_env


@pytest.fixture
def data_dir() -> Iterator[Path]:
    """A folder for an embedded PostgreSQL, outside pytest's (see tests/deploy/test_serve.py)."""
    parent = Path(tempfile.mkdtemp(prefix="leaseq-test-pg-"))
    yield parent / "pgdata"
    stop_postgres(parent / "pgdata")
    shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.slow
def test_db_upgrade_creates_the_embedded_database_and_report_finds_it(data_dir: Path) -> None:
    made = leaseq("db", "upgrade", "--data-dir", str(data_dir), timeout_s=120)
    assert made.returncode == 0, made.stderr
    assert f"creating an embedded PostgreSQL: data in {data_dir}" in made.stdout
    assert f"schema at {migrate.head()}" in made.stdout
    assert not postgres_running(data_dir)  # stopped again: nobody else holds it

    shown = leaseq("report", "-s", "s", "--json", env={"LEASEQ_DATA_DIR": str(data_dir)})
    assert shown.returncode == EXIT_NOTHING_TO_AUDIT, shown.stderr  # found, and empty
    assert one_line(shown.stderr) == "error: session 's' has no leads"
    assert not postgres_running(data_dir)


async def test_a_workers_machine_asks_the_service(services: Services, database_url: str) -> None:
    """With only ``LEASEQ_URL`` (or ``--url``), the report is the service's
    ``GET /sessions/{s}/report``: the same exit statuses as the database path, and the
    database path still there for a flag."""
    service = services.start("--token", "s3cret", database_url=database_url)
    with service.client(headers={"authorization": "Bearer s3cret"}) as http:
        pushed = http.post("/sessions/s/leads", json={"leads": [{"payload": {"i": 1}}]})
        [lead_id] = pushed.json()["ids"]
        [lease] = http.post("/lease", json={"session": "s", "owner": "w1"}).json()["leases"]
        done = http.post("/complete", json={"lead_id": lead_id, "token": lease["token"]})
        assert done.status_code == 200, done.text
        served = http.get("/sessions/s/report").json()
    worker = {"LEASEQ_URL": service.url, "LEASEQ_TOKEN": "s3cret"}

    as_json = leaseq("report", "-s", "s", "--json", env=worker)
    assert as_json.returncode == 0, as_json.stderr
    assert json.loads(as_json.stdout) == served
    assert (served["completions"], served["owners"][0]["owner"]) == (1, "w1")

    shown = leaseq("report", "-s", "s", "--url", service.url, "--token", "s3cret")
    assert shown.returncode == 0, shown.stderr
    assert "no double completion, no overlapping lease" in shown.stdout and "w1" in shown.stdout

    typo = leaseq("report", "-s", "typo", env=worker)
    assert typo.returncode == EXIT_NOTHING_TO_AUDIT, typo
    assert one_line(typo.stderr) == "error: session 'typo' has no leads"

    refused = leaseq("report", "-s", "s", "--url", service.url)
    assert refused.returncode == 1 and "401 unauthorized" in one_line(refused.stderr)

    both = leaseq("report", "-s", "s", "--url", service.url, "--database-url", database_url)
    assert both.returncode == 2 and "not both" in one_line(both.stderr)

    # A database named as a flag wins over LEASEQ_URL; so does its variable.
    for flag, env in (
        (["--database-url", database_url], worker),
        ([], {**worker, "LEASEQ_DATABASE_URL": database_url}),
    ):
        read = leaseq("report", "-s", "s", "--json", *flag, env=env)
        assert read.returncode == 0, read.stderr
        assert json.loads(read.stdout) == served
