"""``leaseq worker`` as a person runs it: bad flags, a wrong URL, a program that cannot start.

Each refusal is one line and an exit status, before anything is leased; a
run's log names the service's URL; a command sees none of the worker's
``LEASEQ_*`` settings.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from pathlib import Path

import pytest

from leaseq import AsyncClient
from leaseq.model import NewLead
from tests.support.serving import Service, Services, free_port, leaseq
from tests.support.worker_support import HANDLER, exited, ledger, start_worker, tail

pytestmark = pytest.mark.service

TOKEN = "s3cret-token"
SERVE_ENV = {"LEASEQ_API_TOKENS": TOKEN}  # the module's service (conftest's ``served``)


@pytest.fixture
def session() -> str:
    return f"s-{uuid.uuid4().hex[:10]}"


def worker(service: Service, session: str, *args: str) -> tuple[int, str]:
    """``leaseq worker`` against the service to its end: its status and its stderr."""
    done = leaseq(
        "worker", "--url", service.url, "--token", TOKEN, "-s", session, *args, timeout_s=60
    )
    return done.returncode, done.stderr


@pytest.mark.parametrize(
    "flags",
    [
        ["--ttl", "-1"],
        ["--ttl", "0.5"],
        ["--ttl", "1e9"],
        ["--ttl", "nan"],
        ["--grace", "-1"],
        ["--grace", "inf"],
        ["--max-runtime", "0"],
        ["--max-runtime", "-5"],
        ["--max-runtime", "1e20"],
        ["--kill-grace", "-1"],
        ["--ttl", "3", "--kill-grace", "2"],
        ["--give-up-after", "0"],
        ["--wait", "31"],
        ["--retry-delay", "-1"],
    ],
)
async def test_an_absurd_flag_is_one_line_and_nothing_is_leased(
    service: Service, session: str, flags: list[str]
) -> None:
    async with AsyncClient(service.url, token=TOKEN) as client:
        [lead_id] = (await client.push(session, [NewLead({})])).ids
        status, stderr = await asyncio.to_thread(worker, service, session, *flags, "--", *HANDLER)
        lead = await client.get(lead_id)
    assert status == 2, stderr
    assert len(stderr.strip().splitlines()) == 1 and "Traceback" not in stderr
    flag = "--kill-grace" if "--kill-grace" in flags else flags[0]
    assert stderr.startswith(f"error: {flag} ") or "kill grace" in stderr, stderr
    assert (lead.status, lead.attempts) == ("queued", 0)


async def test_a_program_not_found_is_refused_before_any_lease(
    service: Service, session: str
) -> None:
    async with AsyncClient(service.url, token=TOKEN) as client:
        [lead_id] = (await client.push(session, [NewLead({})])).ids
        status, stderr = await asyncio.to_thread(
            worker, service, session, "--", "./no-such-program"
        )
        lead = await client.get(lead_id)
    assert (
        status == 2
        and stderr.strip() == "error: cannot run ./no-such-program: not found, or not executable"
    )
    assert (lead.status, lead.attempts) == ("queued", 0)


async def test_a_program_that_cannot_start_is_reported_once_and_its_lead_released(
    service: Service, db_url: str, session: str, tmp_path: Path
) -> None:
    """It passes the check (an executable file) but exec fails: no lead is burned in a loop."""
    broken = tmp_path / "broken"
    broken.write_text("#!/no/such/interpreter\n")
    broken.chmod(0o755)
    async with AsyncClient(service.url, token=TOKEN) as client:
        first, second = (await client.push(session, [NewLead({}), NewLead({})])).ids
        status, stderr = await asyncio.to_thread(
            worker, service, session, "-q", "--prefetch", "0", "--", str(broken)
        )
        a, b = await client.get(first), await client.get(second)
    assert status == 1, stderr
    [line] = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert "cannot start" in line and str(broken) in line
    assert (a.status, a.attempts) == ("queued", 1)  # released, its attempt spent, no more
    assert (b.status, b.attempts) == ("queued", 0)  # --prefetch 0: never leased
    assert [e for e, _, _ in ledger(db_url, first)] == ["pushed", "leased", "released"]


async def test_a_command_sees_none_of_the_workers_secrets(
    service: Service, session: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url, token=TOKEN) as client:
        [lead_id] = (await client.push(session, [NewLead({"mode": "env"})])).ids
        env = {"LEASEQ_TOKEN": TOKEN, "LEASEQ_DATABASE_URL": "postgresql://u:pw@db/x"}
        args = ["--wait", "0.5", "-q", "--", *HANDLER]
        process = start_worker(service.url, session, args, log, env=env)
        assert await exited(process, log) == 0, tail(log)
        result = (await client.get(lead_id)).result
    lead_variables = ["ATTEMPT", "CHECKPOINT_FILE", "LEAD_ID", "SESSION"]
    assert result == [f"LEASEQ_{name}" for name in lead_variables]
    text = log.read_text()
    assert "HTTP Request" not in text  # -q logs the worker's lines, not every request
    assert "finished: leased 1, done 1" in text


def test_a_worker_that_cannot_reach_its_service_says_where_and_gives_up() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    began = time.monotonic()
    wide = {"COLUMNS": "300"}  # log lines unwrapped, as on a wide terminal
    # Longer than the client's own retries of one call (up to 3.1 s), so a retry is logged.
    args = ["--url", url, "-s", "s", "--give-up-after", "6", "--", *HANDLER]
    done = leaseq("worker", *args, env=wide)
    took = time.monotonic() - began
    assert done.returncode == 1 and took < 15, (took, done.stderr)
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    retries = [line for line in lines if "lease failed" in line]
    assert retries and all(url in line for line in retries)
    assert lines[-1].startswith("error: unavailable: gave up after") and url in lines[-1]
    assert lines[-2].startswith("s: leased 0")  # the progress line ends before the error
    assert "Traceback" not in done.stderr


async def test_a_command_leaves_a_checkpoint_and_its_next_attempt_resumes_there(
    service: Service, session: str, tmp_path: Path
) -> None:
    log = tmp_path / "worker.log"
    async with AsyncClient(service.url, token=TOKEN) as client:
        [lead_id] = (await client.push(session, [NewLead({"mode": "checkpoint"})])).ids
        args = ["--wait", "0.5", "--retry-delay", "0", "-q", "--", *HANDLER]
        process = start_worker(service.url, session, args, log, env={"LEASEQ_TOKEN": TOKEN})
        assert await exited(process, log) == 0, tail(log)
        lead = await client.get(lead_id)
    assert lead.status == "done" and lead.result == {"resumed": {"step": 1}, "attempt": 2}
    assert lead.checkpoint == {"step": 1}


async def test_a_worker_works_several_sessions_or_any(
    services: Services, database_url: str, session: str
) -> None:
    """On a service of its own: ``--any-session`` takes whatever is queued there."""
    service = services.start(database_url=database_url, env=SERVE_ENV)
    named = [f"{session}-a", f"{session}-b"]
    async with AsyncClient(service.url, token=TOKEN) as client:
        for name in named:
            await client.push(name, [NewLead({"n": i}) for i in range(3)])
        args = ["-s", named[1], "--wait", "0.5", "-q", "--", *HANDLER]
        status, stderr = await asyncio.to_thread(worker, service, named[0], *args)
        assert status == 0, stderr
        for name in named:
            assert (await client.stats(name)).done == 3

        await client.push(f"{session}-c", [NewLead({})])
        status, stderr = await asyncio.to_thread(worker, service, session, "--any-session")
        assert status == 2 and "--any-session" in stderr  # a session, or any: not both
        argv = ["--url", service.url, "--token", TOKEN, "--any-session", "--wait", "0.5", "-q"]
        done = await asyncio.to_thread(leaseq, "worker", *argv, "--", *HANDLER)
        assert done.returncode == 0, done.stderr
        assert (await client.stats(f"{session}-c")).done == 1
