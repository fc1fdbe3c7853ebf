"""Every Prometheus metric leaseq exports, defined once.

The metrics live in their own registry (``REGISTRY``), so several apps in one
process (tests) share them without registering twice; ``GET /metrics`` renders
it. Names follow the queue's vocabulary: ``queue.lease_next`` ↔ ``POST /lease``
↔ ``leaseq_leases_total``. Knows nothing of HTTP frameworks.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
)

__all__ = [
    "COMPLETIONS",
    "CONTENT_TYPE",
    "LEASES",
    "LOST_LEASES",
    "PUSHED",
    "RELEASES",
    "RENEWALS",
    "REQUEST_LATENCY",
    "SWEEPS",
    "SWEPT",
    "WAITERS",
    "render",
]

REGISTRY = CollectorRegistry(auto_describe=True)
ProcessCollector(registry=REGISTRY)

PUSHED = Counter(
    "leaseq_pushed_leads",
    "Leads pushed (new ones; duplicate keys not counted).",
    registry=REGISTRY,
)
LEASES = Counter("leaseq_leases", "Leases handed out.", registry=REGISTRY)
RENEWALS = Counter("leaseq_renewals", "Leases renewed.", registry=REGISTRY)
RELEASES = Counter("leaseq_releases", "Leases given back.", registry=REGISTRY)
LOST_LEASES = Counter(
    "leaseq_lost_leases",
    "Renew, complete or release refused because the lease was no longer valid.",
    ["operation"],
    registry=REGISTRY,
)
COMPLETIONS = Counter(
    "leaseq_completions", "Leads completed, by final status.", ["status"], registry=REGISTRY
)
SWEEPS = Counter(
    "leaseq_sweeps", "Sweeps run, by trigger (background, api).", ["trigger"], registry=REGISTRY
)
SWEPT = Counter(
    "leaseq_swept_leads",
    "Expired leases swept, by outcome (requeued, failed).",
    ["outcome"],
    registry=REGISTRY,
)
WAITERS = Gauge(
    "leaseq_long_poll_waiters",
    "Lease requests waiting for work right now.",
    registry=REGISTRY,
)
REQUEST_LATENCY = Histogram(
    "leaseq_request_duration_seconds",
    "HTTP request latency by route template.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)

for _operation in ("renew", "complete", "release"):
    LOST_LEASES.labels(_operation)
for _status in ("done", "failed", "cached"):
    COMPLETIONS.labels(_status)
for _outcome in ("requeued", "failed"):
    SWEPT.labels(_outcome)


def render() -> bytes:
    """The registry in the Prometheus text format."""
    return generate_latest(REGISTRY)
