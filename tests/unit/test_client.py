"""The client against ``httpx.MockTransport``: what it sends, what it retries, what it raises.

The same calls against a real ``leaseq serve`` are tests/integration/test_client.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from leaseq import AsyncClient, RetryPolicy
from leaseq._wire import error_from_problem, parse_lead
from leaseq.errors import (
    ApiError,
    Conflict,
    InvalidInput,
    LeaseLost,
    NotFound,
    PayloadTooLarge,
    Unauthorized,
    Unavailable,
)
from leaseq.limits import MAX_ITEM_BATCH, MAX_PUSH_BATCH
from leaseq.model import NewLead, RenewItem
from leaseq.timefmt import rfc3339
from tests.unit.fake_service import FakeClock, FakeLead

FAST = RetryPolicy(attempts=4, base_s=0.001, max_s=0.002)
Handler = Callable[[httpx.Request], httpx.Response]


class Recorder:
    """A MockTransport handler answering from a script, recording each request."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def bodies(self) -> list[Any]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


def client(handler: Handler, **options: Any) -> AsyncClient:
    options.setdefault("retry_policy", FAST)
    return AsyncClient("http://leaseq.test/", transport=httpx.MockTransport(handler), **options)


def problem(status: int, code: str | None, detail: str = "why") -> httpx.Response:
    body: dict[str, Any] = {"status": status, "detail": detail}
    if code is not None:
        body["code"] = code
    return httpx.Response(status, json=body)


COUNTS = {"queued": 1, "leased": 0, "done": 0, "failed": 0, "cached": 0, "pending": 1}


# -- retries --------------------------------------------------------------------


@pytest.mark.parametrize("status", [502, 503, 504])
async def test_a_gateway_or_unavailable_answer_is_retried(status: int) -> None:
    calls = Recorder(problem(status, "unavailable"), httpx.Response(200, json=COUNTS))
    async with client(calls) as api:
        counts = await api.stats("s")
    assert counts.queued == 1 and len(calls.requests) == 2


async def test_a_connection_error_is_retried_then_unavailable() -> None:
    calls = Recorder(httpx.ConnectError("refused"))
    async with client(calls) as api:
        with pytest.raises(Unavailable, match=r"GET http://leaseq\.test/sessions/s/stats: Conn"):
            await api.stats("s")
    assert len(calls.requests) == FAST.attempts


async def test_the_last_503_is_raised_with_what_the_service_said() -> None:
    calls = Recorder(problem(503, "unavailable", "database unavailable: OperationalError"))
    async with client(calls) as api:
        with pytest.raises(Unavailable) as raised:
            await api.stats("s")
    assert raised.value.detail == "database unavailable: OperationalError"
    assert raised.value.status == 503 and len(calls.requests) == FAST.attempts


@pytest.mark.parametrize(
    ("answer", "raised"),
    [
        (problem(404, "not_found"), NotFound),
        (problem(409, "lease_lost"), LeaseLost),
        (problem(409, "conflict"), Conflict),
        (problem(422, "validation_error", "session: must match"), InvalidInput),
        (problem(401, "unauthorized"), Unauthorized),
        (problem(413, "payload_too_large"), PayloadTooLarge),
        (problem(401, None), Unauthorized),
        (problem(413, None), PayloadTooLarge),
        (problem(418, "teapot"), ApiError),
        (httpx.Response(400, text="<html>no</html>"), ApiError),
    ],
)
async def test_a_4xx_is_raised_at_once_as_its_codes_class(
    answer: httpx.Response, raised: type[Exception]
) -> None:
    calls = Recorder(answer)
    async with client(calls) as api:
        with pytest.raises(raised) as error:
            await api.get(1)
    assert len(calls.requests) == 1  # never retried
    assert error.value.status == answer.status_code


def test_an_invalid_input_names_its_field_and_an_unknown_code_keeps_it() -> None:
    invalid = error_from_problem(422, {"code": "validation_error", "detail": "leads[0].key: long"})
    assert isinstance(invalid, InvalidInput) and invalid.field == "leads[0].key"
    unknown = error_from_problem(418, {"code": "teapot", "detail": "short and stout"})
    assert isinstance(unknown, ApiError) and unknown.code == "teapot"
    assert unknown.problem == {"code": "teapot", "detail": "short and stout"}


def test_the_retry_delay_grows_jittered_and_heeds_retry_after() -> None:
    policy = RetryPolicy(attempts=10, base_s=0.1, max_s=2.0)
    for retry in range(8):
        cap = min(2.0, 0.1 * 2**retry)
        assert cap / 2 <= policy.delay(retry) <= cap
    assert policy.delay(5, retry_after=0.0) == 0.0
    assert 0.5 <= policy.delay(0, retry_after=0.5) <= 0.6  # later than the backoff's 0.1
    assert 60 <= policy.delay(0, retry_after=3600) <= 72


async def test_retry_after_is_heeded() -> None:
    busy = httpx.Response(503, json={"code": "unavailable"}, headers={"Retry-After": "0"})
    calls = Recorder(busy, httpx.Response(200, json=COUNTS))
    slow = RetryPolicy(attempts=2, base_s=60, max_s=60)  # only Retry-After keeps it short
    async with client(calls, retry_policy=slow) as api:
        assert (await api.stats("s")).pending == 1


# -- what is sent -----------------------------------------------------------------


async def test_a_push_goes_in_calls_of_the_wire_limit_and_keeps_the_order() -> None:
    seen: list[int] = []

    def push(request: httpx.Request) -> httpx.Response:
        leads = json.loads(request.content)["leads"]
        ids = list(range(len(seen) + 1, len(seen) + len(leads) + 1))
        seen.extend(ids)
        return httpx.Response(201, json={"ids": ids, "created": len(ids), "duplicates": 0})

    n = MAX_PUSH_BATCH * 2 + 1
    async with client(push) as api:
        pushed = await api.push("crawl", [NewLead({"i": i}) for i in range(n)])
    assert pushed.ids == list(range(1, n + 1)) and pushed.created == n == len(seen)


async def test_renewals_go_in_batches_and_a_lease_waits_beyond_the_timeout() -> None:
    calls = Recorder(httpx.Response(200, json={"results": []}))
    async with client(calls, timeout_s=5) as api:
        await api.renew_many([RenewItem(i, "t") for i in range(MAX_ITEM_BATCH + 1)])
    assert [len(body["items"]) for body in calls.bodies()] == [MAX_ITEM_BATCH, 1]
    assert "ttl_s" not in calls.bodies()[0]["items"][0]  # the service's default

    leases = Recorder(httpx.Response(200, json={"leases": []}))
    async with client(leases, timeout_s=5, token="s3cret") as api:
        assert await api.lease("s", "w", max=3, wait_s=20) == []
    [request] = leases.requests
    assert request.extensions["timeout"]["read"] == 25  # the long poll, and then some
    assert request.headers["authorization"] == "Bearer s3cret"
    assert json.loads(request.content) == {"session": "s", "owner": "w", "max": 3, "wait_s": 20}


async def test_a_retried_push_or_lease_sends_its_idempotency_key_again() -> None:
    """One logical call, one key, however often it is sent; the next call, a new key."""
    lost = httpx.ReadTimeout("the answer never came")
    pushed = httpx.Response(201, json={"ids": [1], "created": 1, "duplicates": 0})
    calls = Recorder(lost, pushed, lost, httpx.Response(200, json={"leases": []}), pushed)
    async with client(calls) as api:
        await api.push("s", [NewLead({})])
        await api.lease("s", "w")
        await api.push("s", [NewLead({})], idempotency_key="mine")
    keys = [r.headers.get("idempotency-key") for r in calls.requests]
    assert keys[0] == keys[1] and keys[2] == keys[3] and keys[4] == "mine"
    assert len({keys[0], keys[2], keys[4]}) == 3 and all(keys)


async def test_each_call_of_a_long_push_has_a_key_of_its_own() -> None:
    seen: list[httpx.Request] = []

    def push(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        n = len(json.loads(request.content)["leads"])
        return httpx.Response(201, json={"ids": [1] * n, "created": n, "duplicates": 0})

    async with client(push) as api:
        await api.push("s", [NewLead({})] * (MAX_PUSH_BATCH + 1), idempotency_key="big")
    assert [r.headers["idempotency-key"] for r in seen] == ["big", "big.1"]


async def test_a_session_is_one_path_segment() -> None:
    calls = Recorder(httpx.Response(200, json=COUNTS))
    async with client(calls) as api:
        await api.stats("a/b c")
    assert calls.requests[0].url.raw_path == b"/sessions/a%2Fb%20c/stats"


def test_a_lead_reads_back_as_the_service_wrote_it() -> None:
    clock = FakeClock()
    shown = FakeLead(7, {"url": "https://example.com"}, status="leased", attempts=1)
    shown.expires_at = clock() + 60
    lead = parse_lead(shown.as_json(clock))
    assert (lead.id, lead.payload, lead.status, lead.attempts) == (7, shown.payload, "leased", 1)
    assert lead.lease_expires_at is not None and lead.lease_expires_at.tzinfo is not None
    assert rfc3339(lead.created_at) == shown.as_json(clock)["created_at"]


def test_rfc3339_is_utc_with_a_z() -> None:
    at = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
    assert rfc3339(at) == "2026-01-02T03:04:05.678901Z"


def test_push_bodies_stay_under_the_byte_and_count_limits() -> None:
    from leaseq._wire import PUSH_ENVELOPE, push_bodies, wire_size

    leads = [{"payload": {"n": i, "blob": "é" * (i % 900)}} for i in range(3000)]
    for limit in (4096, 100_000, 1024 * 1024):
        bodies = push_bodies(leads, limit)
        assert [lead for body in bodies for lead in body] == leads
        for body in bodies:
            assert len(body) <= 1000
            assert wire_size({"leads": body}) <= limit
    assert wire_size({"leads": []}) == PUSH_ENVELOPE
    huge = [{"payload": {"x": "y" * 5000}}]
    assert push_bodies(huge + huge, 1000) == [huge, huge]  # too big for any: alone, for a 413
