"""Every endpoint of the REST API (docs/contract.md#routes-at-a-glance), once for both clients.

Each is an ``Exchange`` (``leaseq._wire``): it builds its calls, yields them
and parses their answers, knowing nothing of how they travel. ``@endpoint``
makes it a method of ``Client`` that answers, and of ``AsyncClient`` that is
awaited, with the same parameters and docstring: the two clients cannot
drift apart, because there is only one of each method to keep.

Every method raises the ``leaseq.errors`` exception of the answer's ``code``
(one class per code of docs/contract.md#error-codes; ``ApiError`` for any
other), and ``Unavailable`` when the service cannot be reached after the
retries of the client's ``retry_policy``.
"""

from __future__ import annotations

import dataclasses
import inspect
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, Self, TypeVar, overload
from urllib.parse import urlencode

from leaseq._wire import (
    DEFAULT_TIMEOUT_S,
    IDEMPOTENCY_HEADER,
    NO_RETRY,
    TRACEPARENT_HEADER,
    Call,
    Exchange,
    RetryPolicy,
    chunks,
    complete_body,
    lease_body,
    new_idempotency_key,
    new_lead_body,
    parse_counts,
    parse_item_result,
    parse_lead,
    parse_lease,
    parse_renewal,
    parse_scaling,
    parse_schedule,
    parse_settings,
    parse_sweep,
    parse_token,
    push_bodies,
    renew_body,
    seg,
    unheard,
)
from leaseq.errors import LeaseqError, NotFound, Unavailable
from leaseq.limits import DEFAULT_MAX_BODY_BYTES, MAX_ITEM_BATCH, MAX_WAIT_S
from leaseq.model import (
    FINAL_STATUSES,
    AllCounts,
    ApiToken,
    BulkResult,
    CompleteItem,
    Counts,
    FinalStatus,
    ItemResult,
    Lead,
    LeadPage,
    Lease,
    NewLead,
    NextLease,
    PushResult,
    Renewal,
    RenewItem,
    Scaling,
    Schedule,
    SessionSettings,
    Status,
    SweepResult,
)
from leaseq.timefmt import rfc3339

if TYPE_CHECKING:
    from leaseq._client import AsyncClient, Client

_P = ParamSpec("_P")
_T = TypeVar("_T")
_Transport = TypeVar("_Transport")


class endpoint(Generic[_P, _T]):  # a decorator, named as property is
    """An exchange as a client method: called on ``Client``, run; on ``AsyncClient``, awaited.

    The bound method is made on first use and kept on the client, so a call
    costs what a plain method call does.
    """

    def __init__(self, exchange: Callable[Concatenate[Any, _P], Exchange[_T]]) -> None:
        self.exchange = exchange
        self.name = exchange.__name__
        self.__doc__ = exchange.__doc__
        signature = inspect.signature(exchange)
        self.signature = signature.replace(parameters=list(signature.parameters.values())[1:])

    @overload
    def __get__(self, client: None, owner: type[Any]) -> Self: ...
    @overload
    def __get__(
        self, client: AsyncClient, owner: type[Any]
    ) -> Callable[_P, Coroutine[Any, Any, _T]]: ...
    @overload
    def __get__(self, client: Client, owner: type[Any]) -> Callable[_P, _T]: ...
    def __get__(self, client: Endpoints[Any] | None, owner: type[Any]) -> Any:
        if client is None:
            return self
        exchange, run = self.exchange, client._run

        async def awaited(*args: Any, **kwargs: Any) -> Any:
            return await run(exchange(client, *args, **kwargs))

        def blocking(*args: Any, **kwargs: Any) -> Any:
            return run(exchange(client, *args, **kwargs))

        method: Any = awaited if inspect.iscoroutinefunction(run) else blocking
        method.__name__ = self.name
        method.__qualname__ = f"{type(client).__name__}.{self.name}"
        method.__doc__ = self.__doc__
        method.__signature__ = self.signature
        client.__dict__[self.name] = method
        return method


class Endpoints(Generic[_Transport]):
    """What both clients share: their settings, and every endpoint (the module docstring).

    A subclass gives ``_connect`` (its httpx transport) and ``_run``: how an
    exchange's calls go out and come back.
    """

    _run: Callable[[Exchange[Any]], Any]

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry_policy: RetryPolicy | None = None,
        transport: _Transport | None = None,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    ) -> None:
        """``max_body_bytes``: the service's ``LEASEQ_MAX_BODY_BYTES``; pushes fit under it."""
        headers = {"Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.max_body_bytes = max_body_bytes
        self.retry_policy = retry_policy or RetryPolicy()
        self._headers = headers
        self._connect(transport)

    def _connect(self, transport: _Transport | None) -> None:
        """Keep ``transport``, or the client's default one."""
        raise NotImplementedError

    # -- producers ---------------------------------------------------------

    @endpoint
    def push(
        self,
        session: str,
        leads: Sequence[NewLead | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
        traceparent: str | None = None,
        wait_for_room_s: float = 0.0,
        policy: RetryPolicy | None = None,
    ) -> Exchange[PushResult]:
        """Queue leads (``NewLead`` or the API's dicts); sent in calls of up to 1,000 leads
        and ``max_body_bytes`` each.

        Each call is atomic on its own; ids come back in input order. Each is
        sent with an ``Idempotency-Key`` (``idempotency_key``, with the call's
        number after the first, or a fresh one), so its retries push once.
        ``traceparent`` (W3C Trace Context) is sent as the header of each call: stored on
        every lead without one of its own (``NewLead.traceparent``).

        A call that would pass the session's ``max_queued`` stores none of its leads and
        raises ``QuotaExceeded`` (its ``retry_after_s``: the service's Retry-After), unless
        ``wait_for_room_s`` > 0: the call is then sent again, with its key, after each
        Retry-After, until it is taken or that many seconds were waited (then it raises).
        Calls taken before a refusal stay pushed.

        A call whose answer is lost (a connection error, a timeout, a 502/503/504) is sent
        again, with its key, for as long as the retry budget says: ``policy``, else the
        client's ``retry_policy`` (by default 6 tries, about 3 s of backoff besides each
        try's ``timeout_s``; give more attempts to ride out a longer outage). A retry never
        pushes twice. When the budget runs out it raises ``Unavailable`` with the call's
        ``idempotency_key``: the push may have been stored all the same, and
        ``pushed(session, key)`` says whether (send it again with the same key otherwise).
        """
        ids: list[int] = []
        created = duplicates = 0
        key = idempotency_key or new_idempotency_key()
        wire = [new_lead_body(lead) for lead in leads]
        for n, chunk in enumerate(push_bodies(wire, self.max_body_bytes)):
            call_key = key if n == 0 else f"{key}.{n}"
            once = {IDEMPOTENCY_HEADER: call_key}
            if traceparent is not None:
                once[TRACEPARENT_HEADER] = traceparent
            path = f"/sessions/{seg(session)}/leads"
            call = Call(
                "POST", path, {"leads": chunk}, headers=once, policy=policy, room_s=wait_for_room_s
            )
            try:
                data = (yield call).json()
            except Unavailable as exc:
                raise unheard(exc, session, call_key) from exc
            ids.extend(data["ids"])
            created += data["created"]
            duplicates += data["duplicates"]
        return PushResult(ids=ids, created=created, duplicates=duplicates)

    @endpoint
    def pushed(self, session: str, idempotency_key: str) -> Exchange[PushResult | None]:
        """What the push into ``session`` sent with ``idempotency_key`` answered (its lead ids),
        or None when no such push was stored: then it may be sent again with the same key.

        For a producer whose push raised ``Unavailable`` (its ``idempotency_key``): the answers
        were lost, not necessarily the push. A push of several calls has one key per call
        (the key, then ``key.1``, ``key.2`` …). A push still running is seen once it commits;
        a key is remembered ``LEASEQ_IDEMPOTENCY_TTL_S`` at least.
        """
        path = f"/sessions/{seg(session)}/pushes/{seg(idempotency_key)}"
        try:
            data = (yield Call("GET", path)).json()
        except NotFound:
            return None
        return PushResult(ids=data["ids"], created=data["created"], duplicates=data["duplicates"])

    # -- workers -----------------------------------------------------------

    @endpoint
    def lease(
        self,
        session: str | Sequence[str] | None,
        owner: str,
        *,
        max: int = 1,
        ttl_s: float | None = None,
        wait_s: float = 0.0,
        idempotency_key: str | None = None,
        policy: RetryPolicy | None = None,
    ) -> Exchange[list[Lease]]:
        """Lease up to ``max`` leads; ``wait_s`` > 0 holds the call until work comes or it ends.

        ``session``: one session's name; several names, to lease from the one of
        them furthest below its fair share by weight; None, from any session.
        Without ``ttl_s`` the service grants its default; each lease says the
        ``ttl_s`` granted. Sent with an ``Idempotency-Key`` (``idempotency_key``
        or a fresh one), so a retry gets the leases the first try took.
        """
        once = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        body = lease_body(NextLease(session, owner, max, ttl_s, wait_s))
        timeout_s = self.timeout_s + wait_s
        data = (yield Call("POST", "/lease", body, once, timeout_s, policy)).json()
        return [parse_lease(item) for item in data["leases"]]

    @endpoint
    def renew(
        self, lead_id: int, token: str, ttl_s: float | None = None, *, checkpoint: Any = None
    ) -> Exchange[Renewal]:
        """Extend a valid lease; its new expiry and the ttl granted. Raises LeaseLost.

        A ``checkpoint`` (any JSON but None) is stored on the lead for its next holder.
        """
        body = renew_body(RenewItem(lead_id, token, ttl_s, checkpoint))
        return parse_renewal((yield Call("POST", "/renew", body)).json())

    @endpoint
    def renew_many(
        self,
        items: Sequence[RenewItem],
        *,
        policy: RetryPolicy | None = None,
        timeout_s: float | None = None,
    ) -> Exchange[list[ItemResult]]:
        """Renew many leases (calls of up to 100); one answer per item, in order."""
        answers: list[ItemResult] = []
        for chunk in chunks(items, MAX_ITEM_BATCH):
            body = {"items": [renew_body(item) for item in chunk]}
            data = (yield Call("POST", "/renew/batch", body, None, timeout_s, policy)).json()
            answers.extend(parse_item_result(item) for item in data["results"])
        return answers

    @endpoint
    def complete(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
    ) -> Exchange[Lead]:
        """Finish a valid lease as done, failed or cached; returns the lead. Raises LeaseLost.

        Safe to retry: the same completion again answers as the first did.
        """
        body = complete_body(CompleteItem(lead_id, token, status, result, error))
        return parse_lead((yield Call("POST", "/complete", body)).json()["lead"])

    @endpoint
    def complete_and_lease(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
        *,
        next: NextLease,
        idempotency_key: str | None = None,
    ) -> Exchange[tuple[Lead, list[Lease]]]:
        """``complete``, then lease ``next`` in the same request; the lead and the new leases.

        Raises LeaseLost (and leases nothing) when the completion is refused. Sent
        with an ``Idempotency-Key`` (``idempotency_key`` or a fresh one), so a retry
        gets the leases the first try took, and the completion answers as before.
        """
        body = complete_body(CompleteItem(lead_id, token, status, result, error))
        body["next"] = lease_body(next)
        data = (yield self._leasing("/complete", body, next, idempotency_key)).json()
        return parse_lead(data["lead"]), [parse_lease(item) for item in data["leases"]]

    @endpoint
    def complete_many(self, items: Sequence[CompleteItem]) -> Exchange[list[ItemResult]]:
        """Complete many leases (calls of up to 100); one answer per item, in order."""
        answers: list[ItemResult] = []
        for chunk in chunks(items, MAX_ITEM_BATCH):
            body = {"items": [complete_body(item) for item in chunk]}
            data = (yield Call("POST", "/complete/batch", body)).json()
            answers.extend(parse_item_result(item) for item in data["results"])
        return answers

    @endpoint
    def complete_many_and_lease(
        self,
        items: Sequence[CompleteItem],
        *,
        next: NextLease,
        idempotency_key: str | None = None,
    ) -> Exchange[tuple[list[ItemResult], list[Lease]]]:
        """``complete_many``, then lease ``next`` with the last call of 100; the answers, in
        order, and the new leases (taken whatever the answers were)."""
        if not items:
            raise ValueError("no items to complete")
        *before, last = chunks(items, MAX_ITEM_BATCH)
        answers: list[ItemResult] = []
        for chunk in before:
            body: dict[str, Any] = {"items": [complete_body(item) for item in chunk]}
            data = (yield Call("POST", "/complete/batch", body)).json()
            answers.extend(parse_item_result(item) for item in data["results"])
        body = {"items": [complete_body(item) for item in last], "next": lease_body(next)}
        data = (yield self._leasing("/complete/batch", body, next, idempotency_key)).json()
        answers.extend(parse_item_result(item) for item in data["results"])
        return answers, [parse_lease(item) for item in data["leases"]]

    def _leasing(
        self, path: str, body: dict[str, Any], next: NextLease, idempotency_key: str | None
    ) -> Call:
        """A completion that leases ``next`` too: keyed, and given the time ``next`` waits."""
        once = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        return Call("POST", path, body, once, self.timeout_s + next.wait_s)

    @endpoint
    def release(
        self,
        lead_id: int,
        token: str,
        delay_s: float = 0.0,
        *,
        error: str | None = None,
        throttle_s: float | None = None,
        unstarted: bool = False,
    ) -> Exchange[Lead]:
        """Give a valid lease back; the lead is queued again after ``delay_s``. Raises LeaseLost.

        On the lead's last attempt it fails instead, with ``error`` (why) kept.
        ``throttle_s``: a cooldown ("the upstream answered 429"): the whole session pauses
        for that long, and this lease does not count against ``max_attempts``.
        ``unstarted``: the lead was never started (prefetched): this lease does not count
        against ``max_attempts``, so giving it back cannot fail it.
        A retry after a lost answer finds the lease gone: LeaseLost, nothing changed.
        """
        body: dict[str, Any] = {"lead_id": lead_id, "token": token, "delay_s": delay_s}
        if error is not None:
            body["error"] = error
        if throttle_s is not None:
            body["throttle_s"] = throttle_s
        if unstarted:
            body["unstarted"] = True
        return parse_lead((yield Call("POST", "/release", body)).json()["lead"])

    # -- operators ---------------------------------------------------------

    @endpoint
    def sweep(self, session: str) -> Exchange[SweepResult]:
        """Requeue the expired leases of one session (failed at max_attempts)."""
        return parse_sweep((yield Call("POST", "/sweep", {"session": session})).json())

    @endpoint
    def sweep_all(self) -> Exchange[SweepResult]:
        """Requeue the expired leases of every session."""
        return parse_sweep((yield Call("POST", "/sweep", {"all": True})).json())

    @endpoint
    def cancel(self, lead_id: int) -> Exchange[Lead]:
        """Fail a queued or leased lead with error "cancelled". Raises NotFound or Conflict."""
        return parse_lead((yield Call("POST", f"/leads/{int(lead_id)}/cancel")).json())

    @endpoint
    def retry(self, lead_id: int) -> Exchange[Lead]:
        """Queue a failed lead again (dead-letter replay). Raises NotFound or Conflict."""
        return parse_lead((yield Call("POST", f"/leads/{int(lead_id)}/retry")).json())

    @endpoint
    def retry_failed(self, session: str) -> Exchange[int]:
        """Queue every failed lead of a session again (dead-letter replay); returns how many.

        Sent again after a lost answer, it requeues only what failed since.
        """
        data = (yield Call("POST", f"/sessions/{seg(session)}/retry-failed")).json()
        return int(data["requeued"])

    @endpoint
    def list_leads(
        self,
        session: str,
        *,
        status: Status | Sequence[Status] | None = None,
        key_prefix: str | None = None,
        owner: str | None = None,
        error: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
        order: str = "newest",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Exchange[LeadPage]:
        """One page of a session's leads, newest first unless ``order="oldest"``, filtered by
        status (one or several), dedupe key prefix, owner, error text (a case-insensitive
        substring) and created or updated range (``after`` inclusive, ``before`` exclusive).

        ``limit``: 1 to 500 (None: the service's 50). Pass the page's ``next_cursor`` as
        ``cursor`` for the next; it serves only the same filter and order. Raises
        InvalidInput.
        """
        filters = lead_filter(
            status,
            key_prefix,
            owner,
            error,
            created_after,
            created_before,
            updated_after,
            updated_before,
        )
        query: list[tuple[str, Any]] = [("order", order)]
        for name, value in filters.items():
            values = value if isinstance(value, list) else [value]
            query += [(name, one) for one in values]
        if limit is not None:
            query.append(("limit", limit))
        if cursor is not None:
            query.append(("cursor", cursor))
        path = f"/sessions/{seg(session)}/leads?{urlencode(query)}"
        data = (yield Call("GET", path)).json()
        return LeadPage([parse_lead(lead) for lead in data["leads"]], data["next_cursor"])

    @endpoint
    def retry_leads(
        self,
        session: str,
        *,
        ids: Sequence[int] | None = None,
        status: Status | Sequence[Status] | None = None,
        key_prefix: str | None = None,
        owner: str | None = None,
        error: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> Exchange[BulkResult]:
        """Queue the session's failed leads among ``ids`` (at most 1,000), or else those the
        filter (``list_leads``'s) selects, again; a lead in another status is not counted.
        At most 10,000 a call: repeat while ``more``. Raises InvalidInput.

        A call by filter is not sent again after a lost answer (it would act on leads that
        failed since); a call by ids is.
        """
        filters = lead_filter(
            status,
            key_prefix,
            owner,
            error,
            created_after,
            created_before,
            updated_after,
            updated_before,
        )
        return (yield from _bulk(f"/sessions/{seg(session)}/leads/retry", ids, filters))

    @endpoint
    def cancel_leads(
        self,
        session: str,
        *,
        ids: Sequence[int] | None = None,
        status: Status | Sequence[Status] | None = None,
        key_prefix: str | None = None,
        owner: str | None = None,
        error: str | None = None,
        created_after: datetime | None = None,
        created_before: datetime | None = None,
        updated_after: datetime | None = None,
        updated_before: datetime | None = None,
    ) -> Exchange[BulkResult]:
        """Fail the session's queued and leased leads among ``ids`` (at most 1,000), or else
        those the filter selects, with error "cancelled" (a holder's next renew or complete
        loses); a finished lead is not counted. At most 10,000 a call: repeat while
        ``more``. Raises InvalidInput. Sent again after a lost answer only by ids.
        """
        filters = lead_filter(
            status,
            key_prefix,
            owner,
            error,
            created_after,
            created_before,
            updated_after,
            updated_before,
        )
        return (yield from _bulk(f"/sessions/{seg(session)}/leads/cancel", ids, filters))

    # -- reading -----------------------------------------------------------

    @endpoint
    def get(self, lead_id: int) -> Exchange[Lead]:
        """One lead by id. Raises NotFound."""
        return parse_lead((yield Call("GET", f"/leads/{int(lead_id)}")).json())

    @endpoint
    def wait_for(self, lead_id: int, timeout: float = MAX_WAIT_S) -> Exchange[Lead]:
        """The lead once it is ``done``, ``failed`` or ``cached``, or as it is after ``timeout``
        seconds. Raises NotFound.

        Each call is held by the service up to 30 s (``GET /leads/{id}?wait_s=n``) and
        answers as soon as the lead ends; a longer ``timeout`` sends the next, so no call
        outlasts a proxy's idle timeout.
        """
        deadline = time.monotonic() + max(0.0, float(timeout))
        while True:
            wait_s = round(min(MAX_WAIT_S, max(0.0, deadline - time.monotonic())), 3)
            call = Call(
                "GET", f"/leads/{int(lead_id)}?wait_s={wait_s}", timeout_s=self.timeout_s + wait_s
            )
            lead = parse_lead((yield call).json())
            if lead.status in FINAL_STATUSES or time.monotonic() >= deadline:
                return lead

    @endpoint
    def stats(self, session: str) -> Exchange[Counts]:
        """Lead counts by status in one session."""
        return parse_counts((yield Call("GET", f"/sessions/{seg(session)}/stats")).json())

    @endpoint
    def stats_all(self) -> Exchange[AllCounts]:
        """Lead counts per session, and their total."""
        data = (yield Call("GET", "/stats")).json()
        sessions = {name: parse_counts(counts) for name, counts in data["sessions"].items()}
        return AllCounts(sessions=sessions, total=parse_counts(data["total"]))

    @endpoint
    def scaling(self, session: str, target_wait_s: float | None = None) -> Exchange[Scaling]:
        """The signal to scale the session's workers on: its backlog, leads held, oldest
        available age, completions per second and the workers that would keep its wait
        under ``target_wait_s`` (None: the service's 60 s)."""
        query = "" if target_wait_s is None else f"?target_wait_s={target_wait_s!r}"
        return parse_scaling((yield Call("GET", f"/sessions/{seg(session)}/scaling{query}")).json())

    @endpoint
    def settings(self, session: str) -> Exchange[SessionSettings]:
        """A session's weight, cap and rate (the defaults for one never set)."""
        return parse_settings((yield Call("GET", f"/sessions/{seg(session)}/settings")).json())

    @endpoint
    def put_settings(self, session: str, settings: SessionSettings) -> Exchange[SessionSettings]:
        """Replace a session's settings; returns them as stored. Raises InvalidInput.

        Safe to retry: the same settings again store the same.
        """
        body = dataclasses.asdict(settings)
        del body["paused_until"]  # not a setting (pause, resume)
        call = Call("PUT", f"/sessions/{seg(session)}/settings", body)
        return parse_settings((yield call).json())

    @endpoint
    def pause(self, session: str, for_s: float | None = None) -> Exchange[SessionSettings]:
        """Pause a session: no lease of it begins for ``for_s`` seconds (None: until resumed);
        leases held go on. Returns its settings, with ``paused_until``. Safe to retry."""
        body = {} if for_s is None else {"for_s": for_s}
        return parse_settings((yield Call("POST", f"/sessions/{seg(session)}/pause", body)).json())

    @endpoint
    def resume(self, session: str) -> Exchange[SessionSettings]:
        """End a session's pause (an operator's or a throttled release's). Safe to retry."""
        return parse_settings((yield Call("POST", f"/sessions/{seg(session)}/resume")).json())

    @endpoint
    def put_schedule(
        self,
        name: str,
        session: str,
        cron: str,
        lead: Mapping[str, Any],
        *,
        timezone: str = "UTC",
    ) -> Exchange[Schedule]:
        """Create or replace a schedule: ``lead`` (payload, priority, max_attempts, delay_s)
        pushed into ``session`` at each tick of ``cron`` in ``timezone``. Raises InvalidInput.

        Safe to retry: the same schedule again stores the same.
        """
        body = {"session": session, "cron": cron, "timezone": timezone, "lead": dict(lead)}
        return parse_schedule((yield Call("PUT", f"/schedules/{seg(name)}", body)).json())

    @endpoint
    def schedule(self, name: str) -> Exchange[Schedule]:
        """One schedule, with its next tick. Raises NotFound."""
        return parse_schedule((yield Call("GET", f"/schedules/{seg(name)}")).json())

    @endpoint
    def schedules(self) -> Exchange[list[Schedule]]:
        """Every schedule, by name."""
        data = (yield Call("GET", "/schedules")).json()
        return [parse_schedule(item) for item in data["schedules"]]

    @endpoint
    def delete_schedule(self, name: str) -> Exchange[None]:
        """Stop a schedule (the leads it pushed stay). Raises NotFound."""
        yield Call("DELETE", f"/schedules/{seg(name)}")

    @endpoint
    def report(self, session: str) -> Exchange[dict[str, Any]]:
        """The ledger's audit of one session, as the service sends it."""
        data: dict[str, Any] = (yield Call("GET", f"/sessions/{seg(session)}/report")).json()
        return data

    @endpoint
    def dashboard(self) -> Exchange[dict[str, Any]]:
        """What the dashboard shows (``GET /dashboard/data``), as the service sends it."""
        data: dict[str, Any] = (yield Call("GET", "/dashboard/data")).json()
        return data

    @endpoint
    def metrics(self) -> Exchange[str]:
        """The service's Prometheus text."""
        return (yield Call("GET", "/metrics")).text

    # -- tokens ------------------------------------------------------------

    @endpoint
    def create_token(
        self,
        role: str,
        sessions: str,
        *,
        name: str | None = None,
        expires_s: float | None = None,
    ) -> Exchange[ApiToken]:
        """Create a scoped token (its ``token`` is in this answer only). Raises InvalidInput
        (a malformed pattern, an unknown role, a live token's name) or Forbidden.

        Never retried: a lost answer's token could not be shown again.
        """
        body = {"role": role, "sessions": sessions, "name": name, "expires_s": expires_s}
        return parse_token((yield Call("POST", "/tokens", body, policy=NO_RETRY)).json())

    @endpoint
    def tokens(self) -> Exchange[list[ApiToken]]:
        """Every token, live, expired or revoked, newest first; never a token itself."""
        data = (yield Call("GET", "/tokens")).json()
        return [parse_token(item) for item in data["tokens"]]

    @endpoint
    def revoke_token(self, name: str) -> Exchange[ApiToken]:
        """Revoke the live token of ``name`` in every API process. Raises NotFound."""
        return parse_token((yield Call("DELETE", f"/tokens/{seg(name)}")).json())

    @endpoint
    def token_self(self) -> Exchange[dict[str, Any]]:
        """Whom the client's token acts as: its name, role, sessions, what it may offer."""
        data: dict[str, Any] = (yield Call("GET", "/tokens/self")).json()
        return data

    @endpoint
    def healthz(self) -> Exchange[bool]:
        """True while the service process answers; never retried, never raises."""
        return (yield from _probe("/healthz"))

    @endpoint
    def readyz(self) -> Exchange[bool]:
        """True when the service's database answers at the newest schema; never raises."""
        return (yield from _probe("/readyz"))


def _probe(path: str) -> Exchange[bool]:
    try:
        yield Call("GET", path, policy=NO_RETRY)
    except LeaseqError:
        return False
    return True


def lead_filter(
    status: Status | Sequence[Status] | None,
    key_prefix: str | None,
    owner: str | None,
    error: str | None,
    *instants: datetime | None,
) -> dict[str, Any]:
    """A filter of a session's leads as the wire names it
    (docs/contract.md#operators-lists-of-leads): the fields given, ``status`` a list, the
    four instants (created after and before, updated after and before) in RFC 3339."""
    named: dict[str, Any] = {"key_prefix": key_prefix, "owner": owner, "error": error}
    for name, at in zip(_RANGES, instants, strict=True):
        named[name] = None if at is None else rfc3339(at)
    if status is not None:
        named["status"] = [status] if isinstance(status, str) else list(status)
    return {name: value for name, value in named.items() if value is not None}


_RANGES = ("created_after", "created_before", "updated_after", "updated_before")


def _bulk(path: str, ids: Sequence[int] | None, filters: dict[str, Any]) -> Exchange[BulkResult]:
    """A bulk retry or cancel: by ``ids`` when given (sent again after a lost answer: the same
    leads), else by ``filters`` (never sent again: it would act on leads that moved since)."""
    if ids is not None:
        call = Call("POST", path, {"ids": [int(lead_id) for lead_id in ids]})
    else:
        call = Call("POST", path, {"filter": filters}, policy=NO_RETRY)
    data = (yield call).json()
    return BulkResult(changed=int(data["changed"]), more=bool(data["more"]))
