"""What a worker counts, and its Prometheus metrics (``leaseq worker --metrics-port``).

prometheus-client is the ``metrics`` extra (``pip install 'leaseq[metrics]'``):
nothing imports it until a worker asks for Prometheus, so the client works
without it. A worker counts through a ``Metrics``; the base class counts
nothing, ``prometheus()`` keeps the counters in a registry of their own (a
worker is another process than the service, with other counters).
"""

from __future__ import annotations

import functools
from typing import Literal

from leaseq.model import FINAL_STATUSES, FinalStatus

ReleaseReason = Literal["retry", "shutdown", "throttle"]
RELEASE_REASONS: tuple[ReleaseReason, ...] = ("retry", "shutdown", "throttle")
HANDLER_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 900, 3600)


class Metrics:
    """The events a worker reports; this one records nothing."""

    def leased(self) -> None:
        """A lead was leased."""

    def completed(self, status: FinalStatus) -> None:
        """A lead was completed with ``status``."""

    def failed(self) -> None:
        """A handler attempt failed (exception, non-zero exit, max runtime)."""

    def lost(self) -> None:
        """A lease was lost while held; nothing was sent."""

    def released(self, reason: ReleaseReason) -> None:
        """A lead was given back."""

    def abandoned(self) -> None:
        """A handler did not stop when told; its lease was left to expire."""

    def handled(self, seconds: float) -> None:
        """A handler ran for ``seconds`` (from the lease to its end)."""


class MetricsUnavailable(RuntimeError):
    """prometheus-client is not installed."""


class _Prometheus(Metrics):
    def __init__(self) -> None:
        try:
            from prometheus_client import CollectorRegistry, Counter, Histogram
        except ImportError:
            raise MetricsUnavailable(
                "Prometheus metrics need prometheus-client: pip install 'leaseq[metrics]'"
            ) from None
        self.registry = CollectorRegistry(auto_describe=True)
        self._leased = Counter(
            "leaseq_worker_leased", "Leads this worker leased.", registry=self.registry
        )
        self._completed = Counter(
            "leaseq_worker_completed",
            "Leads this worker completed, by final status (done, cached, failed).",
            ["status"],
            registry=self.registry,
        )
        self._failed = Counter(
            "leaseq_worker_failed",
            "Handler attempts that failed (exception, non-zero exit, max runtime), retried or not.",
            registry=self.registry,
        )
        self._lost = Counter(
            "leaseq_worker_lost",
            "Leases lost while held: the handler was cancelled and nothing was sent.",
            registry=self.registry,
        )
        self._released = Counter(
            "leaseq_worker_released",
            "Leads given back, by reason (retry after a failure, shutdown).",
            ["reason"],
            registry=self.registry,
        )
        self._abandoned = Counter(
            "leaseq_worker_abandoned",
            "Handlers that did not stop when told: their leases were left to expire, not released.",
            registry=self.registry,
        )
        self._handled = Histogram(
            "leaseq_worker_handler_duration_seconds",
            "Time from lease to the handler's end, per lead.",
            buckets=HANDLER_BUCKETS,
            registry=self.registry,
        )
        for status in FINAL_STATUSES:
            self._completed.labels(status)
        for reason in RELEASE_REASONS:
            self._released.labels(reason)

    def leased(self) -> None:
        self._leased.inc()

    def completed(self, status: FinalStatus) -> None:
        self._completed.labels(status).inc()

    def failed(self) -> None:
        self._failed.inc()

    def lost(self) -> None:
        self._lost.inc()

    def released(self, reason: ReleaseReason) -> None:
        self._released.labels(reason).inc()

    def abandoned(self) -> None:
        self._abandoned.inc()

    def handled(self, seconds: float) -> None:
        self._handled.observe(seconds)

    def serve(self, port: int, addr: str) -> None:
        from prometheus_client import start_http_server

        start_http_server(port, addr=addr, registry=self.registry)


@functools.cache
def prometheus() -> _Prometheus:
    """This process's worker metrics in a Prometheus registry. Raises MetricsUnavailable."""
    return _Prometheus()


def serve(port: int, addr: str = "127.0.0.1") -> Metrics:
    """Serve this process's worker metrics at ``http://addr:port/metrics`` (a thread).

    Raises MetricsUnavailable without prometheus-client, OSError when the port is taken.
    """
    metrics = prometheus()
    metrics.serve(port, addr)
    return metrics
