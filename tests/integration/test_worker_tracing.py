"""Trace context in the client and the worker (docs/contract.md#trace-context), against a real
``leaseq serve``: the push's header option and a lead's own value, the handler's span (where
OpenTelemetry is installed) and ``TRACEPARENT`` in a command's environment."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from leaseq import AsyncClient, Client
from leaseq.model import NewLead
from leaseq.worker import Job, Worker
from tests.support.serving import Service
from tests.support.tracing import memory_spans
from tests.support.worker_support import HANDLER, exited, start_worker

pytestmark = pytest.mark.service

MINE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
HEADER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


@pytest.fixture
def session() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


async def test_the_clients_send_a_lead_s_own_traceparent_and_the_header(
    service: Service, session: str
) -> None:
    async with AsyncClient(service.url) as client:
        leads = [NewLead({}), NewLead({}, traceparent=MINE)]
        ids = (await client.push(session, leads, traceparent=HEADER)).ids
        assert [(await client.get(i)).traceparent for i in ids] == [HEADER, MINE]
    with Client(service.url) as sync:
        [plain] = sync.push(session, [NewLead({})]).ids
        assert sync.get(plain).traceparent is None


@pytest.fixture(scope="module")
def spans() -> Iterator[Any]:
    """The spans ended in this process, kept in memory (``tests.support.tracing``)."""
    exporter = memory_spans()
    yield exporter
    exporter.clear()


@pytest.mark.parametrize("kind", ["async", "sync"])
async def test_the_handler_runs_in_a_child_span_of_the_lead_s_traceparent(
    service: Service, session: str, spans: Any, kind: str
) -> None:
    from opentelemetry import trace

    seen: dict[int, Any] = {}

    def note(job: Job) -> None:
        seen[job.id] = trace.get_current_span().get_span_context()

    async def handle_async(job: Job) -> None:
        note(job)

    handler = handle_async if kind == "async" else note
    spans.clear()
    async with AsyncClient(service.url) as client:
        traced, plain = (
            await client.push(session, [NewLead({}, traceparent=MINE), NewLead({})])
        ).ids
        async with asyncio.timeout(20):
            stats = await Worker(client, session, handler, wait_s=0.3).run()
    assert stats.done == 2
    [span] = [each for each in spans.get_finished_spans() if each.name == "leaseq.handle"]
    _version, trace_id, parent_id, _flags = MINE.split("-")
    assert span.context.trace_id == int(trace_id, 16)
    assert span.parent is not None and span.parent.span_id == int(parent_id, 16)
    assert span.attributes["leaseq.lead_id"] == traced
    assert seen[traced].span_id == span.context.span_id  # the handler ran inside it
    assert not seen[plain].is_valid  # a lead without trace context: no span


async def test_a_command_gets_traceparent_in_its_environment(
    service: Service, session: str, tmp_path: Path
) -> None:
    async with AsyncClient(service.url) as client:
        leads = [
            NewLead({"mode": "traceparent"}, traceparent=MINE),
            NewLead({"mode": "traceparent"}),
        ]
        ids = (await client.push(session, leads)).ids
        log = tmp_path / "worker.log"
        worker = start_worker(service.url, session, ["--wait", "0.5", "--", *HANDLER], log)
        assert await exited(worker, log) == 0
        results = [(await client.get(i)).result for i in ids]
    assert results == [{"traceparent": MINE}, {"traceparent": None}]
