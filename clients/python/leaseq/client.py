"""The HTTP client of the leaseq REST API (SPEC.md), for workers and scripts.

One implementation, asynchronous (``AsyncClient``): the work loop needs many
calls in flight at once. Answers are parsed into the ``leaseq.model`` dataclasses;
problem+json answers are raised as the ``leaseq.errors`` exceptions the service
raises, chosen by their ``code``. Connection errors, timeouts and 502/503/504
answers are retried with exponential backoff and jitter; a 4xx answer never is.

A retry must never turn one intent into two effects, so only calls that are
safe to repeat are retried as they are: reads; renew (a second renewal only
extends the lease again from now, with the same checkpoint); putting a
session's settings (the same again); complete (idempotent: the same completion
again answers as the first did); release, sweep, cancel and retry (a repeat
finds the work done and is refused, changing nothing). Push and lease are not
safe as they are, so each logical call gets an ``Idempotency-Key`` of its own
(a fresh UUID), sent with every retry of it: the service answers a repeat
with the first answer (the same ids, the same leases) instead of pushing or
leasing again.

Knows nothing of the queue's internals or of the database: HTTP only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from types import TracebackType
from typing import Any, Self, TypeVar
from urllib.parse import quote

import httpx

from leaseq import timefmt
from leaseq.errors import (
    BY_CODE,
    ApiError,
    InvalidInput,
    LeaseqError,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
)
from leaseq.limits import DEFAULT_MAX_BODY_BYTES, MAX_ITEM_BATCH, MAX_PUSH_BATCH
from leaseq.model import (
    STATUSES,
    AllCounts,
    CompleteItem,
    Counts,
    FinalStatus,
    ItemResult,
    Lead,
    Lease,
    NewLead,
    NextLease,
    PushResult,
    Renewal,
    RenewItem,
    SessionSettings,
    SweepResult,
)

DEFAULT_TIMEOUT_S = 10.0
RETRY_STATUSES = frozenset({502, 503, 504})
IDEMPOTENCY_HEADER = "Idempotency-Key"
_T = TypeVar("_T")


def new_idempotency_key() -> str:
    """A key for one logical push or lease, sent again with each of its retries."""
    return str(uuid.uuid4())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How often and how patiently a call is retried on a connection error or a 502/503/504.

    The n-th retry waits ``min(max_s, base_s * 2**n)``, half of it fixed and
    half random (jitter), or the service's Retry-After when that is shorter.
    """

    attempts: int = 6
    base_s: float = 0.1
    max_s: float = 2.0

    def delay(self, retry: int, retry_after: float | None = None) -> float:
        cap = min(self.max_s, self.base_s * 2**retry)
        if retry_after is not None:
            cap = min(cap, max(retry_after, 0.0))
        return float(cap / 2 + random.uniform(0, cap / 2))


NO_RETRY = RetryPolicy(attempts=1)


def _time(value: Any) -> datetime:
    return timefmt.parse(value)


def _maybe_time(value: Any) -> datetime | None:
    return None if value is None else _time(value)


def parse_lead(data: Mapping[str, Any]) -> Lead:
    """A lead object of the API as a ``Lead``."""
    return Lead(
        id=data["id"],
        session=data["session"],
        priority=data.get("priority", 0),
        payload=data.get("payload") or {},
        key=data.get("key"),
        depth=data.get("depth", 0),
        parent_id=data.get("parent_id"),
        status=data["status"],
        owner=data.get("owner"),
        attempts=data.get("attempts", 0),
        max_attempts=data["max_attempts"],
        available_at=_time(data["available_at"]),
        lease_expires_at=_maybe_time(data.get("lease_expires_at")),
        result=data.get("result"),
        error=data.get("error"),
        created_at=_time(data["created_at"]),
        updated_at=_time(data["updated_at"]),
        checkpoint=data.get("checkpoint"),
    )


def parse_lease(data: Mapping[str, Any]) -> Lease:
    """A lease object of the API as a ``Lease``."""
    return Lease(
        lead=parse_lead(data["lead"]),
        token=data["token"],
        attempt=data["attempt"],
        owner=data["owner"],
        expires_at=_time(data["expires_at"]),
        ttl_s=_maybe_seconds(data.get("ttl_s")),
    )


def _maybe_seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def parse_counts(data: Mapping[str, Any]) -> Counts:
    """Counts by status and the oldest available lead's age; ``pending`` is derived, not read."""
    age = data.get("oldest_available_age_s")
    return Counts(
        **{name: int(data.get(name, 0)) for name in STATUSES},
        oldest_available_age_s=None if age is None else float(age),
    )


def parse_settings(data: Mapping[str, Any]) -> SessionSettings:
    """A session's settings as the API answers them."""
    return SessionSettings(
        weight=float(data["weight"]),
        max_leased=data.get("max_leased"),
        rate_per_s=_maybe_seconds(data.get("rate_per_s")),
        burst=data.get("burst"),
    )


def parse_item_result(data: Mapping[str, Any]) -> ItemResult:
    return ItemResult(
        lead_id=data["lead_id"],
        ok=bool(data["ok"]),
        expires_at=_maybe_time(data.get("expires_at")),
        code=data.get("code"),
        ttl_s=_maybe_seconds(data.get("ttl_s")),
    )


def error_from_problem(status: int, problem: Mapping[str, Any]) -> LeaseqError:
    """The exception for a problem+json answer: the class of its ``code``, else ``ApiError``."""
    code = problem.get("code")
    detail = str(problem.get("detail") or problem.get("title") or f"HTTP {status}")
    cls = BY_CODE.get(code) if isinstance(code, str) else None
    exc: LeaseqError
    if cls is InvalidInput:
        field, sep, message = detail.partition(": ")
        exc = InvalidInput(field, message) if sep else InvalidInput("request", detail)
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


def _problem(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        return body
    return {"title": response.reason_phrase, "detail": response.text[:500] or None}


def _retry_after(response: httpx.Response) -> float | None:
    try:
        return float(response.headers["retry-after"])
    except (KeyError, ValueError):
        return None


def _new_lead(lead: NewLead | Mapping[str, Any]) -> dict[str, Any]:
    if isinstance(lead, Mapping):
        return dict(lead)
    body: dict[str, Any] = {
        "payload": lead.payload,
        "priority": lead.priority,
        "depth": lead.depth,
        "delay_s": lead.delay_s,
    }
    for name in ("key", "parent_id", "max_attempts"):
        if (value := getattr(lead, name)) is not None:
            body[name] = value
    return body


def _chunks(items: Sequence[_T], size: int) -> list[Sequence[_T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


# The bytes of ``{"leads":[]}`` around a push's leads.
_PUSH_ENVELOPE = len(b'{"leads":[]}')


def _wire_size(value: Any) -> int:
    """The bytes of ``value`` as httpx sends it (compact UTF-8 JSON)."""
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return len(text.encode("utf-8", "surrogatepass"))


def _push_bodies(leads: list[dict[str, Any]], max_bytes: int) -> list[list[dict[str, Any]]]:
    """The leads in calls of at most MAX_PUSH_BATCH leads and ``max_bytes`` of body each.

    A lead too large for any body goes alone, for the service to refuse (413).
    """
    bodies: list[list[dict[str, Any]]] = []
    body: list[dict[str, Any]] = []
    size = _PUSH_ENVELOPE
    for lead in leads:
        more = _wire_size(lead) + (1 if body else 0)  # the comma before it
        if body and (len(body) == MAX_PUSH_BATCH or size + more > max_bytes):
            bodies.append(body)
            body, size, more = [], _PUSH_ENVELOPE, more - 1
        body.append(lead)
        size += more
    if body:
        bodies.append(body)
    return bodies


class AsyncClient:
    """The leaseq REST API over HTTP. Use ``async with AsyncClient(url) as client``.

    Every method raises the ``leaseq.errors`` exception of the answer's ``code``
    (``LeaseLost``, ``NotFound``, ``InvalidInput``, ``Conflict``,
    ``Unavailable``), ``Unauthorized`` / ``PayloadTooLarge`` / ``ApiError``
    otherwise, and ``Unavailable`` when the service cannot be reached after
    the retries of ``retry_policy``.
    """

    def __init__(
        self,
        url: str,
        *,
        token: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        retry_policy: RetryPolicy | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
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
        self._http = httpx.AsyncClient(
            base_url=self.url, headers=headers, timeout=timeout_s, transport=transport
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._http.aclose()

    async def _send(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        timeout_s: float | None = None,
        policy: RetryPolicy | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> httpx.Response:
        """One call, retried on connection errors and 502/503/504; a 4xx is raised at once.

        Only calls safe to repeat come here (module docstring); ``Unavailable``
        after the last try names the service's URL.
        """
        policy = policy or self.retry_policy
        timeout = httpx.Timeout(timeout_s or self.timeout_s)
        attempt = 0
        while True:
            wait_hint: float | None = None
            try:
                response = await self._http.request(
                    method, path, json=body, timeout=timeout, headers=headers
                )
            except httpx.TransportError as exc:
                if attempt + 1 >= policy.attempts:
                    why = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
                    raise Unavailable(f"{method} {self.url}{path}: {why}") from exc
            else:
                if response.is_success:
                    return response
                if response.status_code not in RETRY_STATUSES or attempt + 1 >= policy.attempts:
                    raise error_from_problem(response.status_code, _problem(response))
                wait_hint = _retry_after(response)
            await asyncio.sleep(policy.delay(attempt, wait_hint))
            attempt += 1

    async def _json(self, method: str, path: str, body: Any = None, **kw: Any) -> Any:
        return (await self._send(method, path, body, **kw)).json()

    # -- producers ---------------------------------------------------------

    async def push(
        self,
        session: str,
        leads: Sequence[NewLead | Mapping[str, Any]],
        *,
        idempotency_key: str | None = None,
    ) -> PushResult:
        """Queue leads (``NewLead`` or the API's dicts); sent in calls of up to 1,000 leads
        and ``max_body_bytes`` each.

        Each call is atomic on its own; ids come back in input order. Each is
        sent with an ``Idempotency-Key`` (``idempotency_key``, with the call's
        number after the first, or a fresh one), so its retries push once.
        """
        ids: list[int] = []
        created = duplicates = 0
        key = idempotency_key or new_idempotency_key()
        wire = [_new_lead(lead) for lead in leads]
        for n, chunk in enumerate(_push_bodies(wire, self.max_body_bytes)):
            body = {"leads": chunk}
            once = {IDEMPOTENCY_HEADER: key if n == 0 else f"{key}.{n}"}
            data = await self._json("POST", f"/sessions/{_seg(session)}/leads", body, headers=once)
            ids.extend(data["ids"])
            created += data["created"]
            duplicates += data["duplicates"]
        return PushResult(ids=ids, created=created, duplicates=duplicates)

    # -- workers -----------------------------------------------------------

    async def lease(
        self,
        session: str | Sequence[str] | None,
        owner: str,
        *,
        max: int = 1,
        ttl_s: float | None = None,
        wait_s: float = 0.0,
        idempotency_key: str | None = None,
        policy: RetryPolicy | None = None,
    ) -> list[Lease]:
        """Lease up to ``max`` leads; ``wait_s`` > 0 holds the call until work comes or it ends.

        ``session``: one session's name; several names, to lease from the one of
        them furthest below its fair share by weight; None, from any session.
        Without ``ttl_s`` the service grants its default; each lease says the
        ``ttl_s`` granted. Sent with an ``Idempotency-Key`` (``idempotency_key``
        or a fresh one), so a retry gets the leases the first try took.
        """
        body = _lease_body(NextLease(session, owner, max, ttl_s, wait_s))
        once = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        data = await self._json(
            "POST",
            "/lease",
            body,
            timeout_s=self.timeout_s + wait_s,
            headers=once,
            policy=policy,
        )
        return [parse_lease(item) for item in data["leases"]]

    async def renew(
        self, lead_id: int, token: str, ttl_s: float | None = None, *, checkpoint: Any = None
    ) -> Renewal:
        """Extend a valid lease; its new expiry and the ttl granted. Raises LeaseLost.

        A ``checkpoint`` (any JSON but None) is stored on the lead for its next holder.
        """
        body = _renew_item(RenewItem(lead_id, token, ttl_s, checkpoint))
        data = await self._json("POST", "/renew", body)
        return Renewal(expires_at=_time(data["expires_at"]), ttl_s=float(data["ttl_s"]))

    async def renew_many(
        self,
        items: Sequence[RenewItem],
        *,
        policy: RetryPolicy | None = None,
        timeout_s: float | None = None,
    ) -> list[ItemResult]:
        """Renew many leases (calls of up to 100); one answer per item, in order."""
        answers: list[ItemResult] = []
        for chunk in _chunks(items, MAX_ITEM_BATCH):
            body = {"items": [_renew_item(item) for item in chunk]}
            data = await self._json(
                "POST", "/renew/batch", body, policy=policy, timeout_s=timeout_s
            )
            answers.extend(parse_item_result(item) for item in data["results"])
        return answers

    async def complete(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
    ) -> Lead:
        """Finish a valid lease as done, failed or cached; returns the lead. Raises LeaseLost.

        Safe to retry: the same completion again answers as the first did.
        """
        item = CompleteItem(lead_id, token, status, result, error)
        return parse_lead((await self._json("POST", "/complete", _complete_item(item)))["lead"])

    async def complete_and_lease(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
        *,
        next: NextLease,
        idempotency_key: str | None = None,
    ) -> tuple[Lead, list[Lease]]:
        """``complete``, then lease ``next`` in the same request; the lead and the new leases.

        Raises LeaseLost (and leases nothing) when the completion is refused. Sent
        with an ``Idempotency-Key`` (``idempotency_key`` or a fresh one), so a retry
        gets the leases the first try took, and the completion answers as before.
        """
        body = _complete_item(CompleteItem(lead_id, token, status, result, error))
        body["next"] = _lease_body(next)
        data = await self._leasing("/complete", body, next, idempotency_key)
        return parse_lead(data["lead"]), [parse_lease(item) for item in data["leases"]]

    async def complete_many(self, items: Sequence[CompleteItem]) -> list[ItemResult]:
        """Complete many leases (calls of up to 100); one answer per item, in order."""
        answers: list[ItemResult] = []
        for chunk in _chunks(items, MAX_ITEM_BATCH):
            body = {"items": [_complete_item(item) for item in chunk]}
            data = await self._json("POST", "/complete/batch", body)
            answers.extend(parse_item_result(item) for item in data["results"])
        return answers

    async def complete_many_and_lease(
        self,
        items: Sequence[CompleteItem],
        *,
        next: NextLease,
        idempotency_key: str | None = None,
    ) -> tuple[list[ItemResult], list[Lease]]:
        """``complete_many``, then lease ``next`` with the last call of 100; the answers, in
        order, and the new leases (taken whatever the answers were)."""
        if not items:
            raise ValueError("no items to complete")
        chunks = _chunks(items, MAX_ITEM_BATCH)
        answers = await self.complete_many([item for chunk in chunks[:-1] for item in chunk])
        body = {"items": [_complete_item(item) for item in chunks[-1]], "next": _lease_body(next)}
        data = await self._leasing("/complete/batch", body, next, idempotency_key)
        answers.extend(parse_item_result(item) for item in data["results"])
        return answers, [parse_lease(item) for item in data["leases"]]

    async def _leasing(
        self, path: str, body: dict[str, Any], next: NextLease, idempotency_key: str | None
    ) -> Any:
        """A completion that leases ``next`` too: keyed, and given the time ``next`` waits."""
        once = {IDEMPOTENCY_HEADER: idempotency_key or new_idempotency_key()}
        return await self._json(
            "POST", path, body, timeout_s=self.timeout_s + next.wait_s, headers=once
        )

    async def release(
        self, lead_id: int, token: str, delay_s: float = 0.0, *, error: str | None = None
    ) -> Lead:
        """Give a valid lease back; the lead is queued again after ``delay_s``. Raises LeaseLost.

        On the lead's last attempt it fails instead, with ``error`` (why) kept.
        A retry after a lost answer finds the lease gone: LeaseLost, nothing changed.
        """
        body: dict[str, Any] = {"lead_id": lead_id, "token": token, "delay_s": delay_s}
        if error is not None:
            body["error"] = error
        return parse_lead((await self._json("POST", "/release", body))["lead"])

    # -- operators ---------------------------------------------------------

    async def sweep(self, session: str) -> SweepResult:
        """Requeue the expired leases of one session (failed at max_attempts)."""
        return _sweep_result(await self._json("POST", "/sweep", {"session": session}))

    async def sweep_all(self) -> SweepResult:
        """Requeue the expired leases of every session."""
        return _sweep_result(await self._json("POST", "/sweep", {"all": True}))

    async def cancel(self, lead_id: int) -> Lead:
        """Fail a queued or leased lead with error "cancelled". Raises NotFound or Conflict."""
        return parse_lead(await self._json("POST", f"/leads/{int(lead_id)}/cancel"))

    async def retry(self, lead_id: int) -> Lead:
        """Queue a failed lead again (dead-letter replay). Raises NotFound or Conflict."""
        return parse_lead(await self._json("POST", f"/leads/{int(lead_id)}/retry"))

    # -- reading -----------------------------------------------------------

    async def get(self, lead_id: int) -> Lead:
        """One lead by id. Raises NotFound."""
        return parse_lead(await self._json("GET", f"/leads/{int(lead_id)}"))

    async def stats(self, session: str) -> Counts:
        """Lead counts by status in one session."""
        return parse_counts(await self._json("GET", f"/sessions/{_seg(session)}/stats"))

    async def stats_all(self) -> AllCounts:
        """Lead counts per session, and their total."""
        data = await self._json("GET", "/stats")
        sessions = {name: parse_counts(counts) for name, counts in data["sessions"].items()}
        return AllCounts(sessions=sessions, total=parse_counts(data["total"]))

    async def settings(self, session: str) -> SessionSettings:
        """A session's weight, cap and rate (the defaults for one never set)."""
        return parse_settings(await self._json("GET", f"/sessions/{_seg(session)}/settings"))

    async def put_settings(self, session: str, settings: SessionSettings) -> SessionSettings:
        """Replace a session's settings; returns them as stored. Raises InvalidInput.

        Safe to retry: the same settings again store the same.
        """
        body = dataclasses.asdict(settings)
        return parse_settings(await self._json("PUT", f"/sessions/{_seg(session)}/settings", body))

    async def report(self, session: str) -> dict[str, Any]:
        """The ledger's audit of one session, as the service sends it."""
        data: dict[str, Any] = await self._json("GET", f"/sessions/{_seg(session)}/report")
        return data

    async def dashboard(self) -> dict[str, Any]:
        """What the dashboard shows (``GET /dashboard/data``), as the service sends it."""
        data: dict[str, Any] = await self._json("GET", "/dashboard/data")
        return data

    async def metrics(self) -> str:
        """The service's Prometheus text."""
        return (await self._send("GET", "/metrics")).text

    async def healthz(self) -> bool:
        """True while the service process answers; never retried, never raises."""
        return await self._probe("/healthz")

    async def readyz(self) -> bool:
        """True when the service's database answers at the newest schema; never raises."""
        return await self._probe("/readyz")

    async def _probe(self, path: str) -> bool:
        try:
            await self._send("GET", path, policy=NO_RETRY)
        except LeaseqError:
            return False
        return True


def _seg(value: str) -> str:
    """One URL path segment."""
    return quote(value, safe="")


def _lease_body(ask: NextLease) -> dict[str, Any]:
    """The body of /lease, and of a completion's ``next``."""
    body: dict[str, Any] = {"owner": ask.owner, "max": ask.max, "wait_s": ask.wait_s}
    if isinstance(ask.session, str):
        body["session"] = ask.session
    elif ask.session is not None:
        body["sessions"] = list(ask.session)
    if ask.ttl_s is not None:
        body["ttl_s"] = ask.ttl_s
    return body


def _complete_item(item: CompleteItem) -> dict[str, Any]:
    return {
        "lead_id": item.lead_id,
        "token": item.token,
        "status": item.status,
        "result": item.result,
        "error": item.error,
    }


def _renew_item(item: RenewItem) -> dict[str, Any]:
    body: dict[str, Any] = {"lead_id": item.lead_id, "token": item.token}
    if item.ttl_s is not None:
        body["ttl_s"] = item.ttl_s
    if item.checkpoint is not None:
        body["checkpoint"] = item.checkpoint
    return body


def _sweep_result(data: Mapping[str, Any]) -> SweepResult:
    return SweepResult(requeued=data["requeued"], failed=data["failed"])
