"""The service's own spans (docs/contract.md#trace-context): off by default, none recorded;
with ``tracing`` on, one server span per request, named after its route's template, a child
of the request's ``traceparent``, and a lease's linked to its leads' traces.

The spans go to the process's global tracer provider, here the SDK's with an in-memory
exporter (``tests.support.tracing``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.support.in_process import Serve
from tests.support.tracing import memory_spans

HEADER = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
WORKER = "00-5b8efff798038103d269b633813fc60c-eee19b7ec3c1b174-01"
MINE = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def spans() -> Iterator[Any]:
    exporter = memory_spans()
    exporter.clear()
    yield exporter
    exporter.clear()


def ids_of(traceparent: str) -> tuple[int, int]:
    """The trace id and the parent (span) id of a traceparent."""
    _version, trace_id, span_id, _flags = traceparent.split("-")
    return int(trace_id, 16), int(span_id, 16)


async def traffic(client: httpx.AsyncClient) -> int:
    """A push under HEADER (one lead with its own traceparent), a lease under WORKER, a read
    and a completion without any; the lead's id."""
    pushed = await client.post(
        "/sessions/s/leads",
        json={"leads": [{"payload": {}, "traceparent": MINE}]},
        headers={"traceparent": HEADER},
    )
    assert pushed.status_code == 201, pushed.text
    [lead_id] = pushed.json()["ids"]
    leased = await client.post(
        "/lease", json={"session": "s", "owner": "w"}, headers={"traceparent": WORKER}
    )
    [held] = leased.json()["leases"]
    assert (await client.get(f"/leads/{lead_id}")).status_code == 200
    done = await client.post("/complete", json={"lead_id": lead_id, "token": held["token"]})
    assert done.status_code == 200
    return int(lead_id)


async def test_off_by_default_the_service_records_no_span(
    client: httpx.AsyncClient, spans: Any
) -> None:
    await traffic(client)
    assert spans.get_finished_spans() == ()


async def test_on_each_request_has_a_server_span_under_its_traceparent(
    serve: Serve, spans: Any
) -> None:
    from opentelemetry.trace import SpanKind

    async with serve(tracing=True) as client:
        lead_id = await traffic(client)
    by_name = {span.name: span for span in spans.get_finished_spans()}
    assert set(by_name) == {
        "POST /sessions/{session}/leads",
        "POST /lease",
        "GET /leads/{lead_id}",
        "POST /complete",
    }
    assert {span.kind for span in by_name.values()} == {SpanKind.SERVER}
    for name, traceparent in (("POST /sessions/{session}/leads", HEADER), ("POST /lease", WORKER)):
        span = by_name[name]
        trace_id, parent_id = ids_of(traceparent)
        assert span.context.trace_id == trace_id, name
        assert span.parent is not None and span.parent.span_id == parent_id, name
        assert span.parent.is_remote
        assert span.attributes["http.response.status_code"] in (200, 201)
    # Without a traceparent, a request starts a trace of its own.
    for name in ("GET /leads/{lead_id}", "POST /complete"):
        assert by_name[name].parent is None
        assert by_name[name].context.trace_id not in (ids_of(HEADER)[0], ids_of(WORKER)[0])
    # The lease links to the trace of the lead it handed out (its own traceparent).
    [link] = by_name["POST /lease"].links
    assert (link.context.trace_id, link.context.span_id) == ids_of(MINE)
    assert link.attributes["leaseq.lead_id"] == lead_id


async def test_a_malformed_traceparent_starts_a_trace_of_its_own(serve: Serve, spans: Any) -> None:
    async with serve(tracing=True) as client:
        answer = await client.get("/sessions/s/stats", headers={"traceparent": "not-a-trace"})
        assert answer.status_code == 200
    [span] = spans.get_finished_spans()
    assert span.name == "GET /sessions/{session}/stats" and span.parent is None
