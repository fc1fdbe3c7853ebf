"""Request and response models of the REST API, with the limits of docs/contract.md#limits,
so /openapi.json is exact.

Requests are strict (a string is not a number, unknown fields are refused,
NaN and infinities are refused); the domain checks them again. Responses are
shaped exactly as docs/contract.md#lease-and-lead-objects says; timestamps are RFC 3339
in UTC (``…Z``). A lead object never carries its lease token.
"""

from __future__ import annotations

from dataclasses import fields as dataclass_fields
from datetime import datetime
from functools import cache
from types import UnionType
from typing import Annotated, Any, Literal, Self, Union, get_args, get_origin, get_type_hints

from fastapi import Header
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationInfo,
    WithJsonSchema,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from app.domain.report import Report
from app.domain.schedules import MAX_CRON_CHARS, MAX_TIMEZONE_CHARS
from app.domain.timeline import MAX_EVENTS, Timeline
from app.leasing.request import LeaseRequest
from leaseq.errors import LeaseLost
from leaseq.limits import (
    IDEMPOTENCY_KEY_PATTERN,
    INT32_MAX,
    MAX_AFTER,
    MAX_ATTEMPTS,
    MAX_BURST,
    MAX_CONCURRENCY_KEY_CHARS,
    MAX_DELAY_S,
    MAX_ERROR_CHARS,
    MAX_ITEM_BATCH,
    MAX_KEY_CHARS,
    MAX_LEAD_ID,
    MAX_LEASE_BATCH,
    MAX_LEASE_SESSIONS,
    MAX_OWNER_CHARS,
    MAX_PAUSE_S,
    MAX_PUSH_BATCH,
    MAX_RATE_PER_S,
    MAX_RUNTIME_S,
    MAX_THROTTLE_S,
    MAX_TOKEN_CHARS,
    MAX_TTL_S,
    MAX_WAIT_S,
    MAX_WEIGHT,
    MIN_BURST,
    MIN_RATE_PER_S,
    MIN_TTL_S,
    MIN_WEIGHT,
    SESSION_PATTERN,
    TRACEPARENT_PATTERN,
)
from leaseq.model import (
    AllCounts,
    Counts,
    FinalStatus,
    ItemResult,
    Lead,
    Lease,
    Renewal,
    Scaling,
    Schedule,
    SessionSettings,
    Status,
)
from leaseq.timefmt import rfc3339

Timestamp = Annotated[
    datetime,
    PlainSerializer(rfc3339, return_type=str),
    WithJsonSchema({"type": "string", "format": "date-time"}),
]
SessionName = Annotated[str, Field(pattern=SESSION_PATTERN, examples=["s"])]
LeadId = Annotated[int, Field(ge=1, le=MAX_LEAD_ID)]
Token = Annotated[str, Field(min_length=1, max_length=MAX_TOKEN_CHARS)]
TtlS = Annotated[
    float,
    Field(
        ge=MIN_TTL_S,
        le=MAX_TTL_S,
        description="Lease time in seconds; default LEASEQ_LEASE_TTL_S.",
    ),
]
DelayS = Annotated[float, Field(ge=0, le=MAX_DELAY_S)]
ErrorText = Annotated[str, Field(min_length=1, max_length=MAX_ERROR_CHARS)]
MaxRuntimeS = Annotated[int, Field(ge=1, le=MAX_RUNTIME_S)]
IdempotencyKey = Annotated[
    str | None,
    Header(
        alias="Idempotency-Key",
        pattern=IDEMPOTENCY_KEY_PATTERN,
        description=(
            "Your own id of this one intent (a UUID): sent again with the same request, "
            "the first answer comes back instead of a second effect. Kept for "
            "LEASEQ_IDEMPOTENCY_TTL_S at least."
        ),
    ),
]

# The request's W3C traceparent, for every lead of a push without its own. Not checked
# here: a malformed one is ignored (app.domain.validation.header_traceparent).
TraceparentHeader = Annotated[
    str | None,
    Header(
        alias="traceparent",
        description="W3C Trace Context of the producer's span, stored on each lead without "
        "its own `traceparent`; ignored when malformed. Not part of what an Idempotency-Key "
        "names: a retry in another span is the same push.",
    ),
]


class Body(BaseModel):
    """A request body: strict types, no unknown fields, no NaN."""

    model_config = ConfigDict(strict=True, extra="forbid", allow_inf_nan=False)

    @field_validator("*", mode="before")
    @classmethod
    def _integral(cls, value: Any, info: ValidationInfo) -> Any:
        """JSON has one number type: 5.0 is the integer 5, as JSON Schema says; 5.5 is refused."""
        if isinstance(value, float) and value.is_integer() and info.field_name in cls._integers():
            return int(value)
        return value

    @classmethod
    @cache
    def _integers(cls) -> frozenset[str]:
        """The fields typed int (or int | None)."""

        def integer(annotation: Any) -> bool:
            if get_origin(annotation) is Annotated:
                return integer(get_args(annotation)[0])
            if get_origin(annotation) in (Union, UnionType):
                return any(integer(arg) for arg in get_args(annotation))
            return annotation is int

        return frozenset(
            name for name, field in cls.model_fields.items() if integer(field.annotation)
        )


class Answer(BaseModel):
    """A response body."""

    model_config = ConfigDict(from_attributes=True)


# -- requests -----------------------------------------------------------------


class NewLeadIn(Body):
    payload: dict[str, Any] = Field(description="Any JSON object.")
    priority: int = Field(0, ge=-INT32_MAX - 1, le=INT32_MAX, description="Higher first.")
    key: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_KEY_CHARS,
        description="Dedupe key: a key already in the session is not pushed again.",
    )
    depth: int = Field(0, ge=0, le=INT32_MAX)
    parent_id: LeadId | None = None
    max_attempts: int | None = Field(None, ge=1, le=MAX_ATTEMPTS)
    delay_s: DelayS = Field(0, description="Not leasable before this many seconds.")
    concurrency_key: str | None = Field(
        None,
        min_length=1,
        max_length=MAX_CONCURRENCY_KEY_CHARS,
        description="At most the session's max_leased_per_key leads of one key leased at once.",
    )
    max_runtime_s: MaxRuntimeS | None = Field(
        None, description="No renewal past this many seconds after a lease; null: the session's."
    )
    traceparent: str | None = Field(
        None,
        pattern=TRACEPARENT_PATTERN,
        description="W3C Trace Context (version not ff, ids not all zeros): handed to the "
        "workers of the lead; wins over the request's traceparent header.",
    )
    after: list[LeadId | AfterKeyIn] = Field(
        default_factory=list,
        max_length=MAX_AFTER,
        description="Not available until each of these leads of the session is done or "
        'cached: an id, or {"key": k} for the lead with that key (pushed before, or earlier '
        "in this call); failed when one of them fails.",
    )

    @field_validator("after", mode="before")
    @classmethod
    def _integral_ids(cls, value: Any) -> Any:
        """The ids of ``after`` as every integer of a body: 5.0 is 5 (``Body._integral``)."""
        if isinstance(value, list):
            return [
                int(item) if isinstance(item, float) and item.is_integer() else item
                for item in value
            ]
        return value


class AfterKeyIn(Body):
    key: str = Field(min_length=1, max_length=MAX_KEY_CHARS)


class PushIn(Body):
    leads: list[NewLeadIn] = Field(min_length=1, max_length=MAX_PUSH_BATCH)


class LeaseIn(Body):
    """``session`` leases that session; ``sessions`` (or neither: any session) leases the one
    of them furthest below its fair share by weight."""

    # Not both (the properties named again so a linter finds what the "not" requires).
    model_config = ConfigDict(
        json_schema_extra={
            "not": {
                "required": ["session", "sessions"],
                "properties": {"session": {}, "sessions": {}},
            }
        },
    )

    session: SessionName | None = Field(None, description="The session to lease from.")
    sessions: list[SessionName] | None = Field(
        None,
        min_length=1,
        max_length=MAX_LEASE_SESSIONS,
        description="Lease from whichever of these sessions is furthest below its fair share "
        "(instead of `session`); with neither, from any session.",
    )
    owner: str = Field(min_length=1, max_length=MAX_OWNER_CHARS, examples=["w1"])
    max: int = Field(1, ge=1, le=MAX_LEASE_BATCH)
    ttl_s: TtlS | None = None
    wait_s: float = Field(
        0, ge=0, le=MAX_WAIT_S, description="Hold the request up to this long until work arrives."
    )

    @model_validator(mode="after")
    def _one_scope(self) -> Self:
        # Both keys present is refused even when one is null, as the schema's "not" says.
        if {"session", "sessions"} <= self.model_fields_set:
            raise ValueError('give "session" or "sessions", not both')
        return self

    def request(self, idempotency_key: str | None) -> LeaseRequest:
        """The lease request this body (and the request's ``Idempotency-Key``) asks for,
        checked: the one place a lease request is checked. Raises InvalidInput."""
        return LeaseRequest.checked(
            self.owner,
            session=self.session,
            sessions=self.sessions,
            max=self.max,
            ttl_s=self.ttl_s,
            wait_s=self.wait_s,
            idempotency_key=idempotency_key,
        )


CHECKPOINT = (
    "Any JSON (not null), stored on the lead and handed to its next holder in its lease: "
    "where this holder got to. At most LEASEQ_MAX_PAYLOAD_BYTES as compact JSON."
)


class RenewIn(Body):
    lead_id: LeadId
    token: Token
    ttl_s: TtlS | None = None
    checkpoint: Any = Field(None, description=CHECKPOINT)


class RenewBatchIn(Body):
    items: list[RenewIn] = Field(min_length=1, max_length=MAX_ITEM_BATCH)


class CompleteItemIn(Body):
    lead_id: LeadId
    token: Token
    status: FinalStatus = "done"
    result: Any = Field(None, description="Any JSON value, kept with the lead.")
    error: ErrorText | None = None


NEXT = (
    "The body of /lease: once the completion is done, lease this too, in the same request. "
    "The answer's `leases` hold what it took."
)


class CompleteIn(CompleteItemIn):
    next: LeaseIn | None = Field(None, description=NEXT)


class CompleteBatchIn(Body):
    items: list[CompleteItemIn] = Field(min_length=1, max_length=MAX_ITEM_BATCH)
    next: LeaseIn | None = Field(None, description=NEXT)


class ReleaseIn(Body):
    lead_id: LeadId
    token: Token
    delay_s: DelayS = 0
    error: ErrorText | None = Field(
        None, description="Why the lead is given back; kept when this was its last attempt."
    )
    throttle_s: float | None = Field(
        None,
        ge=1,
        le=MAX_THROTTLE_S,
        description="A cooldown: the whole session pauses until now + throttle_s (database "
        "clock), and this lease does not count against max_attempts.",
    )
    unstarted: bool = Field(
        False,
        description="The holder never started the lead (it was prefetched): this lease does "
        "not count against max_attempts, so giving it back cannot fail the lead.",
    )


class PauseIn(Body):
    for_s: float | None = Field(
        None,
        gt=0,
        le=MAX_PAUSE_S,
        description="Seconds (database clock) until the pause ends by itself; null: until resumed.",
    )


class SweepIn(Body):
    """``{"session": "s"}`` sweeps one session, ``{"all": true}`` every session."""

    # Exactly one of the two scopes, stated in the schema as the validator below checks it:
    # with if/then/else, not anyOf or oneOf, so a generated client keeps the properties.
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"required": ["session"], "properties": {"session": {"type": "string"}}},
            "then": {"not": {"required": ["all"], "properties": {"all": {"const": True}}}},
            "else": {"required": ["all"], "properties": {"all": {"const": True}}},
        }
    )

    session: SessionName | None = None
    all_: bool = Field(False, alias="all")

    @model_validator(mode="after")
    def _one_scope(self) -> Self:
        if (self.session is None) == (not self.all_):
            raise ValueError('give either "session" or "all": true')
        return self


# -- responses ----------------------------------------------------------------


# What the API says of a lead's fields beyond their names and types.
_LEAD_DESCRIPTIONS = {
    "checkpoint": "What the last holder's renewals carried; null: none.",
    "max_runtime_s": "Its own; null: the session's default.",
    "traceparent": "W3C Trace Context it was pushed with; null: none.",
    "after": "The ids of the leads it waits on; []: none.",
}


def _lead_fields() -> dict[str, Any]:
    """The fields of the client's ``Lead``, in its order, as this model's (every one required,
    a timestamp as RFC 3339): the lead's fields are listed once, there."""
    hints = get_type_hints(Lead)
    out: dict[str, Any] = {}
    for name in (field.name for field in dataclass_fields(Lead)):
        hint = hints[name]
        if hint is datetime:
            hint = Timestamp
        elif datetime in get_args(hint):
            hint = Timestamp | None
        out[name] = (hint, Field(description=_LEAD_DESCRIPTIONS.get(name)))
    return out


_LeadFields = create_model("LeadOut", __base__=Answer, **_lead_fields())


# A lead as the API shows it: the fields of ``leaseq.model.Lead`` (no docstring: it would
# become the schema's description).
class LeadOut(_LeadFields):
    @classmethod
    def of(cls, lead: Lead) -> LeadOut:
        return cls.model_validate(lead)


class LeadAnswer(Answer):
    lead: LeadOut

    @classmethod
    def of(cls, lead: Lead) -> LeadAnswer:
        return cls(lead=LeadOut.of(lead))


GRANTED = (
    "The seconds granted: time heartbeats from your own send time with it, never by "
    "comparing expires_at (the database's clock) with your clock."
)


FENCE = (
    "The lease named and signed by the service (`1.<lead>.<attempt>.<expires_at_ms>.<sig>`, "
    "HMAC-SHA256 by a key of LEASEQ_FENCE_KEYS): pass it to the systems you write to, which "
    "check it offline (`verify_fence`) or with `SELECT leaseq_fence_current(fence)` "
    "(docs/beyond.md#fences)."
)


class LeaseOut(Answer):
    lead: LeadOut
    token: str = Field(description="Opaque; renew, complete and release need it.")
    attempt: int = Field(description="Fencing number: only grows for a lead.")
    owner: str
    expires_at: Timestamp
    ttl_s: float = Field(description=GRANTED)
    fence: str = Field(description=FENCE)


class LeasesOut(Answer):
    leases: list[LeaseOut]

    @classmethod
    def of(cls, leases: list[Lease]) -> LeasesOut:
        return cls.model_validate({"leases": leases})


class WithNextOut(Answer):
    """An answer that carries ``leases`` only when its request asked for ``next``."""

    leases: list[LeaseOut] = Field(
        default_factory=list,
        description="Only when the request had `next`: the leases it took (maybe none).",
    )
    _asked: bool = PrivateAttr(False)

    # No return annotation: pydantic would take it for the answer's schema.
    @model_serializer(mode="wrap")
    def _leases_when_asked(self, serialize: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        answer = serialize(self)
        if not self._asked:
            answer.pop("leases", None)
        return answer

    def asked(self, leases: list[Lease] | None) -> Self:
        self._asked = leases is not None
        return self


class CompleteOut(WithNextOut):
    lead: LeadOut

    @classmethod
    def of(cls, lead: Lead, leases: list[Lease] | None = None) -> CompleteOut:
        return cls.model_validate({"lead": lead, "leases": leases or []}).asked(leases)


class PushOut(Answer):
    ids: list[int] = Field(description="In input order; a duplicate's existing id in its place.")
    created: int
    duplicates: int


class RenewOut(Answer):
    expires_at: Timestamp
    ttl_s: float = Field(description=GRANTED)
    fence: str = Field(description="The lease's fence with its new expiry. " + FENCE)

    @classmethod
    def of(cls, renewal: Renewal) -> RenewOut:
        return cls.model_validate(renewal)


class ItemOut(Answer):
    """``{"lead_id", "ok": true[, "expires_at", "ttl_s"]}`` or ``{"lead_id", "ok": false, "code"}``."""  # noqa: E501

    lead_id: int
    ok: bool
    # Left out, never null, where they do not apply (the serializer below).
    expires_at: Annotated[
        Timestamp | None, WithJsonSchema({"type": "string", "format": "date-time"})
    ] = Field(None, description="A renewal's, when ok: the lease's new expiry.")
    ttl_s: Annotated[float | None, WithJsonSchema({"type": "number"})] = Field(
        None, description="A renewal's, when ok: " + GRANTED
    )
    code: Annotated[str | None, WithJsonSchema({"type": "string", "enum": [LeaseLost.code]})] = (
        Field(None, description="When not ok: why (the lease is no longer valid).")
    )
    fence: Annotated[str | None, WithJsonSchema({"type": "string"})] = Field(
        None, description="A renewal's, when ok: the lease's fence with its new expiry."
    )

    # No return annotation: pydantic would take it for the answer's schema.
    @model_serializer(mode="wrap")
    def _without_nulls(self, serialize: SerializerFunctionWrapHandler):  # type: ignore[no-untyped-def]
        return {name: value for name, value in serialize(self).items() if value is not None}


class BatchOut(Answer):
    results: list[ItemOut]

    @classmethod
    def of(cls, results: list[ItemResult]) -> BatchOut:
        return cls.model_validate({"results": results})


class CompleteBatchOut(WithNextOut):
    results: list[ItemOut]

    @classmethod
    def of(cls, results: list[ItemResult], leases: list[Lease] | None = None) -> CompleteBatchOut:
        answer = cls.model_validate({"results": results, "leases": leases or []})
        return answer.asked(leases)


class SweepOut(Answer):
    requeued: int
    failed: int


PAUSED_UNTIL = (
    "No lease of the session begins before this instant (database clock); null: not paused. "
    "Set by a pause or a throttled release, never by a change of settings."
)


class CountsOut(Answer):
    queued: int
    leased: int
    done: int
    failed: int
    cached: int
    blocked: int = Field(description="Queued leads waiting on others (in queued too).")
    pending: int = Field(description="queued + leased")
    oldest_available_age_s: float | None = Field(
        description="Seconds, on the database clock, since the oldest lead that could be "
        "leased now became available; null when none. The scaling signal."
    )
    paused_until: Timestamp | None = Field(description=PAUSED_UNTIL)

    @classmethod
    def of(cls, counts: Counts) -> CountsOut:
        return cls.model_validate(counts)


class AllStatsOut(Answer):
    sessions: dict[str, CountsOut]
    total: CountsOut

    @classmethod
    def of(cls, counts: AllCounts) -> AllStatsOut:
        return cls.model_validate(counts)


class ScalingOut(Answer):
    """The signal to scale workers on (docs/beyond.md#a-signal-to-scale-on), in the shape
    KEDA's metrics-api scaler reads (`valueLocation: suggested_workers`)."""

    session: str = Field(description="The session; `*` for a fleet's total.")
    backlog: int = Field(description="Its queued leads (delayed and blocked ones too).")
    leased: int = Field(description="Its leads leased now.")
    oldest_available_age_s: float | None = Field(
        description="Seconds, on the database clock, since its oldest lead that could be "
        "leased now became available; null when none."
    )
    completions_per_s: float = Field(description="Leads finished per second, over the last minute.")
    suggested_workers: int = Field(
        description="Workers enough to finish the backlog and the leads in flight within "
        "target_wait_s at the last minute's rate per worker; 0 when nothing is queued or "
        "leased."
    )

    @classmethod
    def of(cls, scaling: Scaling) -> ScalingOut:
        return cls.model_validate(scaling)


class AllScalingOut(Answer):
    sessions: dict[str, ScalingOut]
    total: ScalingOut = Field(description="The fleet: one pool of workers for every session.")


class OwnerReportOut(Answer):
    owner: str = Field(description="The worker name the leases were taken under.")
    leases: int
    completions: int
    wasted: int = Field(description="Its leases that ended without a completion.")


class ReportOut(Answer):
    """The ledger's audit of a session; see ``app.domain.report``."""

    leads: int
    pushed: int
    leases: int
    completed: int = Field(description="Leads with a completion.")
    completions: int = Field(description="Completion events.")
    double_completions: int = Field(description="Leads completed more than once; must be 0.")
    overlapping_leases: int = Field(description="Leases given while one was valid; must be 0.")
    wasted_attempts: int = Field(description="Leases that ended without a completion.")
    expired: int
    released: int
    cancelled: int
    retried: int
    failed: int = Field(description="Leads failed because a lead they wait on failed.")
    attempts_per_lead: dict[int, int] = Field(
        description="Leads by the number of leases they took: {leases: leads}."
    )
    owners: list[OwnerReportOut] = Field(description="Per worker, ordered by name.")

    @classmethod
    def of(cls, report: Report) -> ReportOut:
        return cls.model_validate(report)


class SettingsIn(Body):
    """A session's settings; a field left out takes its default (PUT replaces them all)."""

    # A burst sizes a rate's bucket: a burst needs a rate (stated as the validator checks it,
    # with if/then, not anyOf, so a generated client keeps the properties).
    model_config = ConfigDict(
        json_schema_extra={
            "if": {"required": ["burst"], "properties": {"burst": {"type": "integer"}}},
            "then": {"required": ["rate_per_s"], "properties": {"rate_per_s": {"type": "number"}}},
        }
    )

    weight: float = Field(
        SessionSettings().weight,
        ge=MIN_WEIGHT,
        le=MAX_WEIGHT,
        description="Its share of the leases of a lease across sessions, against the other "
        "sessions with work.",
    )
    max_leased: int | None = Field(
        None,
        ge=0,
        le=INT32_MAX,
        description="At most this many of its leads leased at once, across every worker; "
        "null: no cap.",
    )
    rate_per_s: float | None = Field(
        None,
        ge=MIN_RATE_PER_S,
        le=MAX_RATE_PER_S,
        description="Leases granted per second at most (a token bucket on the database "
        "clock); null: no rate.",
    )
    burst: int | None = Field(
        None,
        ge=MIN_BURST,
        le=MAX_BURST,
        description="The bucket's size: leases granted at once after a quiet time; null: "
        "one second's worth (at least 1). Needs rate_per_s.",
    )

    max_leased_per_key: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="At most this many leads of one concurrency_key leased at once, across "
        "every worker; null: no cap per key.",
    )
    max_runtime_s: MaxRuntimeS | None = Field(
        None, description="The default maximum runtime of its leads; null: none."
    )
    max_queued: int | None = Field(
        None,
        ge=1,
        le=INT32_MAX,
        description="At most this many of its leads queued (not leased, not finished): a "
        "push that would pass it answers 429 quota_exceeded and stores none of its leads; "
        "null: the service's LEASEQ_MAX_QUEUED (none when unset).",
    )

    @model_validator(mode="after")
    def _burst_needs_rate(self) -> Self:
        if self.burst is not None and self.rate_per_s is None:
            raise ValueError("burst needs rate_per_s: it is the size of the rate's bucket")
        return self


class SettingsOut(Answer):
    weight: float
    max_leased: int | None
    rate_per_s: float | None
    burst: int | None
    max_leased_per_key: int | None
    max_runtime_s: int | None
    max_queued: int | None
    paused_until: Timestamp | None = Field(description=PAUSED_UNTIL)

    @classmethod
    def of(cls, settings: SessionSettings) -> SettingsOut:
        return cls.model_validate(settings)


class Health(Answer):
    status: Literal["ok", "ready"]


class EventOut(Answer):
    id: int = Field(description="The ledger's order: events are listed by it.")
    event: str = Field(
        description="pushed, leased, released, expired, completed, cancelled, retried or failed "
        "(failed because a lead it waits on failed)."
    )
    status: Status = Field(description="The lead's status the event left.")
    attempt: int
    owner: str | None
    at: Timestamp = Field(description="When, on the database clock.")
    expires_at: Timestamp | None = Field(
        description="Of a lease: the expiry granted; of an expiry: the one the sweeper found "
        "(its last renewal's)."
    )


class LeadEventsOut(Answer):
    lead: LeadOut
    events: list[EventOut] = Field(description=f"The newest {MAX_EVENTS:,} events, oldest first.")
    earlier_events: int = Field(description="Events older than those listed.")
    dependents: list[int] = Field(description="The ids of the leads that wait on this one.")

    @classmethod
    def of(cls, timeline: Timeline) -> LeadEventsOut:
        return cls.model_validate(timeline)


class RetriedOut(Answer):
    requeued: int = Field(description="Failed leads queued again.")


class ScheduleLeadIn(Body):
    """The lead pushed at each tick: a lead of a push, without its key (the tick's)."""

    payload: dict[str, Any] = Field(description="Any JSON object.")
    priority: int = Field(0, ge=-INT32_MAX - 1, le=INT32_MAX, description="Higher first.")
    max_attempts: int | None = Field(None, ge=1, le=MAX_ATTEMPTS)
    delay_s: DelayS = Field(0, description="Not leasable before this many seconds after its tick.")


class ScheduleIn(Body):
    session: SessionName = Field(description="The session each tick's lead is pushed to.")
    cron: str = Field(
        min_length=1,
        max_length=MAX_CRON_CHARS,
        examples=["*/5 * * * *"],
        description="Five fields (minute hour day-of-month month day-of-week), or @daily etc.",
    )
    timezone: str = Field(
        "UTC",
        min_length=1,
        max_length=MAX_TIMEZONE_CHARS,
        examples=["Europe/Paris"],
        description="The IANA time zone the cron expression is read in.",
    )
    lead: ScheduleLeadIn


class ScheduleOut(Answer):
    name: str
    session: str
    cron: str
    timezone: str
    lead: dict[str, Any]
    next_tick: Timestamp = Field(description="The next tick, on the database clock.")

    @classmethod
    def of(cls, schedule: Schedule) -> ScheduleOut:
        return cls.model_validate(schedule, from_attributes=True)


class SchedulesOut(Answer):
    schedules: list[ScheduleOut]
