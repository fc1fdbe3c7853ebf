"""The values of the queue, shared by the service and its clients: frozen dataclasses, no HTTP.

``Status`` and ``FinalStatus`` are the one source of the status lists: the
database's check constraint, the metrics, the dashboard and the validation
all derive theirs from them (``STATUSES``, ``FINAL_STATUSES``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal, get_args

Status = Literal["queued", "leased", "done", "failed", "cached"]
FinalStatus = Literal["done", "failed", "cached"]
JSON = Any

STATUSES: tuple[Status, ...] = get_args(Status)
FINAL_STATUSES: tuple[FinalStatus, ...] = get_args(FinalStatus)


@dataclass(frozen=True, slots=True)
class NewLead:
    """A lead to push. Only ``payload`` is required."""

    payload: dict[str, JSON]
    priority: int = 0
    key: str | None = None
    depth: int = 0
    parent_id: int | None = None
    max_attempts: int | None = None
    delay_s: float = 0.0
    # Flow control: at most the session's max_leased_per_key leads of one key leased at once;
    # no renewal past max_runtime_s after a lease (None: the session's default).
    concurrency_key: str | None = None
    max_runtime_s: int | None = None
    # W3C Trace Context: the producer's span, for the worker (docs/contract.md#trace-context).
    traceparent: str | None = None
    # Dependencies: ids of leads of the session, or {"key": k} for the lead with that key
    # (pushed before, or earlier in the same call); not available until each is done or
    # cached, failed when one fails (docs/contract.md#dependencies).
    after: Sequence[int | Mapping[str, str]] = ()


@dataclass(frozen=True, slots=True)
class Lead:
    """A lead as stored; its lease token is never shown.

    ``owner`` is the worker that holds it, or held it last. These fields, in this order, are
    the one list of a lead's fields: the service selects these columns and answers this
    object (its API model is made from them), and the client reads it back by them.
    """

    id: int
    session: str
    priority: int
    payload: dict[str, JSON]
    key: str | None
    status: Status
    owner: str | None
    attempts: int
    max_attempts: int
    available_at: datetime
    lease_expires_at: datetime | None
    result: JSON
    error: str | None
    created_at: datetime
    updated_at: datetime
    depth: int
    parent_id: int | None
    checkpoint: JSON = None  # what a holder's renewal last carried; the next holder resumes there
    concurrency_key: str | None = None
    max_runtime_s: int | None = None  # its own; None: the session's default, if any
    traceparent: str | None = None  # W3C Trace Context of the push; None: none
    after: list[int] = field(default_factory=list)  # the ids it waits on; []: none


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's claim on one lead; ``attempt`` is a fencing number that only grows.

    ``ttl_s`` is the seconds granted: a worker times its heartbeats and its
    deadline from when it sent the request, never by comparing ``expires_at``
    (the database's clock) with its own. None only from a service too old to say.
    """

    lead: Lead
    token: str
    attempt: int
    owner: str
    expires_at: datetime
    ttl_s: float | None = None
    # The lease named and signed by the service, for the writers downstream to check
    # (``leaseq.verify_fence``; docs/beyond.md#fences). None from a service without fences.
    fence: str | None = None


@dataclass(frozen=True, slots=True)
class Renewal:
    """A renewed lease: its new expiry (database clock), the seconds granted, and its fence
    with the new expiry."""

    expires_at: datetime
    ttl_s: float
    fence: str | None = None
    attempt: int | None = None  # the lease's (the service's, to sign its fence)


@dataclass(frozen=True, slots=True)
class PushResult:
    """Ids in input order; a duplicate key's existing id stands in its place."""

    ids: list[int]
    created: int
    duplicates: int


@dataclass(frozen=True, slots=True)
class RenewItem:
    """A renewal; ``checkpoint`` (any JSON but null) is stored on the lead when given."""

    lead_id: int
    token: str
    ttl_s: float | None = None
    checkpoint: JSON = None


@dataclass(frozen=True, slots=True)
class CompleteItem:
    lead_id: int
    token: str
    status: FinalStatus = "done"
    result: JSON = None
    error: str | None = None


@dataclass(frozen=True, slots=True)
class NextLease:
    """A lease asked for along with a completion (``next``, docs/contract.md#complete-and-lease),
    taken once it is done.

    ``session``: one session's name; several; None, any session. ``ttl_s`` None:
    the service's default.
    """

    session: str | Sequence[str] | None
    owner: str
    max: int = 1
    ttl_s: float | None = None
    wait_s: float = 0.0


@dataclass(frozen=True, slots=True)
class ItemResult:
    """One answer of a batch: ok, or the code of why not (a renewal's: with its expiry and ttl)."""

    lead_id: int
    ok: bool
    expires_at: datetime | None = None
    code: str | None = None
    ttl_s: float | None = None
    # A renewal's, when ok: the lease's attempt (the service's, to sign) and its new fence.
    attempt: int | None = None
    fence: str | None = None


@dataclass(frozen=True, slots=True)
class Scaling:
    """How many workers a session (or a fleet: ``session`` ``*``) calls for
    (docs/beyond.md#a-signal-to-scale-on): its ``backlog`` (queued leads), the leads
    ``leased`` now, the age of its oldest available lead (None: none), its completions per
    second over the last minute, and ``suggested_workers`` for the target wait asked."""

    session: str
    backlog: int
    leased: int
    oldest_available_age_s: float | None
    completions_per_s: float
    suggested_workers: int


@dataclass(frozen=True, slots=True)
class SweepResult:
    requeued: int = 0
    failed: int = 0


@dataclass(frozen=True, slots=True)
class Counts:
    """Leads by status; pending = queued + leased.

    ``oldest_available_age_s``: seconds (database clock) since the oldest lead
    that could be leased now became available; None when there is none. The
    scaling signal: it grows while work waits for a worker, whatever the depth.
    A sum of counts carries the oldest of its parts. It is a reading of the
    clock, not a count: counts compare equal whatever their ages.
    """

    queued: int = 0
    leased: int = 0
    done: int = 0
    failed: int = 0
    cached: int = 0
    # Queued leads waiting on others (docs/contract.md#dependencies): counted in queued too.
    blocked: int = 0
    oldest_available_age_s: float | None = field(default=None, compare=False)
    # No lease of the session begins before this instant (database clock); None: not paused.
    paused_until: datetime | None = field(default=None, compare=False)

    @property
    def pending(self) -> int:
        return self.queued + self.leased

    def __add__(self, other: Counts) -> Counts:
        ages = [
            a for a in (self.oldest_available_age_s, other.oldest_available_age_s) if a is not None
        ]
        return Counts(
            self.queued + other.queued,
            self.leased + other.leased,
            self.done + other.done,
            self.failed + other.failed,
            self.cached + other.cached,
            self.blocked + other.blocked,
            max(ages, default=None),
        )


@dataclass(frozen=True, slots=True)
class SessionSettings:
    """How a session takes part in a lease across sessions, and its limits
    (docs/contract.md#fleets).

    ``weight``: its share of the leases against the other sessions with work.
    ``max_leased``: at most this many of its leads leased at once (0 holds it
    back entirely); ``rate_per_s`` with ``burst``: a token bucket on the
    leases it is granted (``burst`` None: one second's worth, at least 1).
    ``max_leased_per_key``: at most this many leads of one ``concurrency_key``
    leased at once; ``max_runtime_s``: the default maximum runtime of its leads;
    ``max_queued``: at most this many of its leads queued (backpressure: a push past it is
    refused with ``QuotaExceeded``; None: the service's ``LEASEQ_MAX_QUEUED``).
    None is no limit. Each has its range in ``leaseq.limits``.

    ``paused_until`` is not a setting but shown with them: no lease of the
    session begins before it (database clock); set by a pause or a throttled
    release, never by a change of settings.
    """

    weight: float = 1.0
    max_leased: int | None = None
    rate_per_s: float | None = None
    burst: int | None = None
    max_leased_per_key: int | None = None
    max_runtime_s: int | None = None
    max_queued: int | None = None
    paused_until: datetime | None = field(default=None, compare=False)

    @property
    def limited(self) -> bool:
        """A cap, a rate or a cap per key: its leases take turns on the session's settings row."""
        return (
            self.max_leased is not None
            or self.rate_per_s is not None
            or self.max_leased_per_key is not None
        )


@dataclass(frozen=True, slots=True)
class AllCounts:
    sessions: dict[str, Counts] = field(default_factory=dict)
    total: Counts = field(default_factory=Counts)


@dataclass(frozen=True, slots=True)
class ApiToken:
    """A scoped API token as the service lists it; ``token`` only in the answer that created
    it (the service keeps a hash, never the token)."""

    name: str
    role: str
    sessions: str
    created_at: datetime
    expires_at: datetime | None = None
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    token: str | None = None


@dataclass(frozen=True, slots=True)
class Schedule:
    """A lead pushed into ``session`` at each tick of ``cron`` in ``timezone`` (an IANA name);
    ``lead`` as stored (payload, priority, max_attempts, delay_s), ``next_tick`` the next
    one due on the service's database clock."""

    name: str
    session: str
    cron: str
    timezone: str
    lead: dict[str, Any]
    next_tick: datetime


@dataclass(frozen=True, slots=True)
class LeadPage:
    """One page of a session's leads (``list_leads``); ``next_cursor`` is None on the last,
    else the ``cursor`` of the next page."""

    leads: list[Lead]
    next_cursor: str | None


@dataclass(frozen=True, slots=True)
class BulkResult:
    """What a bulk retry or cancel changed; ``more``: leads the filter selects may be left
    (a call changes at most 10,000), so call again until it is False."""

    changed: int
    more: bool
