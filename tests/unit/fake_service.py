"""An in-memory leaseq service behind ``httpx.MockTransport``, for the unit tier.

It answers the calls a worker makes (``/lease``, ``/renew/batch``,
``/complete``, ``/release``) as docs/contract.md#rest-api says, judging leases on a ``FakeClock``
instead of a database, and records every request. A test makes it misbehave
on purpose: ``down`` paths answer 503, ``lost`` leads answer ``lease_lost``
to their renewals, ``takes_s`` moves the clock while a path answers, a path in
``held`` answers only once its event is set (a service that hangs), and a
renewal carrying a checkpoint in ``refused`` answers 422 (one too large).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from leaseq.timefmt import rfc3339

EPOCH = datetime(2030, 1, 1, tzinfo=UTC)


class FakeClock:
    """Monotonic seconds that move only when a test says so."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class FakeLead:
    id: int
    payload: dict[str, Any]
    max_attempts: int = 5
    status: str = "queued"
    attempts: int = 0
    token: str | None = None
    expires_at: float | None = None
    result: Any = None
    error: str | None = None
    owner: str | None = None
    available_at: float = 0.0
    released: list[float] = field(default_factory=list)  # the delay_s of each release
    checkpoint: Any = None

    def as_json(self, clock: FakeClock) -> dict[str, Any]:
        at = rfc3339(EPOCH + timedelta(seconds=clock()))
        expires = (
            None if self.expires_at is None else rfc3339(EPOCH + timedelta(seconds=self.expires_at))
        )
        return {
            "id": self.id,
            "session": "s",
            "priority": 0,
            "payload": self.payload,
            "key": None,
            "depth": 0,
            "parent_id": None,
            "status": self.status,
            "owner": self.owner,
            "attempts": self.attempts,
            "max_attempts": self.max_attempts,
            "available_at": at,
            "lease_expires_at": expires,
            "result": self.result,
            "error": self.error,
            "created_at": at,
            "updated_at": at,
            "checkpoint": self.checkpoint,
        }


def problem(status: int, code: str, detail: str) -> httpx.Response:
    body = {"type": f"urn:leaseq:problem:{code}", "status": status, "code": code, "detail": detail}
    return httpx.Response(status, json=body, headers={"Content-Type": "application/problem+json"})


@dataclass
class FakeService:
    """The leads of session ``s``, and what was asked of them."""

    clock: FakeClock
    leads: dict[int, FakeLead] = field(default_factory=dict)
    requests: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    sent_with: list[tuple[str, float]] = field(default_factory=list)  # (path, read timeout)
    down: set[str] = field(default_factory=set)  # paths answering 503
    lost: set[int] = field(default_factory=set)  # leads whose renewals answer lease_lost
    default_ttl_s: float = 300.0  # LEASEQ_LEASE_TTL_S: a lease or renewal that asks none
    takes_s: dict[str, float] = field(default_factory=dict)  # the clock moves while answering
    held: dict[str, asyncio.Event] = field(default_factory=dict)  # answered once set (a hang)
    refused: list[Any] = field(default_factory=list)  # checkpoints answered 422

    def push(self, *payloads: dict[str, Any], max_attempts: int = 5) -> list[int]:
        ids = []
        for payload in payloads:
            lead_id = len(self.leads) + 1
            self.leads[lead_id] = FakeLead(lead_id, payload, max_attempts)
            ids.append(lead_id)
        return ids

    def paths(self) -> list[str]:
        return [path for path, _ in self.requests]

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def timeouts(self, path: str) -> list[float]:
        """The read timeout each request to ``path`` was sent with."""
        return [timeout for sent, timeout in self.sent_with if sent == path]

    async def handle(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        body = json.loads(request.content) if request.content else {}
        self.requests.append((path, body))
        self.sent_with.append((path, request.extensions["timeout"]["read"]))
        if path in self.held:
            await self.held[path].wait()
        self.clock.advance(self.takes_s.get(path, 0.0))
        if path in self.down:
            return problem(503, "unavailable", "database unavailable: OperationalError")
        answer = {
            "/lease": self._lease,
            "/renew/batch": self._renew_batch,
            "/renew": self._renew,
            "/complete": self._complete,
            "/complete/batch": self._complete_batch,
            "/release": self._release,
        }.get(path)
        if answer is None:
            return problem(404, "not_found", f"no route {path}")
        return answer(body)

    def _valid(self, lead_id: int, token: str) -> FakeLead | None:
        lead = self.leads.get(lead_id)
        if lead is None or lead.status != "leased" or lead.token != token:
            return None
        if lead.expires_at is None or self.clock() >= lead.expires_at:
            return None
        return lead

    def _lease(self, body: dict[str, Any]) -> httpx.Response:
        return httpx.Response(200, json={"leases": self._leases(body)})

    def _leases(self, body: dict[str, Any]) -> list[dict[str, Any]]:
        leases: list[dict[str, Any]] = []
        for lead in self.leads.values():
            if len(leases) == body.get("max", 1):
                break
            if lead.status != "queued" or lead.available_at > self.clock():
                continue
            lead.status, lead.attempts, lead.owner = "leased", lead.attempts + 1, body["owner"]
            lead.token = secrets.token_urlsafe(8)
            ttl = body.get("ttl_s", self.default_ttl_s)
            lead.expires_at = self.clock() + ttl
            leases.append(
                {
                    "lead": lead.as_json(self.clock),
                    "token": lead.token,
                    "attempt": lead.attempts,
                    "owner": lead.owner,
                    "expires_at": rfc3339(EPOCH + timedelta(seconds=lead.expires_at)),
                    "ttl_s": ttl,
                }
            )
        return leases

    def _renew(self, body: dict[str, Any]) -> httpx.Response:
        answer = self._renew_batch({"items": [body]}, field="checkpoint")
        if answer.status_code != 200:
            return answer
        [result] = answer.json()["results"]
        if not result["ok"]:
            return problem(409, "lease_lost", "the lease is no longer valid")
        return httpx.Response(200, json={k: result[k] for k in ("expires_at", "ttl_s")})

    def _renew_batch(self, body: dict[str, Any], field: str = "") -> httpx.Response:
        for i, item in enumerate(body["items"]):  # every item checked before any is renewed
            if "checkpoint" in item and item["checkpoint"] in self.refused:
                name = field or f"items[{i}].checkpoint"
                return problem(422, "validation_error", f"{name}: must be at most 8 bytes")
        results = []
        for item in body["items"]:
            lead = self._valid(item["lead_id"], item["token"])
            if lead is None or lead.id in self.lost:
                results.append({"lead_id": item["lead_id"], "ok": False, "code": "lease_lost"})
                continue
            ttl = item.get("ttl_s", self.default_ttl_s)
            lead.expires_at = self.clock() + ttl
            if "checkpoint" in item:
                lead.checkpoint = item["checkpoint"]
            expires = rfc3339(EPOCH + timedelta(seconds=lead.expires_at))
            results.append({"lead_id": lead.id, "ok": True, "expires_at": expires, "ttl_s": ttl})
        return httpx.Response(200, json={"results": results})

    def _complete(self, body: dict[str, Any]) -> httpx.Response:
        lead = self._valid(body["lead_id"], body["token"])
        if lead is None:
            lead = self.leads.get(body["lead_id"])
            if lead is None or (lead.token, lead.status) != (body["token"], body["status"]):
                return problem(409, "lease_lost", "the lease is no longer valid")
        else:  # a retry is answered as the first, below
            lead.status, lead.result, lead.error = body["status"], body["result"], body["error"]
            lead.expires_at = None  # the token stays: a retry is answered as the first
        answer: dict[str, Any] = {"lead": lead.as_json(self.clock)}
        if "next" in body:
            answer["leases"] = self._leases(body["next"])
        return httpx.Response(200, json=answer)

    def _complete_batch(self, body: dict[str, Any]) -> httpx.Response:
        """Each item as ``/complete`` without ``next``, answered for itself; then ``next``."""
        results: list[dict[str, Any]] = []
        for item in body["items"]:
            if self._complete(item).status_code == 200:
                results.append({"lead_id": item["lead_id"], "ok": True})
            else:
                results.append({"lead_id": item["lead_id"], "ok": False, "code": "lease_lost"})
        answer: dict[str, Any] = {"results": results}
        if "next" in body:
            answer["leases"] = self._leases(body["next"])
        return httpx.Response(200, json=answer)

    def _release(self, body: dict[str, Any]) -> httpx.Response:
        lead = self._valid(body["lead_id"], body["token"])
        if lead is None:
            return problem(409, "lease_lost", "the lease is no longer valid")
        lead.token, lead.expires_at = None, None
        lead.released.append(body["delay_s"])
        if lead.attempts >= lead.max_attempts:  # docs/contract.md#invariant-7
            lead.status = "failed"
            lead.error = f"released on attempt {lead.attempts} of {lead.max_attempts}"
            if body.get("error"):
                lead.error += f": {body['error']}"
        else:
            lead.status = "queued"
            lead.available_at = self.clock() + body["delay_s"]
        return httpx.Response(200, json={"lead": lead.as_json(self.clock)})
