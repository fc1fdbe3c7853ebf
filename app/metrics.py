"""Every Prometheus metric leaseq exports, defined once.

The metrics live in their own registry (``REGISTRY``), so several apps in one
process (tests) share them without registering twice; ``GET /metrics`` renders
it. Names follow the queue's vocabulary: ``queue.lease_next`` ↔ ``POST /lease``
↔ ``leaseq_leases_total``. Knows nothing of HTTP frameworks.

Several server processes: when ``PROMETHEUS_MULTIPROC_DIR`` is set (``leaseq
serve --workers N`` with N > 1 sets it to a fresh folder it removes on exit),
prometheus-client keeps every value in files there and a scrape answered by
any process sums the counters and histograms of all of them; the gauges of
live processes are summed too (``livesum``), and a process marks itself dead
as it stops (``process_exit``).

``leaseq_leads``, ``leaseq_oldest_available_age_seconds``,
``leaseq_completions_per_second``, ``leaseq_suggested_workers`` and
``leaseq_lease_seconds_per_second`` are not kept here: they are read from the
database at each scrape (``render``), so every process answers the same. At most
``MAX_SESSIONS`` sessions (most pending first) get their own label; the rest
are summed under ``session="_other"`` (not a valid session name), so the
number of series stays bounded.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

from prometheus_client import CONTENT_TYPE_LATEST as CONTENT_TYPE
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    ProcessCollector,
    generate_latest,
    multiprocess,
)
from prometheus_client.core import GaugeMetricFamily, Metric

from leaseq.model import FINAL_STATUSES, STATUSES, AllCounts, Counts, Scaling, SweepResult

__all__ = [
    "AUTOVACUUM",
    "COMPLETIONS",
    "CONTENT_TYPE",
    "GROUP_SIZES",
    "LEASES",
    "LOST_LEASES",
    "OUTCOME_WAITERS",
    "POOL",
    "PUSHED",
    "PUSH_REFUSALS",
    "RELEASES",
    "RENEWALS",
    "REQUEST_LATENCY",
    "SWEEPS",
    "SWEPT",
    "WAITERS",
    "count_sweep",
    "render",
]

# Read by prometheus-client in every process; `leaseq serve --workers N` sets it (app.api.serve).
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
MAX_SESSIONS = 50
OTHER_SESSIONS = "_other"

REGISTRY = CollectorRegistry(auto_describe=True)
if not os.environ.get(MULTIPROC_ENV):
    ProcessCollector(registry=REGISTRY)  # per process; meaningless summed

PUSH_REFUSALS = Counter(
    "leaseq_push_refusals",
    "Pushes refused (429 quota_exceeded) because they would pass the session's max_queued, "
    "by session (only sessions refused at least once have a series).",
    ["session"],
    registry=REGISTRY,
)
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
    multiprocess_mode="livesum",
)
OUTCOME_WAITERS = Gauge(
    "leaseq_outcome_waiters",
    "Requests waiting for a lead's outcome (GET /leads/{id}?wait_s=n) right now.",
    registry=REGISTRY,
    multiprocess_mode="livesum",
)
POOL = Gauge(
    "leaseq_db_pool_connections",
    "Database connections of the server processes' pools: checked_out (in use) and size.",
    ["state"],
    registry=REGISTRY,
    multiprocess_mode="livesum",
)
AUTOVACUUM = Gauge(
    "leaseq_database_autovacuum_enabled",
    "1 when the PostgreSQL server runs autovacuum (SHOW autovacuum), 0 when it is off and "
    "the space of finished and pruned leads is never reclaimed; read when a server process "
    "first reaches the database (0 until then).",
    registry=REGISTRY,
    multiprocess_mode="livemin",
)
REQUEST_LATENCY = Histogram(
    "leaseq_request_duration_seconds",
    "HTTP request latency by route template.",
    ["method", "route", "status"],
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
    registry=REGISTRY,
)

GROUP_SIZES = Histogram(
    "leaseq_group_commit_size",
    "Calls that went together in one statement (group commit), by kind (lease, renew, "
    "complete, lease_together: keyed leases and completions with next): 1 for a call that "
    "found nothing of its kind running.",
    ["kind"],
    buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256),
    registry=REGISTRY,
)

for _operation in ("renew", "complete", "release"):
    LOST_LEASES.labels(_operation)
for _status in FINAL_STATUSES:
    COMPLETIONS.labels(_status)
for _outcome in ("requeued", "failed"):
    SWEPT.labels(_outcome)
for _state in ("checked_out", "size"):
    POOL.labels(_state)
for _kind in ("lease", "lease_together", "renew", "complete"):
    GROUP_SIZES.labels(_kind)


def count_sweep(result: SweepResult, trigger: str) -> None:
    """Count one sweep (boot, background, api) and the leases it requeued or failed."""
    SWEEPS.labels(trigger).inc()
    SWEPT.labels("requeued").inc(result.requeued)
    SWEPT.labels("failed").inc(result.failed)


def _shown(stats: AllCounts, max_sessions: int) -> list[tuple[str, Counts]]:
    """The sessions with a label of their own (most pending first), the rest as ``_other``."""
    ranked = sorted(stats.sessions.items(), key=lambda item: (-item[1].pending, item[0]))
    shown: list[tuple[str, Counts]] = ranked[:max_sessions]
    rest = ranked[max_sessions:]
    if rest:
        other = Counts()
        for _, counts in rest:
            other = other + counts
        shown.append((OTHER_SESSIONS, other))
    return shown


def leads_family(stats: AllCounts, max_sessions: int = MAX_SESSIONS) -> GaugeMetricFamily:
    """``leaseq_leads{session, status}``: the busiest sessions, the rest as ``_other``."""
    family = GaugeMetricFamily(
        "leaseq_leads",
        f"Leads by session and status, read at scrape time (beyond {max_sessions} sessions, "
        f"the least pending are summed as session {OTHER_SESSIONS}).",
        labels=["session", "status"],
    )
    for session, counts in _shown(stats, max_sessions):
        for status in STATUSES:
            family.add_metric([session, status], getattr(counts, status))
    return family


def oldest_available_family(
    stats: AllCounts, max_sessions: int = MAX_SESSIONS
) -> GaugeMetricFamily:
    """``leaseq_oldest_available_age_seconds{session}``: the scaling signal, per session."""
    family = GaugeMetricFamily(
        "leaseq_oldest_available_age_seconds",
        "Seconds, on the database clock, since the oldest lead that could be leased now became "
        "available; 0 when none. Read at scrape time, for the sessions of leaseq_leads "
        f"({OTHER_SESSIONS}: the oldest of the rest). Scale workers on it.",
        labels=["session"],
    )
    for session, counts in _shown(stats, max_sessions):
        family.add_metric([session], counts.oldest_available_age_s or 0.0)
    return family


def scaling_families(
    stats: AllCounts, sessions: dict[str, Scaling], fleet: Scaling, max_sessions: int = MAX_SESSIONS
) -> list[GaugeMetricFamily]:
    """``leaseq_completions_per_second{session}`` and ``leaseq_suggested_workers{session}``
    (docs/beyond.md#a-signal-to-scale-on) for the sessions of ``leaseq_leads`` (not
    ``_other``), and for the fleet of them all as session ``*``."""
    rate = GaugeMetricFamily(
        "leaseq_completions_per_second",
        "Leads finished per second over the last minute, by session (* : every session).",
        labels=["session"],
    )
    workers = GaugeMetricFamily(
        "leaseq_suggested_workers",
        "Workers enough to finish the session's backlog and leads in flight within 60 s at "
        "the last minute's rate per worker (* : one pool for every session). Scale on it.",
        labels=["session"],
    )
    for name, _ in _shown(stats, max_sessions):
        signal = sessions.get(name)
        if signal is not None:
            rate.add_metric([name], signal.completions_per_s)
            workers.add_metric([name], signal.suggested_workers)
    rate.add_metric([fleet.session], fleet.completions_per_s)
    workers.add_metric([fleet.session], fleet.suggested_workers)
    return [rate, workers]


def lease_time_family(
    stats: AllCounts,
    lease_seconds: dict[str, float],
    window_s: float,
    max_sessions: int = MAX_SESSIONS,
) -> GaugeMetricFamily:
    """``leaseq_lease_seconds_per_second{session}`` (docs/beyond.md#fair-share-by-time): the
    seconds workers held each session's leads, over the leases that ended in the last
    ``window_s``, per second; for the sessions of ``leaseq_leads`` (not ``_other``), and for
    all of them as session ``*``. A session's share of the workers' time is its value over
    the ``*`` one's."""
    family = GaugeMetricFamily(
        "leaseq_lease_seconds_per_second",
        f"Seconds workers held the session's leads, over the leases that ended in the last "
        f"{window_s:g} s, per second (as rate() of a counter of lease seconds; * : every "
        "session). A session's share of the workers' time: its value over session *'s.",
        labels=["session"],
    )
    for name, _ in _shown(stats, max_sessions):
        if name != OTHER_SESSIONS:
            family.add_metric([name], lease_seconds.get(name, 0.0) / window_s)
    every = sum(lease_seconds.get(name, 0.0) for name in stats.sessions)
    family.add_metric(["*"], every / window_s)
    return family


class _Snapshot:
    """A collector that yields families built for one scrape."""

    def __init__(self, families: Iterable[Metric]) -> None:
        self.families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self.families


def render(
    stats: AllCounts | None = None,
    scaling: tuple[dict[str, Scaling], Scaling] | None = None,
    lease_time: tuple[dict[str, float], float] | None = None,
) -> bytes:
    """Every metric in the Prometheus text format (of every process when multiprocess).

    ``stats`` (``Queue.stats_all``) adds ``leaseq_leads`` and
    ``leaseq_oldest_available_age_seconds``; None leaves them out (the database did
    not answer). ``scaling`` (each session's signal and the fleet's) adds
    ``leaseq_completions_per_second`` and ``leaseq_suggested_workers``; ``lease_time``
    (each session's lease seconds over a window, and the window's seconds),
    ``leaseq_lease_seconds_per_second``.
    """
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    else:
        registry = REGISTRY
    text = generate_latest(registry)
    if stats is not None:
        snapshot = CollectorRegistry(auto_describe=False)
        families = [leads_family(stats), oldest_available_family(stats)]
        if scaling is not None:
            families += scaling_families(stats, *scaling)
        if lease_time is not None:
            families.append(lease_time_family(stats, *lease_time))
        snapshot.register(_Snapshot(families))
        text += generate_latest(snapshot)
    return text


def process_exit() -> None:
    """Forget this process's live gauges (multiprocess mode); call as the process stops."""
    if os.environ.get(MULTIPROC_ENV):
        multiprocess.mark_process_dead(os.getpid())  # type: ignore[no-untyped-call]
