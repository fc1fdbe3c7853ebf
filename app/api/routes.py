"""The REST routes: parse, call the queue, shape the answer. Nothing else happens here.

``router`` holds everything bearer auth guards; ``probes`` holds /healthz and
/readyz, which stay open. Errors are raised as domain errors and answered by
``app.api.problems``.

Every route declares its role and scope in its signature (``Access``, of
``app.api.access``: the ``principal`` parameter): what it does, and where its
sessions come from. A call outside the token's scope answers 403 and changes
nothing; what covers many sessions covers only the token's own
(docs/contract.md#who-may-do-what).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from typing import Annotated, cast

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException

from app import metrics
from app.api import access, tracing
from app.api.access import Access, Where
from app.api.front_door import FrontDoorRoute
from app.api.problems import ProblemResponse, responses, unavailable
from app.api.schemas import (
    AllScalingOut,
    AllStatsOut,
    BatchOut,
    CompleteBatchIn,
    CompleteBatchOut,
    CompleteIn,
    CompleteOut,
    CountsOut,
    Health,
    IdempotencyKey,
    LeadAnswer,
    LeadEventsOut,
    LeadOut,
    LeaseIn,
    LeasesOut,
    PauseIn,
    PushIn,
    PushOut,
    ReleaseIn,
    RenewBatchIn,
    RenewIn,
    RenewOut,
    ReportOut,
    RetriedOut,
    ScalingOut,
    ScheduleIn,
    ScheduleOut,
    SchedulesOut,
    SettingsIn,
    SettingsOut,
    SweepIn,
    SweepOut,
    TraceparentHeader,
)
from app.dashboard import page
from app.domain import overview, report, scaling, timeline, validation
from app.domain.access import Action, Principal
from app.domain.queue import Queue
from app.leasing.request import LeaseRequest
from app.service.runtime import Runtime
from leaseq.errors import Forbidden, LeaseLost, NotFound, QuotaExceeded, Unauthorized, Unavailable
from leaseq.limits import (
    IDEMPOTENCY_KEY_PATTERN,
    MAX_LEAD_ID,
    MAX_SESSION_CHARS,
    MAX_WAIT_S,
    SESSION_PATTERN,
)
from leaseq.model import (
    AllCounts,
    CompleteItem,
    Counts,
    Lease,
    NewLead,
    RenewItem,
    Scaling,
    SessionSettings,
    SweepResult,
)


# Dependencies are coroutines so FastAPI calls them inline, not in its threadpool.
async def get_runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


async def get_queue(request: Request) -> Queue:
    return cast(Runtime, request.app.state.runtime).queue


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]

# Whom a route acts for, and its declaration: what it does, where its sessions come from.
Pushing = Annotated[Principal, Depends(Access(Action.PUSH, Where.SESSION))]
Leasing = Annotated[Principal, Depends(Access(Action.LEASE, Where.BODY))]
Sweeping = Annotated[Principal, Depends(Access(Action.OPERATE, Where.BODY))]
ReadingSession = Annotated[Principal, Depends(Access(Action.READ, Where.SESSION))]
ReadingOwn = Annotated[Principal, Depends(Access(Action.READ, Where.OWN))]
ReadingLead = Annotated[Principal, Depends(Access(Action.READ, Where.LEAD))]
ObservingSession = Annotated[Principal, Depends(Access(Action.OBSERVE, Where.SESSION))]
ObservingOwn = Annotated[Principal, Depends(Access(Action.OBSERVE, Where.OWN))]
OperatingSession = Annotated[Principal, Depends(Access(Action.OPERATE, Where.SESSION))]
OperatingLead = Annotated[Principal, Depends(Access(Action.OPERATE, Where.LEAD))]
Scheduling = Annotated[Principal, Depends(Access(Action.OPERATE, Where.SCHEDULE))]
ObservingSchedule = Annotated[Principal, Depends(Access(Action.OBSERVE, Where.SCHEDULE))]
Public = Annotated[Principal, Depends(Access(Action.AUTHENTICATED, Where.NONE, public=True))]
QueueDep = Annotated[Queue, Depends(get_queue)]
SessionPath = Annotated[str, Path(pattern=SESSION_PATTERN, description="The session's name.")]
LeadIdPath = Annotated[int, Path(ge=1, le=MAX_LEAD_ID)]
ScheduleName = Annotated[str, Path(pattern=SESSION_PATTERN, description="The schedule's name.")]
WaitQuery = Annotated[
    float,
    Query(
        ge=0,
        le=MAX_WAIT_S,
        allow_inf_nan=False,
        description="Seconds to hold the request until the lead is terminal (0: answer at once).",
    ),
]
SearchQuery = Annotated[
    str | None, Query(max_length=MAX_SESSION_CHARS, description="Part of a session's name.")
]

# Every route reads its body through the front door (one parser, one set of limits).
router = APIRouter(route_class=FrontDoorRoute)
probes = APIRouter(tags=["probes"], route_class=FrontDoorRoute)

# The shell may not be framed (clickjacking of its cancel and retry buttons).
SHELL_HEADERS = {
    "X-Frame-Options": "DENY",
    "Content-Security-Policy": "frame-ancestors 'none'",
    "Cache-Control": "no-cache",
}


async def not_cross_site(request: Request) -> None:
    """Refuse an operator POST a browser sends from another site's page (CSRF).

    Browsers say where a request comes from (``Sec-Fetch-Site``, else
    ``Origin``); other clients send neither and pass, so the bodiless cancel and
    retry (docs/contract.md#a-lead-by-id) keep working from curl and the client
    library. With API
    tokens on, the bearer header already stops a cross-site form.
    """
    fetch_site = request.headers.get("sec-fetch-site")
    if fetch_site is not None:
        allowed = fetch_site in ("same-origin", "none")
    else:
        origin = request.headers.get("origin")
        allowed = origin is None or origin == f"{request.url.scheme}://{request.url.netloc}"
    if not allowed:
        raise HTTPException(403, "a cross-site request may not change leads")


SameSite = [Depends(not_cross_site)]


@contextmanager
def counting_lost(operation: str) -> Iterator[None]:
    """Count a LeaseLost on the way out."""
    try:
        yield
    except LeaseLost:
        metrics.LOST_LEASES.labels(operation).inc()
        raise


# -- producers ---------------------------------------------------------------


@router.post(
    "/sessions/{session}/leads",
    status_code=201,
    tags=["producers"],
    responses=responses("conflict", "quota_exceeded"),
)
async def push(
    session: SessionPath,
    body: PushIn,
    queue: QueueDep,
    principal: Pushing,
    idempotency_key: IdempotencyKey = None,
    traceparent: TraceparentHeader = None,
) -> PushOut:
    """Queue up to 1000 leads. A lead whose `key` is already in the session is not pushed
    again: its existing id stands in its place and it counts as a duplicate.

    With an `Idempotency-Key`, the same push sent again (its answer was lost) gets the
    first answer and pushes nothing; the key sent with another request is refused (422).

    A `traceparent` header (W3C Trace Context) is stored on every lead without its own; a
    malformed one is ignored.

    A push that would leave more of the session's leads queued than its `max_queued` (or
    the service's `LEASEQ_MAX_QUEUED`) answers 429 `quota_exceeded` with `Retry-After`, and
    stores none of its leads (docs/beyond.md#backpressure)."""
    leads = [NewLead(**lead.model_dump()) for lead in body.leads]
    try:
        result = await queue.push(
            session,
            leads,
            idempotency_key=idempotency_key,
            traceparent=validation.header_traceparent(traceparent),
        )
    except QuotaExceeded:
        metrics.PUSH_REFUSALS.labels(session).inc()
        raise
    metrics.PUSHED.inc(result.created)
    return PushOut.model_validate(result)


@router.get(
    "/sessions/{session}/pushes/{key:path}",
    tags=["producers"],
    operation_id="getPush",
    responses=responses("not_found"),
)
async def pushed(
    session: SessionPath,
    key: Annotated[
        str,
        Path(
            pattern=IDEMPOTENCY_KEY_PATTERN,
            description="The `Idempotency-Key` the push was sent with (percent-encoded).",
        ),
    ],
    queue: QueueDep,
    principal: ReadingSession,
) -> PushOut:
    """The answer of the push into the session sent with this `Idempotency-Key`: its lead
    ids, as the push answered them. 404 when no push of the session committed with that key
    (or the key was forgotten: kept `LEASEQ_IDEMPOTENCY_TTL_S` at least).

    A producer whose push's answers were all lost (its retries ran out) asks this before it
    moves on: the push was stored, or it was not and may be sent again with the same key."""
    return PushOut.model_validate(await queue.pushed(session, key))


# -- workers -----------------------------------------------------------------


@router.post(
    "/lease",
    tags=["workers"],
)
async def lease(
    body: LeaseIn,
    runtime: RuntimeDep,
    request: Request,
    principal: Leasing,
    idempotency_key: IdempotencyKey = None,
) -> LeasesOut:
    """Lease up to `max` available leads of the session, highest priority then oldest.

    With `sessions` instead of `session` (or neither: any session), the leads come from
    the one of them, with a lead available, that is furthest below its fair share: its
    leases, recently, over its `weight`. A session held back by its `max_leased` or
    `rate_per_s` is skipped. The list is empty when nothing is available. With `wait_s`
    > 0 the request is held until work arrives in the session (any of them) or the wait
    ends (no busy polling). Each lease says the `ttl_s` granted (`LEASEQ_LEASE_TTL_S`
    when none is asked), and its lead the `checkpoint` its last holder left. With an
    `Idempotency-Key`, the same request sent again gets the leases the first one took
    (those still valid), never new ones."""
    leasing = access.scoped_lease(principal, body.request(idempotency_key))
    return LeasesOut.of(await _leases(leasing, runtime, request, principal))


async def _leases(
    leasing: LeaseRequest, runtime: Runtime, request: Request, principal: Principal
) -> list[Lease]:
    """The leases of a lease request (scoped already), asked by /lease or by a completion's
    ``next``."""
    leases = await runtime.leasing.lease(leasing, gone=_gone(request))
    return await _handed_out(leases, runtime, principal)


def _gone(request: Request) -> Callable[[], Awaitable[bool]]:
    """What tells a lease that its client hung up: asked after every lease that took
    something (one receive that does not wait), waiting or not, so a client gone while the
    statement ran (a worker killed, a client's timeout) has its leads given back at once
    instead of leased to nobody until their ttl; and at each wake-up of a long poll."""
    return request.is_disconnected


async def _handed_out(leases: list[Lease], runtime: Runtime, principal: Principal) -> list[Lease]:
    """``leases``, each with its fence, counted, remembered for a scoped token (whose later
    calls name them), and linked from the request's span to their leads' traces when the
    service traces."""
    fences = runtime.fences
    leases = [
        replace(lease, fence=await fences.sign(lease.lead.id, lease.attempt, lease.expires_at))
        for lease in leases
    ]
    metrics.LEASES.inc(len(leases))
    if runtime.settings.tracing and leases:
        tracing.link_leads(leases)
    if not principal.everywhere:
        access.remember_leads(runtime.tokens, leases)
    return leases


@router.post(
    "/renew",
    tags=["workers"],
    responses=responses("lease_lost"),
)
async def renew(body: RenewIn, runtime: RuntimeDep, principal: Leasing) -> RenewOut:
    """Extend a valid lease to now + `ttl_s` on the database clock (`LEASEQ_LEASE_TTL_S` when
    none is asked); the answer says the `ttl_s` granted. 409 `lease_lost` otherwise. A
    `checkpoint` is stored on the lead, for the next holder should this one lose it."""
    await access.changes_leads(principal, runtime.tokens, [body.lead_id])
    with counting_lost("renew"):
        renewal = await runtime.queue.renew(
            body.lead_id, body.token, body.ttl_s, checkpoint=body.checkpoint
        )
    metrics.RENEWALS.inc()
    if renewal.attempt is not None:
        fence = await runtime.fences.sign(body.lead_id, renewal.attempt, renewal.expires_at)
        renewal = replace(renewal, fence=fence)
    return RenewOut.of(renewal)


@router.post(
    "/renew/batch",
    tags=["workers"],
)
async def renew_batch(body: RenewBatchIn, runtime: RuntimeDep, principal: Leasing) -> BatchOut:
    """Renew up to 100 leases; one result per item, in the order given. An item's `checkpoint`
    is stored on its lead. Every item is checked before any is renewed."""
    items = [
        RenewItem(item.lead_id, item.token, item.ttl_s, item.checkpoint) for item in body.items
    ]
    await access.changes_leads(principal, runtime.tokens, [item.lead_id for item in items])
    results = [
        replace(
            result,
            fence=await runtime.fences.sign(result.lead_id, result.attempt, result.expires_at),
        )
        if result.ok and result.attempt is not None and result.expires_at is not None
        else result
        for result in await runtime.queue.renew_many(items)
    ]
    renewed = sum(result.ok for result in results)
    metrics.RENEWALS.inc(renewed)
    metrics.LOST_LEASES.labels("renew").inc(len(results) - renewed)
    return BatchOut.of(results)


NEXT_DOC = """

With `next` (the body of `/lease`), once the completion is done the same request leases
too, and the answer's `leases` hold what it took: a worker at steady state sends one
request per lead. `next` is checked before anything changes. The `Idempotency-Key`
stands for that lease, as on `/lease`: sent again, the request gets the leases the first
took (those still valid)."""

COMPLETE_DOC = """Finish a valid lease as `done`, `failed` or `cached`; 409 `lease_lost` otherwise
(and nothing is leased).

Idempotent: the same lead, token and status again after it succeeded (a retry whose
answer was lost) answers 200 with the lead as finished, and changes nothing; any other
completion of a finished lead is `lease_lost`."""

COMPLETE_BATCH_DOC = """Complete up to 100 leases; one result per item, in the order given.
An item its lease already completed with the same status is `ok` again, as for `/complete`."""


@router.post(
    "/complete",
    tags=["workers"],
    description=COMPLETE_DOC + NEXT_DOC,
    responses=responses("lease_lost"),
)
async def complete(
    body: CompleteIn,
    runtime: RuntimeDep,
    request: Request,
    principal: Leasing,
    idempotency_key: IdempotencyKey = None,
) -> CompleteOut:
    leasing = None if body.next is None else body.next.request(idempotency_key)
    leasing = None if leasing is None else access.scoped_lease(principal, leasing)
    await access.changes_leads(principal, runtime.tokens, [body.lead_id])
    with counting_lost("complete"):
        if leasing is None:
            lead = await runtime.queue.complete(
                body.lead_id, body.token, body.status, body.result, body.error
            )
        else:
            item = CompleteItem(body.lead_id, body.token, body.status, body.result, body.error)
            lead, leases = await runtime.leasing.complete_and_lease(
                item, leasing, gone=_gone(request)
            )
    metrics.COMPLETIONS.labels(body.status).inc()
    if leasing is None:
        return CompleteOut.of(lead)
    return CompleteOut.of(lead, await _handed_out(leases, runtime, principal))


@router.post(
    "/complete/batch",
    tags=["workers"],
    description=COMPLETE_BATCH_DOC + NEXT_DOC,
)
async def complete_batch(
    body: CompleteBatchIn,
    runtime: RuntimeDep,
    request: Request,
    principal: Leasing,
    idempotency_key: IdempotencyKey = None,
) -> CompleteBatchOut:
    leasing = None if body.next is None else body.next.request(idempotency_key)
    leasing = None if leasing is None else access.scoped_lease(principal, leasing)
    items = [
        CompleteItem(item.lead_id, item.token, item.status, item.result, item.error)
        for item in body.items
    ]
    await access.changes_leads(principal, runtime.tokens, [item.lead_id for item in items])
    if leasing is not None:  # a key used for another request completes nothing either
        await runtime.leasing.refuse_reused_key(leasing)
    results = await runtime.queue.complete_many(items)
    for item, result in zip(items, results, strict=True):
        if result.ok:
            metrics.COMPLETIONS.labels(item.status).inc()
        else:
            metrics.LOST_LEASES.labels("complete").inc()
    if leasing is None:
        return CompleteBatchOut.of(results)
    return CompleteBatchOut.of(results, await _leases(leasing, runtime, request, principal))


@router.post(
    "/release",
    tags=["workers"],
    responses=responses("lease_lost"),
)
async def release(body: ReleaseIn, runtime: RuntimeDep, principal: Leasing) -> LeadAnswer:
    """Give a valid lease back: the lead is queued again after `delay_s`. On its last
    attempt (`attempts` reached `max_attempts`) it fails instead, its error saying so
    (and carrying `error`, the holder's reason, when given). With `throttle_s` (a cooldown:
    "the upstream answered 429") the lead is queued whatever its attempt, this lease does
    not count against `max_attempts`, and the whole session pauses until now + `throttle_s`.
    With `unstarted` (the holder never started the lead: it was prefetched) this lease does
    not count against `max_attempts` either, and nothing pauses.

    409 `lease_lost` when the lease is no longer valid."""
    await access.changes_leads(principal, runtime.tokens, [body.lead_id])
    with counting_lost("release"):
        lead = await runtime.queue.release(
            body.lead_id,
            body.token,
            body.delay_s,
            error=body.error,
            throttle_s=body.throttle_s,
            unstarted=body.unstarted,
        )
    metrics.RELEASES.inc()
    return LeadAnswer.of(lead)


# -- operators ---------------------------------------------------------------


@router.post(
    "/sweep",
    tags=["operators"],
)
async def sweep(body: SweepIn, runtime: RuntimeDep, principal: Sweeping) -> SweepOut:
    """Requeue expired leases of one session (`{"session": "s"}`) or of all (`{"all": true}`);
    a lead that reached `max_attempts` becomes `failed` instead. A scoped token's sweep of
    all touches only its own sessions."""
    queue = runtime.queue
    if body.session is not None:
        access.sessions_named(principal, [body.session])
        result = await queue.sweep(body.session)
    elif principal.everywhere:
        result = await queue.sweep_all()
    else:
        result = SweepResult()
        for session in await runtime.tokens.sessions_in(principal.pattern):
            swept = await queue.sweep(session)
            result = SweepResult(result.requeued + swept.requeued, result.failed + swept.failed)
    metrics.count_sweep(result, "api")
    await runtime.tokens.audit(
        principal,
        "sweep",
        session=body.session,
        detail={"all": body.session is None, "requeued": result.requeued, "failed": result.failed},
    )
    return SweepOut.model_validate(result)


@router.get(
    "/sessions/{session}/stats",
    tags=["operators"],
)
async def get_session_stats(
    session: SessionPath, queue: QueueDep, principal: ReadingSession
) -> CountsOut:
    """Lead counts by status in one session; pending = queued + leased;
    `oldest_available_age_s`, the age of its oldest lead that could be leased now (null when
    none): the signal to scale workers on."""
    return CountsOut.of(await queue.stats(session))


@router.get("/stats", tags=["operators"])
async def get_stats(queue: QueueDep, principal: ReadingOwn) -> AllStatsOut:
    """Lead counts per session, and their total; each with `oldest_available_age_s`. A scoped
    token sees only its own sessions, and their total."""
    return AllStatsOut.of(own_counts(principal, await queue.stats_all()))


TargetWait = Annotated[
    float,
    Query(
        gt=0,
        le=scaling.MAX_TARGET_WAIT_S,
        description="The longest a lead should wait for a worker, in seconds (default 60).",
    ),
]


@router.get("/sessions/{session}/scaling", tags=["operators"], operation_id="getScaling")
async def get_scaling(
    session: SessionPath,
    queue: QueueDep,
    principal: ReadingSession,
    target_wait_s: TargetWait = scaling.DEFAULT_TARGET_WAIT_S,
) -> ScalingOut:
    """The signal to scale the session's workers on: its backlog, the leads it holds, the age
    of its oldest available lead, its completions per second over the last minute, and the
    workers that would finish its backlog within `target_wait_s` (docs/beyond.md). The
    shape KEDA's metrics-api scaler reads. Cheap: no read scans the backlog."""
    return ScalingOut.of(await scaling.session_scaling(queue, session, target_wait_s))


@router.get("/scaling", tags=["operators"], operation_id="getScalingAll")
async def get_scaling_all(
    queue: QueueDep,
    principal: ReadingOwn,
    target_wait_s: TargetWait = scaling.DEFAULT_TARGET_WAIT_S,
) -> AllScalingOut:
    """The signal of every session with leads, and of the fleet (`total`, session `*`): one
    pool of workers leasing from all of them. A scoped token sees only its own sessions,
    and their total."""
    counts = own_counts(principal, await queue.stats_all())
    completed = await scaling.completed_by_session(queue)
    sessions, total = scaling.fleet_scaling(counts, completed, target_wait_s)
    return AllScalingOut.model_validate({"sessions": sessions, "total": total})


def own_counts(principal: Principal, counts: AllCounts) -> AllCounts:
    """``counts`` of the token's own sessions only, their total recounted."""
    if principal.everywhere:
        return counts
    sessions = {name: c for name, c in counts.sessions.items() if principal.covers(name)}
    total = Counts()
    for session_counts in sessions.values():
        total = total + session_counts
    return AllCounts(sessions=sessions, total=total)


@router.get(
    "/sessions/{session}/settings",
    tags=["operators"],
)
async def get_settings(
    session: SessionPath, queue: QueueDep, principal: ObservingSession
) -> SettingsOut:
    """The session's `weight`, `max_leased`, `rate_per_s` and `burst` (the defaults, weight 1
    and no limits, for a session never set)."""
    return SettingsOut.of(await queue.settings(session))


@router.put(
    "/sessions/{session}/settings",
    tags=["operators"],
)
async def put_settings(
    session: SessionPath, body: SettingsIn, runtime: RuntimeDep, principal: OperatingSession
) -> SettingsOut:
    """Set the session's weight in a lease across sessions, its cap on leads leased at once
    (`max_leased`) and its rate of leases granted (`rate_per_s`, `burst`: a token bucket on
    the database clock); a field left out takes its default, `null` is no limit. It binds
    every lease that begins after it answers, through every API process."""
    settings = SessionSettings(**body.model_dump())
    stored = await runtime.queue.put_settings(session, settings)
    await runtime.tokens.audit(principal, "settings", session=session, detail=body.model_dump())
    return SettingsOut.of(stored)


@router.post(
    "/sessions/{session}/pause",
    tags=["operators"],
    dependencies=SameSite,
)
async def pause(
    session: SessionPath,
    runtime: RuntimeDep,
    principal: OperatingSession,
    body: PauseIn | None = None,
) -> SettingsOut:
    """Pause the session: no lease of it begins until `for_s` seconds from now (database
    clock), or until resumed without it. Leases held go on. It binds every lease that begins
    after it answers, through every API process. Answers the settings, with `paused_until`.
    A browser's cross-site request (the body is optional) is refused 403."""
    for_s = None if body is None else body.for_s
    paused = await runtime.queue.pause(session, for_s)
    await runtime.tokens.audit(principal, "pause", session=session, detail={"for_s": for_s})
    return SettingsOut.of(paused)


@router.post(
    "/sessions/{session}/resume",
    tags=["operators"],
    dependencies=SameSite,
)
async def resume(
    session: SessionPath, runtime: RuntimeDep, principal: OperatingSession
) -> SettingsOut:
    """End the session's pause (an operator's or a throttled release's); its waiting leases
    wake. Answers the settings."""
    resumed = await runtime.queue.resume(session)
    await runtime.tokens.audit(principal, "resume", session=session)
    return SettingsOut.of(resumed)


@router.get(
    "/sessions/{session}/report",
    tags=["operators"],
)
async def get_report(
    session: SessionPath, queue: QueueDep, principal: ObservingSession
) -> ReportOut:
    """The session's audit, read from the `lead_events` ledger: completions, double
    completions, overlapping leases and wasted attempts (all zero with the ledger off)."""
    return ReportOut.of(await report.report(queue, session))


@router.get(
    "/leads/{lead_id}",
    tags=["operators"],
    responses=responses("not_found"),
)
async def get_lead(
    lead_id: LeadIdPath,
    runtime: RuntimeDep,
    request: Request,
    principal: ReadingLead,
    wait_s: WaitQuery = 0.0,
) -> LeadOut:
    """One lead (its lease token is never shown); 404 for a lead of a session not the token's,
    as if it did not exist.

    With `wait_s` > 0 the request is held until the lead is terminal (`done`, `failed` or
    `cached`) or the wait ends, then answers the lead as it is: a waiter wakes on the
    notification of its lead's end, through whichever API process ended it, and holds no
    database connection meanwhile. Beyond `LEASEQ_MAX_OUTCOME_WAITERS` held in one process,
    a lead not yet ended answers 503."""
    access.reads_lead(principal, await runtime.queue.get(lead_id))  # before anyone waits
    key = principal.key

    async def revoked() -> None:
        if key is not None and not await runtime.tokens.live(key):
            raise Unauthorized("the token was revoked or expired while the request waited")

    async def gone() -> bool:
        """At each wake of the wait (a notification, or every ``poll_interval_s``): a token
        revoked meanwhile ends it with 401, as it ends a long poll's."""
        await revoked()
        return await request.is_disconnected()

    lead = await runtime.outcomes.outcome(lead_id, wait_s, gone=gone if wait_s > 0 else None)
    if wait_s > 0:
        await revoked()
    return LeadOut.of(lead)


@router.post(
    "/leads/{lead_id}/cancel",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("not_found", "conflict"),
)
async def cancel_lead(
    lead_id: LeadIdPath, runtime: RuntimeDep, principal: OperatingLead
) -> LeadOut:
    """A queued or leased lead becomes `failed` with error `cancelled`; its holder's next
    renew or complete gets 409 `lease_lost`. A finished lead answers 409 `conflict`."""
    await access.changes_leads(principal, runtime.tokens, [lead_id])
    lead = await runtime.queue.cancel(lead_id)
    await runtime.tokens.audit(principal, "cancel", session=lead.session, lead_id=lead_id)
    return LeadOut.of(lead)


@router.post(
    "/leads/{lead_id}/retry",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("not_found", "conflict"),
)
async def retry_lead(lead_id: LeadIdPath, runtime: RuntimeDep, principal: OperatingLead) -> LeadOut:
    """Queue a `failed` lead again (dead-letter replay); any other status answers 409 `conflict`."""
    await access.changes_leads(principal, runtime.tokens, [lead_id])
    lead = await runtime.queue.retry(lead_id)
    await runtime.tokens.audit(principal, "retry", session=lead.session, lead_id=lead_id)
    return LeadOut.of(lead)


@router.get(
    "/leads/{lead_id}/events",
    tags=["operators"],
    responses=responses("not_found"),
)
async def get_lead_events(
    lead_id: LeadIdPath, queue: QueueDep, principal: ReadingLead
) -> LeadEventsOut:
    """The lead and its ledger, read at one instant: every event in the order written (push,
    each lease with its attempt and owner, release, expiry, completion, cancel, retry), each at
    the database clock's time. Renewals write none. Empty with the ledger off."""
    found = await timeline.timeline(queue, lead_id)
    access.reads_lead(principal, found.lead)
    return LeadEventsOut.of(found)


@router.post(
    "/sessions/{session}/retry-failed",
    tags=["operators"],
    dependencies=SameSite,
)
async def retry_failed(
    session: SessionPath, runtime: RuntimeDep, principal: OperatingSession
) -> RetriedOut:
    """Queue every `failed` lead of the session again, as `POST /leads/{id}/retry` does each
    (dead-letter replay: the next lease of each is a new attempt); answers how many. A lead
    that fails while it runs is left for the next call. No body; refuses a browser's
    cross-site request (403)."""
    requeued = await runtime.queue.retry_failed(session)
    await runtime.tokens.audit(
        principal, "retry-failed", session=session, detail={"requeued": requeued}
    )
    return RetriedOut(requeued=requeued)


async def _schedules_own(runtime: Runtime, principal: Principal, name: str, session: str) -> None:
    """Refuse (403) a schedule put into a session not the token's, or over a schedule of
    that name that belongs to such a session."""
    if not principal.covers(session):
        raise Forbidden(f"session {session} is not this token's")
    if principal.everywhere:
        return
    try:
        existing = await runtime.schedules.get(name)
    except NotFound:
        return
    if not principal.covers(existing.session):
        raise Forbidden(f"schedule {name} is of a session not this token's")


@router.put(
    "/schedules/{name}",
    tags=["schedules"],
    dependencies=SameSite,
)
async def put_schedule(
    name: ScheduleName, body: ScheduleIn, runtime: RuntimeDep, principal: Scheduling
) -> ScheduleOut:
    """Create or replace a schedule: at each tick of `cron` in `timezone` (judged on the
    database clock), one lead is pushed into `session` with the key `schedule:{name}:{tick}`
    (the tick in RFC 3339 UTC), however many API processes run. A tick missed while no
    process ran is pushed once when one starts (only the latest). Answers the schedule with
    its `next_tick`; a bad cron expression or time zone answers 422 and stores nothing."""
    await _schedules_own(runtime, principal, name, body.session)
    lead = body.lead.model_dump(exclude_defaults=True) | {"payload": body.lead.payload}
    schedule = await runtime.schedules.put(name, body.session, body.cron, body.timezone, lead)
    await runtime.tokens.audit(principal, "schedule", session=body.session, detail={"name": name})
    return ScheduleOut.of(schedule)


@router.get("/schedules", tags=["schedules"])
async def list_schedules(runtime: RuntimeDep, principal: ObservingOwn) -> SchedulesOut:
    """Every schedule, by name, each with its `next_tick`; for a scoped token, those of its
    own sessions only."""
    own = [s for s in await runtime.schedules.all() if principal.covers(s.session)]
    return SchedulesOut(schedules=[ScheduleOut.of(s) for s in own])


@router.get(
    "/schedules/{name}",
    tags=["schedules"],
    responses=responses("not_found"),
)
async def get_schedule(
    name: ScheduleName, runtime: RuntimeDep, principal: ObservingSchedule
) -> ScheduleOut:
    """One schedule, with its `next_tick`; 404 for a schedule of a session not the token's,
    as if it did not exist."""
    schedule = await runtime.schedules.get(name)
    if not principal.covers(schedule.session):
        raise NotFound(f"no schedule {name}")
    return ScheduleOut.of(schedule)


@router.delete(
    "/schedules/{name}",
    status_code=204,
    tags=["schedules"],
    dependencies=SameSite,
    responses=responses("not_found"),
)
async def delete_schedule(
    name: ScheduleName, runtime: RuntimeDep, principal: Scheduling
) -> Response:
    """Stop a schedule; the leads it pushed stay. 404 when there is none of that name; 403
    for a schedule of a session not the token's."""
    schedule = await runtime.schedules.get(name)
    if not principal.covers(schedule.session):
        raise Forbidden(f"session {schedule.session} is not this token's")
    await runtime.schedules.delete(name)
    await runtime.tokens.audit(
        principal, "unschedule", session=schedule.session, detail={"name": name}
    )
    return Response(status_code=204)


@router.get(
    "/metrics",
    tags=["operators"],
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus text format, version 0.0.4.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def get_metrics(queue: QueueDep, principal: ObservingOwn) -> Response:
    """Prometheus text format: the counters of every server process, and lead counts, the
    signal to scale on and each session's lease seconds of the last minute read from the
    database now (left out while it does not answer); for a scoped token, those of its own
    sessions only."""
    signal: tuple[dict[str, Scaling], Scaling] | None = None
    lease_time: tuple[dict[str, float], float] | None = None
    try:
        stats: AllCounts | None = own_counts(principal, await queue.stats_all())
        completed = await scaling.completed_by_session(queue)
        signal = scaling.fleet_scaling(stats, completed) if stats is not None else None
        lease_time = (await scaling.lease_seconds_by_session(queue), scaling.WINDOW_S)
    except Unavailable:
        stats = None
    return Response(metrics.render(stats, signal, lease_time), media_type=metrics.CONTENT_TYPE)


@router.get(
    "/dashboard",
    tags=["operators"],
    response_class=HTMLResponse,
    responses={
        200: {
            "description": "The page (HTML): a shell with no data, that may not be framed.",
            "headers": {
                name: {"schema": {"type": "string", "enum": [value]}}
                for name, value in SHELL_HEADERS.items()
            },
        }
    },
)
async def get_dashboard(principal: Public) -> HTMLResponse:
    """The operator's page. It holds no data and no secret, so it is served without a token;
    its script asks for the token once and polls `/dashboard/data` with it."""
    return HTMLResponse(page.shell(), headers=SHELL_HEADERS)


@router.get(
    "/dashboard/data",
    tags=["operators"],
)
async def get_dashboard_data(
    runtime: RuntimeDep, principal: ObservingOwn, search: SearchQuery = None
) -> JSONResponse:
    """What the dashboard shows: per session its counts, oldest available lead, settings,
    completions per minute, share of the workers' time over the last minute and suggested
    workers; the leases closest to expiry; the latest failures; the schedules
    with their next ticks. With `search`, only the sessions whose name holds it (in any
    case). A scoped token sees its own sessions only; `access` says what the page may offer
    it (`operate`: cancel and retry)."""
    visible = None if principal.everywhere else principal.covers
    snapshot = await overview.snapshot(runtime.queue, search, visible=visible)
    schedules = [s for s in await runtime.schedules.all() if principal.covers(s.session)]
    data = page.to_json(snapshot, schedules, runtime.queue.default_max_queued)
    data["access"] = {
        "token": principal.name,
        "role": principal.role or "full",
        "sessions": principal.pattern,
        "operate": principal.may(Action.OPERATE),
    }
    return JSONResponse(data)


# -- probes ------------------------------------------------------------------


@probes.get("/healthz")
async def get_health(principal: Public) -> Health:
    """200 while the process runs."""
    return Health(status="ok")


@probes.get("/readyz", response_model=Health)
async def get_readiness(runtime: RuntimeDep, principal: Public) -> Health | ProblemResponse:
    """200 when the database answers, the schema is at head and boot recovery is done; else 503."""
    reason = await runtime.ready()
    if reason is not None:
        return unavailable(reason)
    return Health(status="ready")
