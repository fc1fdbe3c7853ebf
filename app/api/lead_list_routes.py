"""``/sessions/{session}/leads`` for operators: a session's leads listed a page at a time,
and retried or cancelled many at once (``app.domain.listing``); its throughput over time
(``app.domain.throughput``), for its page on the dashboard.

Each route is bound by the token's sessions as every route of a session is (the path's
``{session}``): a reader may list, an operator may act. The bulk verbs refuse a browser's
cross-site request as the one-by-one verbs do, and each call is in the audit trail with the
count of what it changed.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import AwareDatetime, Field, field_validator

from app.api.access import Access, Where
from app.api.front_door import FrontDoorRoute
from app.api.routes import RuntimeDep, SameSite, SessionPath
from app.api.schemas import Answer, Body, LeadId, LeadOut, Timestamp
from app.domain import listing, throughput
from app.domain.access import Action, Principal
from app.service.runtime import Runtime
from leaseq.limits import MAX_KEY_CHARS, MAX_OWNER_CHARS
from leaseq.model import Status

router = APIRouter(route_class=FrontDoorRoute, tags=["operators"])

Reading = Annotated[Principal, Depends(Access(Action.READ, Where.SESSION))]
Operating = Annotated[Principal, Depends(Access(Action.OPERATE, Where.SESSION))]

KEY_PREFIX = "Leads whose dedupe `key` starts with this."
OWNER = "Leads held, or last held, by this worker."
ERROR = "Leads whose error contains this text, in any case."
AT = "RFC 3339 with its offset; `after` is inclusive, `before` exclusive."


class LeadPageOut(Answer):
    leads: list[LeadOut] = Field(description="Each as `GET /leads/{id}` answers it.")
    next_cursor: str | None = Field(
        description="Give it as `cursor` for the next page; null on the last."
    )


# An instant of a filter: RFC 3339 with its offset, parsed from the JSON string (the
# body is strict otherwise).
Instant = Annotated[AwareDatetime, Field(strict=False, description=AT)]


class LeadFilterIn(Body):
    """Which leads of the session: the list's query fields."""

    status: list[Status] | None = Field(None, max_length=8, description="Any of these.")
    key_prefix: str | None = Field(None, max_length=MAX_KEY_CHARS, description=KEY_PREFIX)
    owner: str | None = Field(None, max_length=MAX_OWNER_CHARS, description=OWNER)
    error: str | None = Field(None, max_length=listing.MAX_ERROR_SEARCH_CHARS, description=ERROR)
    created_after: Instant | None = None
    created_before: Instant | None = None
    updated_after: Instant | None = None
    updated_before: Instant | None = None

    def checked(self) -> listing.LeadFilter:
        return listing.lead_filter(**dict(self))


class ByIds(Body):
    """These leads."""

    ids: list[LeadId] = Field(min_length=1, max_length=listing.MAX_IDS)

    @field_validator("ids", mode="before")
    @classmethod
    def _integral_ids(cls, value: Any) -> Any:
        """5.0 is the integer 5 in JSON, as the body's own fields take it (``Body``)."""
        if not isinstance(value, list):
            return value
        return [int(v) if isinstance(v, float) and v.is_integer() else v for v in value]


class ByFilter(Body):
    """The leads the filter selects."""

    filter: LeadFilterIn


# One of the two: each refuses the other's field, so `{}` or both are refused (422).
BulkIn = ByIds | ByFilter


class BulkOut(Answer):
    changed: int = Field(description="Leads changed; those in another status are not counted.")
    more: bool = Field(
        description=f"Leads the filter selects may be left (a call changes at most "
        f"{listing.MAX_CHANGED:,}): call again until false."
    )


def _filter_query(
    status: Annotated[list[Status] | None, Query(description="Any of these (repeat it).")] = None,
    key_prefix: Annotated[
        str | None, Query(max_length=MAX_KEY_CHARS, description=KEY_PREFIX)
    ] = None,
    owner: Annotated[str | None, Query(max_length=MAX_OWNER_CHARS, description=OWNER)] = None,
    error: Annotated[
        str | None, Query(max_length=listing.MAX_ERROR_SEARCH_CHARS, description=ERROR)
    ] = None,
    created_after: Annotated[AwareDatetime | None, Query(description=AT)] = None,
    created_before: Annotated[AwareDatetime | None, Query(description=AT)] = None,
    updated_after: Annotated[AwareDatetime | None, Query(description=AT)] = None,
    updated_before: Annotated[AwareDatetime | None, Query(description=AT)] = None,
) -> listing.LeadFilter:
    fields: dict[str, Any] = dict(locals())
    return listing.lead_filter(**fields)


FilterQuery = Annotated[listing.LeadFilter, Depends(_filter_query)]


@router.get("/sessions/{session}/leads", operation_id="listLeads")
async def list_leads(
    session: SessionPath,
    runtime: RuntimeDep,
    principal: Reading,
    which: FilterQuery,
    order: Annotated[
        Literal["newest", "oldest"], Query(description="By id: newest (the default) or oldest.")
    ] = "newest",
    limit: Annotated[int, Query(ge=1, le=listing.MAX_LIMIT, description="Leads a page.")] = (
        listing.DEFAULT_LIMIT
    ),
    cursor: Annotated[
        str | None, Query(max_length=200, description="The previous page's `next_cursor`.")
    ] = None,
) -> LeadPageOut:
    """A page of the session's leads, filtered, newest first unless `order=oldest`. Paging
    by `next_cursor` never shows a lead twice nor skips one, however many are pushed
    meanwhile; a cursor given with another filter, order or session is refused (422)."""
    page = await listing.list_leads(
        runtime.queue, session, which, order=order, limit=limit, cursor=cursor
    )
    leads = [LeadOut.of(lead) for lead in page.leads]
    return LeadPageOut(leads=leads, next_cursor=page.next_cursor)


async def _act(
    verb: listing.Verb, session: str, body: BulkIn, runtime: Runtime, principal: Principal
) -> BulkOut:
    if isinstance(body, ByIds):
        done = await listing.act(runtime.queue, verb, session, ids=body.ids)
    else:
        done = await listing.act(runtime.queue, verb, session, which=body.filter.checked())
    await runtime.tokens.audit(
        principal, f"{verb}-leads", session=session, detail={"changed": done.changed}
    )
    return BulkOut(changed=done.changed, more=done.more)


@router.post("/sessions/{session}/leads/retry", operation_id="retryLeads", dependencies=SameSite)
async def retry_leads(
    session: SessionPath, body: BulkIn, runtime: RuntimeDep, principal: Operating
) -> BulkOut:
    """Queue the session's `failed` leads among `ids`, or those `filter` selects, again, as
    `POST /leads/{id}/retry` does each (and writes each in the ledger); a lead in another
    status is left as it is and not counted."""
    return await _act("retry", session, body, runtime, principal)


@router.post("/sessions/{session}/leads/cancel", operation_id="cancelLeads", dependencies=SameSite)
async def cancel_leads(
    session: SessionPath, body: BulkIn, runtime: RuntimeDep, principal: Operating
) -> BulkOut:
    """Fail the session's `queued` and `leased` leads among `ids`, or those `filter` selects,
    with error `cancelled`, as `POST /leads/{id}/cancel` does each: a holder's next renew or
    complete gets 409 `lease_lost`. A finished lead is left as it is and not counted."""
    return await _act("cancel", session, body, runtime, principal)


class ThroughputOut(Answer):
    now: Timestamp = Field(description="The database clock: the end of the last minute.")
    completed: list[int] = Field(
        description=f"Leads finished (done or cached) in each of the last "
        f"{throughput.WINDOW_MINUTES} minutes, oldest first."
    )
    failed: list[int] = Field(description="Leads failed in each of those minutes, oldest first.")


@router.get("/sessions/{session}/throughput", operation_id="getThroughput")
async def get_throughput(
    session: SessionPath, runtime: RuntimeDep, principal: Reading
) -> ThroughputOut:
    """The session's leads finished and failed per minute over the last hour, each counted
    in the minute of its last change with its present status (what the dashboard draws on a
    session's page). It reads the leads finished in the hour only, on the session's shard."""
    done = await throughput.throughput(runtime.queue, session)
    return ThroughputOut(now=done.now, completed=done.completed, failed=done.failed)
