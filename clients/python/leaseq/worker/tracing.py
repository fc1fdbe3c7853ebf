"""The span a handler runs in: a child of its lead's ``traceparent``, where
``opentelemetry-api`` is installed (the extra ``leaseq[otel]``); nothing otherwise.

Imported lazily, once: the worker needs no OpenTelemetry, and a lead without a
``traceparent`` runs outside any span of leaseq's (docs/contract.md#trace-context).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from leaseq.worker.job import Job

TRACER = "leaseq.worker"
SPAN = "leaseq.handle"


@functools.cache
def _otel() -> Any:
    """The module ``opentelemetry.trace``, or None when it is not installed."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    return trace


@contextlib.contextmanager
def handler_span(job: Job) -> Iterator[None]:
    """Run the body in a span whose parent is the lead's traceparent (when there is one and
    OpenTelemetry is installed); the span records the handler's exception, if any."""
    traceparent = job.lead.traceparent
    trace = _otel() if traceparent is not None else None
    if trace is None:
        yield
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    parent = TraceContextTextMapPropagator().extract({"traceparent": traceparent})
    attributes = {
        "leaseq.lead_id": job.id,
        "leaseq.session": job.session,
        "leaseq.attempt": job.attempt,
    }
    tracer = trace.get_tracer(TRACER)
    with tracer.start_as_current_span(
        SPAN, context=parent, kind=trace.SpanKind.CONSUMER, attributes=attributes
    ):
        yield
