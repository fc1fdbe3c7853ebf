"""``wait_for`` of both clients and ``leaseq push --wait``, against a real ``leaseq serve``."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import threading
import time
import uuid

import pytest

from leaseq import AsyncClient, Client
from leaseq.errors import NotFound
from tests.support.serving import ROOT, Service, child_env

pytestmark = pytest.mark.service

WAIT_S = 20


def session_name() -> str:
    return f"w-{uuid.uuid4().hex[:8]}"


async def test_async_wait_for_answers_when_the_lead_ends(service: Service) -> None:
    session = session_name()
    async with AsyncClient(service.url) as client:
        [lead_id] = (await client.push(session, [{"payload": {"n": 1}}])).ids
        waiting = asyncio.create_task(client.wait_for(lead_id, WAIT_S))
        [lease] = await client.lease(session, "w")
        started = time.monotonic()
        await client.complete(lease.lead.id, lease.token, "done", {"answer": 42})
        lead = await asyncio.wait_for(waiting, WAIT_S)
        assert time.monotonic() - started < WAIT_S / 4
        assert (lead.id, lead.status, lead.result) == (lead_id, "done", {"answer": 42})
        # Not ended within the timeout: the lead as it is; 0 looks once.
        [other] = (await client.push(session, [{"payload": {}}])).ids
        assert (await client.wait_for(other, 0.3)).status == "queued"
        assert (await client.wait_for(other, 0)).status == "queued"
        with pytest.raises(NotFound):
            await client.wait_for(10**12, 1)


def test_sync_wait_for_answers_when_the_lead_ends(service: Service) -> None:
    session = session_name()
    with Client(service.url) as client:
        [lead_id] = client.push(session, [{"payload": {}}]).ids
        [lease] = client.lease(session, "w")
        finisher = threading.Timer(
            0.2, lambda: client.complete(lease.lead.id, lease.token, "failed", error="no")
        )
        finisher.start()
        started = time.monotonic()
        lead = client.wait_for(lead_id, WAIT_S)
        finisher.join()
        assert time.monotonic() - started < WAIT_S / 4
        assert (lead.status, lead.error) == ("failed", "no")


def test_push_wait_prints_each_result_as_it_ends(service: Service) -> None:
    session = session_name()
    lines = "".join(json.dumps({"payload": {"n": n}}) + "\n" for n in range(3))
    command = [sys.executable, "-m", "leaseq.cli", "push", "-s", session, "--wait", "--json"]
    process = subprocess.Popen(
        [*command, "--url", service.url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=child_env(),
        cwd=ROOT,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        process.stdin.write(lines)
        process.stdin.close()
        pushed = json.loads(process.stdout.readline())
        assert len(pushed["ids"]) == 3
        printed = []
        with Client(service.url) as client:
            for n in range(3):
                [lease] = client.lease(session, "w")
                client.complete(lease.lead.id, lease.token, "done", {"n": n})
                # Printed as it ends, before the next one is even leased.
                printed.append(json.loads(process.stdout.readline()))
                assert printed[-1] == {
                    "id": lease.lead.id,
                    "status": "done",
                    "result": {"n": n},
                    "error": None,
                }
        assert process.wait(timeout=WAIT_S) == 0
        assert process.stdout.read() == ""
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.stdout.close()
        if process.stderr is not None:
            process.stderr.close()
    assert sorted(line["id"] for line in printed) == sorted(pushed["ids"])
