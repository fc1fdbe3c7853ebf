"""Spans ended in this test process, kept in memory by OpenTelemetry's SDK.

OpenTelemetry lets a process set its global tracer provider once, so every test that reads
spans shares this one: the first asks for it, later ones get the same exporter (and clear
it before they look). Where the SDK is not installed, the test skips.
"""

from __future__ import annotations

import functools
from typing import Any

import pytest

OTEL_MISSING = "opentelemetry-api and -sdk are not installed: pip install -e '.[dev]' to run it"


@functools.cache
def _exporter() -> Any:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return exporter


def memory_spans() -> Any:
    """The process's in-memory span exporter (``get_finished_spans()``, ``clear()``), the
    global tracer provider set to export to it the first time."""
    pytest.importorskip("opentelemetry.sdk.trace", reason=OTEL_MISSING)
    return _exporter()
