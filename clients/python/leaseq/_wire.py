"""The REST API on the wire, for both clients: calls, retries, errors, answers. No transport.

``Client`` and ``AsyncClient`` share everything here and differ only in how
a ``Call`` goes out (``leaseq._client``): an endpoint (``leaseq._endpoints``)
is an ``Exchange``, a generator that yields the calls it needs and is sent
each one's answer; ``steps`` turns an exchange into what a transport does,
with the retries of ``RetryPolicy`` and the error of each answer stated here
once.

What is retried: connection errors, timeouts and 502/503/504 answers, with
exponential backoff and jitter; a 4xx answer never is. A retry must never
turn one intent into two effects, so only calls that are safe to repeat are
retried as they are: reads; renew (a second renewal only extends the lease
again from now, with the same checkpoint); putting a session's settings (the
same again); complete (idempotent: the same completion again answers as the
first did); release, sweep, cancel and retry (a repeat finds the work done
and is refused, changing nothing). Push and lease are not safe as they are,
so each logical call gets an ``Idempotency-Key`` of its own (a fresh UUID),
sent with every retry of it: the service answers a repeat with the first
answer (the same ids, the same leases) instead of pushing or leasing again.

Knows nothing of the queue's internals or of the database: HTTP only.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any, TypeVar, get_args, get_type_hints
from urllib.parse import quote

import httpx

from leaseq import timefmt
from leaseq.errors import (
    BY_CODE,
    ApiError,
    InvalidInput,
    LeaseLost,
    LeaseqError,
    PayloadTooLarge,
    QuotaExceeded,
    Unauthorized,
    Unavailable,
)
from leaseq.limits import MAX_PUSH_BATCH
from leaseq.model import (
    STATUSES,
    ApiToken,
    CompleteItem,
    Counts,
    ItemResult,
    Lead,
    Lease,
    NewLead,
    NextLease,
    Renewal,
    RenewItem,
    Scaling,
    Schedule,
    SessionSettings,
    SweepResult,
)

DEFAULT_TIMEOUT_S = 10.0
MAX_RETRY_AFTER_S = 60.0  # a longer Retry-After is taken as this: the caller's retries go on
RETRY_STATUSES = frozenset({502, 503, 504})
IDEMPOTENCY_HEADER = "Idempotency-Key"
TRACEPARENT_HEADER = "traceparent"
_T = TypeVar("_T")


def new_idempotency_key() -> str:
    """A key for one logical push or lease, sent again with each of its retries."""
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a call is retried on a connection error or a 502/503/504.

    The n-th retry waits ``min(max_s, base_s * 2**n)``, half of it fixed and
    half random (jitter). An answer with Retry-After says how long instead,
    sooner or later than that (at most ``MAX_RETRY_AFTER_S``), plus up to a fifth
    more at random: a fleet told "in a second" does not come back in step, and
    an outage answered with 503s costs the service a request a second per call.
    """

    attempts: int = 6
    base_s: float = 0.1
    max_s: float = 2.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        if retry_after is not None:
            asked = min(max(retry_after, 0.0), MAX_RETRY_AFTER_S)
            return float(asked * random.uniform(1.0, 1.2))
        cap = min(self.max_s, self.base_s * 2**retry)
        return float(cap / 2 + random.uniform(0, cap / 2))


NO_RETRY = RetryPolicy(attempts=1)


@dataclass(frozen=True, slots=True)
class Call:
    """One request of an endpoint; ``timeout_s`` and ``policy`` None: the client's own."""

    method: str
    path: str
    body: Any = None
    headers: Mapping[str, str] | None = None
    timeout_s: float | None = None
    policy: RetryPolicy | None = None
    # A push that waits for room: answers 429 quota_exceeded are sent again after their
    # Retry-After, until so many seconds have been waited in all (0: not at all).
    room_s: float = 0.0


# An endpoint's conversation: it yields the calls it sends, is sent each one's
# successful answer (or has its error raised where it yielded), and returns the result.
Exchange = Generator[Call, httpx.Response, _T]
# What a transport is asked to do: send a call (and send back its answer, or the
# transport's error), or sleep so many seconds (and send back None).
Step = Call | float
Outcome = httpx.Response | httpx.TransportError | None


def request_of(call: Call, url: str, headers: Mapping[str, str]) -> httpx.Request:
    """The request of ``call`` (sent by ``steps``, so its timeout is set) to the service at
    ``url``: the client's ``headers`` and the call's, the body as compact JSON (httpx's:
    ``wire_size`` counts it so), one timeout for connecting, each read and write, and the
    wait for a pooled connection."""
    seconds = call.timeout_s
    return httpx.Request(
        call.method,
        url + call.path,
        json=call.body,
        headers={**headers, **call.headers} if call.headers else headers,
        extensions={
            "timeout": {"connect": seconds, "read": seconds, "write": seconds, "pool": seconds}
        },
    )


def steps(
    exchange: Exchange[_T], url: str, policy: RetryPolicy, timeout_s: float
) -> Generator[Step, Outcome, _T]:
    """The steps of ``exchange`` for a transport, each call retried as the module docstring says.

    A call's last failure is raised into the exchange: ``Unavailable`` naming the
    URL when the service could not be reached, else the answer's ``error``.
    """
    answer: httpx.Response | None = None
    failure: LeaseqError | None = None
    while True:
        try:
            if failure is not None:
                call = exchange.throw(failure)
            elif answer is not None:
                call = exchange.send(answer)
            else:
                call = next(exchange)
        except StopIteration as done:
            result: _T = done.value
            return result
        call_policy = call.policy or policy
        sent = Call(call.method, call.path, call.body, call.headers, call.timeout_s or timeout_s)
        answer = failure = None
        retry = 0
        waited_for_room = 0.0
        while answer is None and failure is None:
            outcome = yield sent
            wait_hint: float | None = None
            last = retry + 1 >= call_policy.attempts
            if isinstance(outcome, httpx.Response) and outcome.is_success:
                answer = outcome
            elif isinstance(outcome, httpx.Response) and _waits_for_room(
                outcome, call.room_s - waited_for_room
            ):
                room = min(_retry_after(outcome) or 1.0, MAX_RETRY_AFTER_S)
                waited_for_room += room
                yield room  # not a retry of a failure: the push is sent as it was, once more
            elif isinstance(outcome, httpx.Response):
                if outcome.status_code not in RETRY_STATUSES or last:
                    failure = error(outcome)
                wait_hint = _retry_after(outcome)
            elif last:
                name = type(outcome).__name__
                why = f"{name}: {outcome}" if str(outcome) else name
                failure = Unavailable(f"{call.method} {url}{call.path}: {why}")
                failure.__cause__ = outcome
            if answer is None and failure is None:
                yield call_policy.delay(retry, wait_hint)
                retry += 1


def unheard(exc: Unavailable, session: str, key: str) -> Unavailable:
    """``exc`` of a keyed push whose retries ran out, told so: the push may have been stored
    all the same, and its key (``idempotency_key``) asks whether (``pushed``)."""
    told = Unavailable(
        f"{exc.detail} (the push's answers were lost, not necessarily the push: ask "
        f"pushed({session!r}, {key!r}) whether it was stored, or send it again with that key)"
    )
    told.status, told.problem, told.idempotency_key = exc.status, exc.problem, key
    return told


def error(response: httpx.Response) -> LeaseqError:
    """The exception of an error answer (``error_from_problem`` of its problem+json)."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        body = {"title": response.reason_phrase, "detail": response.text[:500] or None}
    exc = error_from_problem(response.status_code, body)
    if isinstance(exc, QuotaExceeded):
        exc.retry_after_s = _retry_after(response)
    return exc


def error_from_problem(status: int, problem: Mapping[str, Any]) -> LeaseqError:
    """The exception for a problem+json answer: the class of its ``code``, else ``ApiError``."""
    code = problem.get("code")
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    cls = BY_CODE.get(code) if isinstance(code, str) else None
    exc: LeaseqError
    if cls is InvalidInput:
        field, sep, message = detail.partition(": ")
        exc = InvalidInput(field, message) if sep else InvalidInput("request", detail)
    elif cls is LeaseLost:
        reason = problem.get("reason")
        exc = LeaseLost(detail, reason=reason if isinstance(reason, str) else None)
    elif cls is not None:
        exc = cls(detail)
    elif status == 401:
        exc = Unauthorized(detail)
    elif status == 413:
        exc = PayloadTooLarge(detail)
    elif status == 503:
        exc = Unavailable(detail)
    else:
        exc = ApiError(detail, code=code if isinstance(code, str) else None)
    exc.status = status
    exc.problem = dict(problem)
    return exc


def _waits_for_room(response: httpx.Response, left_s: float) -> bool:
    """Whether a 429 quota_exceeded answer is waited out: its Retry-After (1 s when it says
    none) fits in the ``left_s`` a push that waits for room has left."""
    if response.status_code != 429 or left_s <= 0:
        return False
    return min(_retry_after(response) or 1.0, MAX_RETRY_AFTER_S) <= left_s


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


# -- answers --------------------------------------------------------------


def _time(value: Any) -> datetime:
    return timefmt.parse(value)


def _maybe_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)


def _maybe_seconds(value: Any) -> float | None:
    return None if value is None else float(value)


# The fields of a lead a service may leave out (an older one), and what they mean then. A
# field that may be null reads as null when left out; every other one must be there.
_LEAD_ABSENT: dict[str, Any] = {
    "priority": 0,
    "payload": {},
    "depth": 0,
    "attempts": 0,
    "after": [],  # from a service without dependencies
}


def _lead_readers() -> list[tuple[str, bool, Any, Any]]:
    """Per field of ``Lead``, in order: its name, whether the object must carry it, what it
    means when left out, and how its text becomes the value (timestamps) or None."""
    hints = get_type_hints(Lead)
    readers = []
    for name in (field.name for field in fields(Lead)):
        hint = hints[name]
        nullable = hint is Any or type(None) in get_args(hint)
        timestamp = hint is datetime or datetime in get_args(hint)
        parse = (_maybe_time if nullable else _time) if timestamp else None
        required = not nullable and name not in _LEAD_ABSENT
        readers.append((name, required, _LEAD_ABSENT.get(name), parse))
    return readers


_LEAD_READERS = _lead_readers()


def parse_lead(data: Mapping[str, Any]) -> Lead:
    """A lead object of the API as a ``Lead``: each of its fields by name (``_LEAD_READERS``);
    a null or missing payload reads as ``{}``."""
    values: dict[str, Any] = {}
    for name, required, absent, parse in _LEAD_READERS:
        value = data[name] if required else data.get(name, absent)
        values[name] = value if parse is None else parse(value)
    values["payload"] = values["payload"] or {}
    return Lead(**values)


def parse_lease(data: Mapping[str, Any]) -> Lease:
    """A lease object of the API as a ``Lease``."""
    return Lease(
        lead=parse_lead(data["lead"]),
        token=data["token"],
        attempt=data["attempt"],
        owner=data["owner"],
        expires_at=_time(data["expires_at"]),
        ttl_s=_maybe_seconds(data.get("ttl_s")),
        fence=data.get("fence"),
    )


def parse_renewal(data: Mapping[str, Any]) -> Renewal:
    """A renewal's new expiry and the ttl granted."""
    return Renewal(
        expires_at=_time(data["expires_at"]), ttl_s=float(data["ttl_s"]), fence=data.get("fence")
    )


def parse_scaling(data: Mapping[str, Any]) -> Scaling:
    """The signal to scale on, as the API answers it."""
    age = data.get("oldest_available_age_s")
    return Scaling(
        session=data["session"],
        backlog=int(data["backlog"]),
        leased=int(data["leased"]),
        oldest_available_age_s=None if age is None else float(age),
        completions_per_s=float(data["completions_per_s"]),
        suggested_workers=int(data["suggested_workers"]),
    )


def parse_counts(data: Mapping[str, Any]) -> Counts:
    """Counts by status and the oldest available lead's age; ``pending`` is derived, not read."""
    age = data.get("oldest_available_age_s")
    counts: dict[str, Any] = {name: int(data.get(name, 0)) for name in STATUSES}
    return Counts(
        **counts,
        blocked=int(data.get("blocked", 0)),
        oldest_available_age_s=None if age is None else float(age),
        paused_until=_maybe_time(data.get("paused_until")),
    )


def parse_settings(data: Mapping[str, Any]) -> SessionSettings:
    """A session's settings as the API answers them."""
    return SessionSettings(
        weight=float(data["weight"]),
        max_leased=data.get("max_leased"),
        rate_per_s=_maybe_seconds(data.get("rate_per_s")),
        burst=data.get("burst"),
        max_leased_per_key=data.get("max_leased_per_key"),
        max_runtime_s=data.get("max_runtime_s"),
        max_queued=data.get("max_queued"),
        paused_until=_maybe_time(data.get("paused_until")),
    )


def parse_token(data: Mapping[str, Any]) -> ApiToken:
    """A scoped token as the API answers it (with ``token`` only when just created)."""
    return ApiToken(
        name=data["name"],
        role=data["role"],
        sessions=data["sessions"],
        created_at=_time(data["created_at"]),
        expires_at=_maybe_time(data.get("expires_at")),
        last_used_at=_maybe_time(data.get("last_used_at")),
        revoked_at=_maybe_time(data.get("revoked_at")),
        token=data.get("token"),
    )


def parse_schedule(data: Mapping[str, Any]) -> Schedule:
    """A schedule as the API answers it."""
    return Schedule(
        name=data["name"],
        session=data["session"],
        cron=data["cron"],
        timezone=data["timezone"],
        lead=dict(data["lead"]),
        next_tick=timefmt.parse(data["next_tick"]),
    )


def parse_item_result(data: Mapping[str, Any]) -> ItemResult:
    return ItemResult(
        lead_id=data["lead_id"],
        ok=bool(data["ok"]),
        expires_at=_maybe_time(data.get("expires_at")),
        code=data.get("code"),
        ttl_s=_maybe_seconds(data.get("ttl_s")),
        fence=data.get("fence"),
    )


def parse_sweep(data: Mapping[str, Any]) -> SweepResult:
    return SweepResult(requeued=data["requeued"], failed=data["failed"])


# -- requests -------------------------------------------------------------


def seg(value: str) -> str:
    """One URL path segment."""
    return quote(value, safe="")


def chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def new_lead_body(lead: NewLead | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(lead, Mapping):
        return dict(lead)
    body: dict[str, Any] = {
        "payload": lead.payload,
        "priority": lead.priority,
        "depth": lead.depth,
        "delay_s": lead.delay_s,
    }
    names = ("key", "parent_id", "max_attempts", "concurrency_key", "max_runtime_s", "traceparent")
    for name in names:
        if (value := getattr(lead, name)) is not None:
            body[name] = value
    if lead.after:
        body["after"] = [item if isinstance(item, int) else dict(item) for item in lead.after]
    return body


def lease_body(ask: NextLease) -> dict[str, Any]:
    """The body of /lease, and of a completion's ``next``."""
    body: dict[str, Any] = {"owner": ask.owner, "max": ask.max, "wait_s": ask.wait_s}
    if isinstance(ask.session, str):
        body["session"] = ask.session
    elif ask.session is not None:
        body["sessions"] = list(ask.session)
    if ask.ttl_s is not None:
        body["ttl_s"] = ask.ttl_s
    return body


def complete_body(item: CompleteItem) -> dict[str, Any]:
    return {
        "lead_id": item.lead_id,
        "token": item.token,
        "status": item.status,
        "result": item.result,
        "error": item.error,
    }


def renew_body(item: RenewItem) -> dict[str, Any]:
    body: dict[str, Any] = {"lead_id": item.lead_id, "token": item.token}
    if item.ttl_s is not None:
        body["ttl_s"] = item.ttl_s
    if item.checkpoint is not None:
        body["checkpoint"] = item.checkpoint
    return body


# The bytes of ``{"leads":[]}`` around a push's leads.
PUSH_ENVELOPE = len(b'{"leads":[]}')


def wire_size(value: Any) -> int:
    """The bytes of ``value`` as httpx sends it (compact UTF-8 JSON)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))


def push_bodies(leads: list[dict[str, Any]], max_bytes: int) -> list[list[dict[str, Any]]]:
    """The leads in calls of at most MAX_PUSH_BATCH leads and ``max_bytes`` of body each.

    A lead too large for any body goes alone, for the service to refuse (413).
    """
    bodies: list[list[dict[str, Any]]] = []
    body: list[dict[str, Any]] = []
    size = PUSH_ENVELOPE
    for lead in leads:
        more = wire_size(lead) + (1 if body else 0)  # the comma before it
        if body and (len(body) == MAX_PUSH_BATCH or size + more > max_bytes):
            bodies.append(body)
            body, size, more = [], PUSH_ENVELOPE, more - 1
        body.append(lead)
        size += more
    if body:
        bodies.append(body)
    return bodies
