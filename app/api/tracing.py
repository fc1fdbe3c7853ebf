"""The service's own spans: one server span per request, optional and off by default
(``LEASEQ_TRACING``, docs/contract.md#trace-context).

FastAPI has OpenTelemetry hooks of its own (``FastAPI(telemetry=…)``, since 0.165): with
tracing on, it starts a server span per request as the request arrives, a child of the
request's ``traceparent`` header (read by OpenTelemetry's global propagator), names it after
the route's template once the route is chosen (``POST /lease``, ``GET /leads/{lead_id}``;
the router's index tells it as the router would, ``app.api.route_index``), and ends it with
the answer's status. leaseq uses those hooks rather than a middleware of its own: they see
every request (the lean routes too), and they cost nothing when off. The spans go to the
tracer provider the process has set up (``opentelemetry-instrument``, an SDK configured by
the deployment, or FastAPI's ``FASTAPI_OTEL_AUTO_CONFIGURE`` with an OTLP endpoint); with
``opentelemetry-api`` alone they are no-ops.

Only the spans: FastAPI's metrics and logs stay off (the service's metrics are
Prometheus's, its logs its own), and so do its spans per dependency, endpoint and
serialization (one span per request, not six). Off, every one of FastAPI's hooks is off,
so a request costs what it did without them, and leaseq imports nothing of OpenTelemetry.

A lease's span carries a link to the trace of each lead it hands out that has a
``traceparent``: the producer's trace, where the worker's ``leaseq.handle`` span goes too.
"""

from __future__ import annotations

from collections.abc import Sequence

from fastapi.telemetry import TelemetryConfig

from app.config import Settings
from leaseq.model import Lease


def telemetry(settings: Settings) -> TelemetryConfig:
    """FastAPI's telemetry for ``settings``: a server span per request, or nothing at all."""
    return {
        "tracing": settings.tracing,
        "metrics": False,
        "logs": False,
        "operation_spans": False,
    }


def link_leads(leases: Sequence[Lease]) -> None:
    """Link the request's span to the trace of each leased lead with a ``traceparent`` (only
    called with tracing on; nothing when the span does not record)."""
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    span = trace.get_current_span()
    if not span.is_recording():
        return
    propagator = TraceContextTextMapPropagator()
    for lease in leases:
        if lease.lead.traceparent is None:
            continue
        lead_context = propagator.extract({"traceparent": lease.lead.traceparent})
        linked = trace.get_current_span(lead_context).get_span_context()
        span.add_link(linked, {"leaseq.lead_id": lease.lead.id})
