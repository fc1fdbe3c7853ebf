"""The Prometheus metrics of a worker process (``leaseq worker --metrics-port``).

They live in their own registry, apart from the service's (``app.metrics``):
a worker is another process with other counters. Knows nothing of HTTP frameworks.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server

REGISTRY = CollectorRegistry(auto_describe=True)

LEASED = Counter("leaseq_worker_leased", "Leads this worker leased.", registry=REGISTRY)
COMPLETED = Counter(
    "leaseq_worker_completed",
    "Leads this worker completed, by final status (done, cached, failed).",
    ["status"],
    registry=REGISTRY,
)
FAILED = Counter(
    "leaseq_worker_failed",
    "Handler attempts that failed (exception, non-zero exit, max runtime), retried or not.",
    registry=REGISTRY,
)
LOST = Counter(
    "leaseq_worker_lost",
    "Leases lost while held: the handler was cancelled and nothing was sent.",
    registry=REGISTRY,
)
RELEASED = Counter(
    "leaseq_worker_released",
    "Leads given back, by reason (retry after a failure, shutdown).",
    ["reason"],
    registry=REGISTRY,
)
HANDLER_SECONDS = Histogram(
    "leaseq_worker_handler_duration_seconds",
    "Time from lease to the handler's end, per lead.",
    buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600),
    registry=REGISTRY,
)

for _status in ("done", "cached", "failed"):
    COMPLETED.labels(_status)
for _reason in ("retry", "shutdown"):
    RELEASED.labels(_reason)


def serve(port: int, addr: str = "127.0.0.1") -> None:
    """Serve the registry at ``http://addr:port/metrics`` from a background thread."""
    start_http_server(port, addr=addr, registry=REGISTRY)
