"""The REST routes: parse, call the queue, shape the answer. Nothing else happens here.

``router`` holds everything bearer auth guards; ``probes`` holds /healthz and
/readyz, which stay open. Errors are raised as domain errors and answered by
``app.api.problems``.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Annotated, cast

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from starlette.exceptions import HTTPException

from app import metrics
from app.api.front_door import FrontDoorRoute
from app.api.problems import ProblemResponse, responses, unavailable
from app.api.schemas import (
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
    SettingsIn,
    SettingsOut,
    SweepIn,
    SweepOut,
)
from app.dashboard import page
from app.domain import overview, report, timeline
from app.domain.queue import Queue
from app.leasing.request import LeaseRequest
from app.service.runtime import Runtime
from leaseq.errors import LeaseLost, Unavailable
from leaseq.limits import MAX_LEAD_ID, MAX_SESSION_CHARS, SESSION_PATTERN
from leaseq.model import AllCounts, CompleteItem, Lease, NewLead, RenewItem, SessionSettings


# Dependencies are coroutines so FastAPI calls them inline, not in its threadpool.
async def get_runtime(request: Request) -> Runtime:
    return cast(Runtime, request.app.state.runtime)


async def get_queue(request: Request) -> Queue:
    return cast(Runtime, request.app.state.runtime).queue


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
QueueDep = Annotated[Queue, Depends(get_queue)]
SessionPath = Annotated[str, Path(pattern=SESSION_PATTERN, description="The session's name.")]
LeadIdPath = Annotated[int, Path(ge=1, le=MAX_LEAD_ID)]
SearchQuery = Annotated[
    str | None, Query(max_length=MAX_SESSION_CHARS, description="Part of a session's name.")
]

# Every route reads its body through the front door (one parser, one set of limits).
router = APIRouter(route_class=FrontDoorRoute)
# What any route that reads a JSON body may answer besides its own refusals.
BODY_PROBLEMS = ("unsupported_media_type", "validation_error", "payload_too_large", "unavailable")
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
    responses=responses("conflict", *BODY_PROBLEMS),
)
async def push(
    session: SessionPath, body: PushIn, queue: QueueDep, idempotency_key: IdempotencyKey = None
) -> PushOut:
    """Queue up to 1000 leads. A lead whose `key` is already in the session is not pushed
    again: its existing id stands in its place and it counts as a duplicate.

    With an `Idempotency-Key`, the same push sent again (its answer was lost) gets the
    first answer and pushes nothing; the key sent with another request is refused (422)."""
    leads = [NewLead(**lead.model_dump()) for lead in body.leads]
    result = await queue.push(session, leads, idempotency_key=idempotency_key)
    metrics.PUSHED.inc(result.created)
    return PushOut.model_validate(result)


# -- workers -----------------------------------------------------------------


@router.post(
    "/lease",
    tags=["workers"],
    responses=responses(*BODY_PROBLEMS),
)
async def lease(
    body: LeaseIn, runtime: RuntimeDep, request: Request, idempotency_key: IdempotencyKey = None
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
    leasing = body.request(idempotency_key)
    return LeasesOut.of(await _leases(leasing, runtime, request))


async def _leases(leasing: LeaseRequest, runtime: Runtime, request: Request) -> list[Lease]:
    """The leases of a lease request, asked by /lease or by a completion's ``next``."""
    # Only a long poll watches for a client that hangs up (a check costs a receive).
    gone = request.is_disconnected if leasing.wait_s > 0 else None
    leases = await runtime.leasing.lease(leasing, gone=gone)
    metrics.LEASES.inc(len(leases))
    return leases


@router.post(
    "/renew",
    tags=["workers"],
    responses=responses("lease_lost", *BODY_PROBLEMS),
)
async def renew(body: RenewIn, queue: QueueDep) -> RenewOut:
    """Extend a valid lease to now + `ttl_s` on the database clock (`LEASEQ_LEASE_TTL_S` when
    none is asked); the answer says the `ttl_s` granted. 409 `lease_lost` otherwise. A
    `checkpoint` is stored on the lead, for the next holder should this one lose it."""
    with counting_lost("renew"):
        renewal = await queue.renew(
            body.lead_id, body.token, body.ttl_s, checkpoint=body.checkpoint
        )
    metrics.RENEWALS.inc()
    return RenewOut.of(renewal)


@router.post(
    "/renew/batch",
    tags=["workers"],
    responses=responses(*BODY_PROBLEMS),
)
async def renew_batch(body: RenewBatchIn, queue: QueueDep) -> BatchOut:
    """Renew up to 100 leases; one result per item, in the order given. An item's `checkpoint`
    is stored on its lead. Every item is checked before any is renewed."""
    items = [
        RenewItem(item.lead_id, item.token, item.ttl_s, item.checkpoint) for item in body.items
    ]
    results = await queue.renew_many(items)
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
    responses=responses("lease_lost", *BODY_PROBLEMS),
)
async def complete(
    body: CompleteIn, runtime: RuntimeDep, request: Request, idempotency_key: IdempotencyKey = None
) -> CompleteOut:
    leasing = None if body.next is None else body.next.request(idempotency_key)
    with counting_lost("complete"):
        lead = await runtime.queue.complete(
            body.lead_id, body.token, body.status, body.result, body.error
        )
    metrics.COMPLETIONS.labels(body.status).inc()
    if leasing is None:
        return CompleteOut.of(lead)
    return CompleteOut.of(lead, await _leases(leasing, runtime, request))


@router.post(
    "/complete/batch",
    tags=["workers"],
    description=COMPLETE_BATCH_DOC + NEXT_DOC,
    responses=responses(*BODY_PROBLEMS),
)
async def complete_batch(
    body: CompleteBatchIn,
    runtime: RuntimeDep,
    request: Request,
    idempotency_key: IdempotencyKey = None,
) -> CompleteBatchOut:
    leasing = None if body.next is None else body.next.request(idempotency_key)
    items = [
        CompleteItem(item.lead_id, item.token, item.status, item.result, item.error)
        for item in body.items
    ]
    results = await runtime.queue.complete_many(items)
    for item, result in zip(items, results, strict=True):
        if result.ok:
            metrics.COMPLETIONS.labels(item.status).inc()
        else:
            metrics.LOST_LEASES.labels("complete").inc()
    if leasing is None:
        return CompleteBatchOut.of(results)
    return CompleteBatchOut.of(results, await _leases(leasing, runtime, request))


@router.post(
    "/release",
    tags=["workers"],
    responses=responses("lease_lost", *BODY_PROBLEMS),
)
async def release(body: ReleaseIn, queue: QueueDep) -> LeadAnswer:
    """Give a valid lease back: the lead is queued again after `delay_s`. On its last
    attempt (`attempts` reached `max_attempts`) it fails instead, its error saying so
    (and carrying `error`, the holder's reason, when given). With `throttle_s` (a cooldown:
    "the upstream answered 429") the lead is queued whatever its attempt, this lease does
    not count against `max_attempts`, and the whole session pauses until now + `throttle_s`.

    409 `lease_lost` when the lease is no longer valid."""
    with counting_lost("release"):
        lead = await queue.release(
            body.lead_id, body.token, body.delay_s, error=body.error, throttle_s=body.throttle_s
        )
    metrics.RELEASES.inc()
    return LeadAnswer.of(lead)


# -- operators ---------------------------------------------------------------


@router.post(
    "/sweep",
    tags=["operators"],
    responses=responses(*BODY_PROBLEMS),
)
async def sweep(body: SweepIn, queue: QueueDep) -> SweepOut:
    """Requeue expired leases of one session (`{"session": "s"}`) or of all (`{"all": true}`);
    a lead that reached `max_attempts` becomes `failed` instead."""
    result = await queue.sweep_all() if body.session is None else await queue.sweep(body.session)
    metrics.count_sweep(result, "api")
    return SweepOut.model_validate(result)


@router.get(
    "/sessions/{session}/stats",
    tags=["operators"],
    responses=responses("validation_error", "unavailable"),
)
async def session_stats(session: SessionPath, queue: QueueDep) -> CountsOut:
    """Lead counts by status in one session; pending = queued + leased;
    `oldest_available_age_s`, the age of its oldest lead that could be leased now (null when
    none): the signal to scale workers on."""
    return CountsOut.of(await queue.stats(session))


@router.get("/stats", tags=["operators"], responses=responses("unavailable"))
async def stats(queue: QueueDep) -> AllStatsOut:
    """Lead counts per session, and their total; each with `oldest_available_age_s`."""
    return AllStatsOut.of(await queue.stats_all())


@router.get(
    "/sessions/{session}/settings",
    tags=["operators"],
    responses=responses("validation_error", "unavailable"),
)
async def get_settings(session: SessionPath, queue: QueueDep) -> SettingsOut:
    """The session's `weight`, `max_leased`, `rate_per_s` and `burst` (the defaults, weight 1
    and no limits, for a session never set)."""
    return SettingsOut.of(await queue.settings(session))


@router.put(
    "/sessions/{session}/settings",
    tags=["operators"],
    responses=responses(*BODY_PROBLEMS),
)
async def put_settings(session: SessionPath, body: SettingsIn, queue: QueueDep) -> SettingsOut:
    """Set the session's weight in a lease across sessions, its cap on leads leased at once
    (`max_leased`) and its rate of leases granted (`rate_per_s`, `burst`: a token bucket on
    the database clock); a field left out takes its default, `null` is no limit. It binds
    every lease that begins after it answers, through every API process."""
    settings = SessionSettings(**body.model_dump())
    return SettingsOut.of(await queue.put_settings(session, settings))


@router.post(
    "/sessions/{session}/pause",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("forbidden", *BODY_PROBLEMS),
)
async def pause(session: SessionPath, queue: QueueDep, body: PauseIn | None = None) -> SettingsOut:
    """Pause the session: no lease of it begins until `for_s` seconds from now (database
    clock), or until resumed without it. Leases held go on. It binds every lease that begins
    after it answers, through every API process. Answers the settings, with `paused_until`.
    A browser's cross-site request (the body is optional) is refused 403."""
    for_s = None if body is None else body.for_s
    return SettingsOut.of(await queue.pause(session, for_s))


@router.post(
    "/sessions/{session}/resume",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("forbidden", "validation_error", "unavailable"),
)
async def resume(session: SessionPath, queue: QueueDep) -> SettingsOut:
    """End the session's pause (an operator's or a throttled release's); its waiting leases
    wake. Answers the settings."""
    return SettingsOut.of(await queue.resume(session))


@router.get(
    "/sessions/{session}/report",
    tags=["operators"],
    responses=responses("validation_error", "unavailable"),
)
async def session_report(session: SessionPath, queue: QueueDep) -> ReportOut:
    """The session's audit, read from the `lead_events` ledger: completions, double
    completions, overlapping leases and wasted attempts (all zero with the ledger off)."""
    return ReportOut.of(await report.report(queue, session))


@router.get(
    "/leads/{lead_id}",
    tags=["operators"],
    responses=responses("not_found", "validation_error", "unavailable"),
)
async def get_lead(lead_id: LeadIdPath, queue: QueueDep) -> LeadOut:
    """One lead (its lease token is never shown)."""
    return LeadOut.of(await queue.get(lead_id))


@router.post(
    "/leads/{lead_id}/cancel",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("not_found", "conflict", "forbidden", "validation_error", "unavailable"),
)
async def cancel(lead_id: LeadIdPath, queue: QueueDep) -> LeadOut:
    """A queued or leased lead becomes `failed` with error `cancelled`; its holder's next
    renew or complete gets 409 `lease_lost`. A finished lead answers 409 `conflict`."""
    return LeadOut.of(await queue.cancel(lead_id))


@router.post(
    "/leads/{lead_id}/retry",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("not_found", "conflict", "forbidden", "validation_error", "unavailable"),
)
async def retry(lead_id: LeadIdPath, queue: QueueDep) -> LeadOut:
    """Queue a `failed` lead again (dead-letter replay); any other status answers 409 `conflict`."""
    return LeadOut.of(await queue.retry(lead_id))


@router.get(
    "/leads/{lead_id}/events",
    tags=["operators"],
    responses=responses("not_found", "validation_error", "unavailable"),
)
async def lead_events(lead_id: LeadIdPath, queue: QueueDep) -> LeadEventsOut:
    """The lead and its ledger, read at one instant: every event in the order written (push,
    each lease with its attempt and owner, release, expiry, completion, cancel, retry), each at
    the database clock's time. Renewals write none. Empty with the ledger off."""
    return LeadEventsOut.of(await timeline.timeline(queue, lead_id))


@router.post(
    "/sessions/{session}/retry-failed",
    tags=["operators"],
    dependencies=SameSite,
    responses=responses("forbidden", "validation_error", "unavailable"),
)
async def retry_failed(session: SessionPath, queue: QueueDep) -> RetriedOut:
    """Queue every `failed` lead of the session again, as `POST /leads/{id}/retry` does each
    (dead-letter replay: the next lease of each is a new attempt); answers how many. A lead
    that fails while it runs is left for the next call. No body; refuses a browser's
    cross-site request (403)."""
    return RetriedOut(requeued=await queue.retry_failed(session))


@router.get("/metrics", tags=["operators"], response_class=Response)
async def prometheus_metrics(queue: QueueDep) -> Response:
    """Prometheus text format: the counters of every server process, and lead counts read
    from the database now (left out while it does not answer)."""
    try:
        stats: AllCounts | None = await queue.stats_all()
    except Unavailable:
        stats = None
    return Response(metrics.render(stats), media_type=metrics.CONTENT_TYPE)


@router.get("/dashboard", tags=["operators"], response_class=HTMLResponse)
async def operator_dashboard() -> HTMLResponse:
    """The operator's page. It holds no data and no secret, so it is served without a token;
    its script asks for the token once and polls `/dashboard/data` with it."""
    return HTMLResponse(page.shell(), headers=SHELL_HEADERS)


@router.get(
    "/dashboard/data", tags=["operators"], responses=responses("validation_error", "unavailable")
)
async def operator_dashboard_data(queue: QueueDep, search: SearchQuery = None) -> JSONResponse:
    """What the dashboard shows: per session its counts, oldest available lead, settings and
    completions per minute; the leases closest to expiry; the latest failures. With `search`,
    only the sessions whose name holds it (in any case)."""
    return JSONResponse(page.to_json(await overview.snapshot(queue, search)))


# -- probes ------------------------------------------------------------------


@probes.get("/healthz")
async def healthz() -> Health:
    """200 while the process runs."""
    return Health(status="ok")


@probes.get("/readyz", response_model=Health, responses=responses("unavailable"))
async def readyz(runtime: RuntimeDep) -> Health | ProblemResponse:
    """200 when the database answers, the schema is at head and boot recovery is done; else 503."""
    reason = await runtime.ready()
    if reason is not None:
        return unavailable(reason)
    return Health(status="ready")
