"""The blocking ``Client`` against a real ``leaseq serve``: a lead's whole life, errors, retries.

Its endpoints are ``AsyncClient``'s own (``leaseq._endpoints``); what is tested
here is that they answer the same without an event loop, and that a call
whose answer was lost is retried without a second effect.
"""

from __future__ import annotations

import uuid

import httpx
import pytest

from leaseq import (
    Client,
    CompleteItem,
    Counts,
    InvalidInput,
    LeaseLost,
    NewLead,
    NextLease,
    RetryPolicy,
)
from tests.support.serving import Service

pytestmark = pytest.mark.service

FAST_RETRY = RetryPolicy(attempts=5, base_s=0.01, max_s=0.05)


def session_name() -> str:
    return f"sync-{uuid.uuid4().hex[:8]}"


class LosingTransport(httpx.BaseTransport):
    """Real HTTP; the first answer to each path in ``lose`` is dropped after the service
    sent it, as a connection that broke on the way back would."""

    def __init__(self, lose: set[str]) -> None:
        self.inner = httpx.HTTPTransport()
        self.lose = set(lose)
        self.sent: list[httpx.Request] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        response = self.inner.handle_request(request)
        if request.url.path in self.lose:
            self.lose.discard(request.url.path)
            response.read()
            response.close()
            raise httpx.ReadError("the answer was lost on the way back", request=request)
        return response

    def close(self) -> None:
        self.inner.close()

    def keys(self, path: str) -> list[str | None]:
        return [r.headers.get("idempotency-key") for r in self.sent if r.url.path == path]


def test_a_lead_from_push_to_completion_with_the_next_leased(service: Service) -> None:
    s = session_name()
    with Client(service.url) as client:
        pushed = client.push(s, [NewLead({"n": 1}, priority=2), NewLead({"n": 2}), {"payload": {}}])
        assert (pushed.created, pushed.duplicates, len(set(pushed.ids))) == (3, 0, 3)

        [first] = client.lease(s, "w1", ttl_s=30)
        assert (first.lead.payload, first.attempt, first.owner) == ({"n": 1}, 1, "w1")
        assert first.ttl_s == 30 and first.lead.status == "leased"
        renewed = client.renew(first.lead.id, first.token, 60, checkpoint={"page": 3})
        assert renewed.ttl_s == 60 and renewed.expires_at > first.expires_at
        assert client.get(first.lead.id).checkpoint == {"page": 3}

        done, [second] = client.complete_and_lease(
            first.lead.id, first.token, result={"r": 1}, next=NextLease(s, "w1", ttl_s=30)
        )
        assert (done.status, done.result) == ("done", {"r": 1})
        assert second.lead.payload == {"n": 2} and second.lead.id != first.lead.id

        again = client.release(second.lead.id, second.token, 0)
        assert again.status == "queued"
        leases = client.lease(s, "w2", max=5, ttl_s=30)
        assert sorted(lease.lead.id for lease in leases) == sorted(pushed.ids[1:])
        answers, none_left = client.complete_many_and_lease(
            [CompleteItem(lease.lead.id, lease.token, "cached") for lease in leases],
            next=NextLease(s, "w2"),
        )
        assert [answer.ok for answer in answers] == [True, True] and none_left == []

        assert client.stats(s) == Counts(done=1, cached=2)
        assert client.stats_all().sessions[s] == Counts(done=1, cached=2)
        assert client.healthz() and client.readyz()


def test_errors_are_the_same_classes_as_the_async_clients(service: Service) -> None:
    s = session_name()
    with Client(service.url) as client:
        [lead_id] = client.push(s, [NewLead({})]).ids
        [lease] = client.lease(s, "w", ttl_s=30)
        with pytest.raises(LeaseLost) as lost:
            client.renew(lead_id, "not-the-token")
        assert (lost.value.code, lost.value.status) == ("lease_lost", 409)
        done = client.complete(lead_id, lease.token)
        assert client.complete(lead_id, lease.token) == done  # a repeat answers as the first
        with pytest.raises(LeaseLost):
            client.release(lead_id, lease.token)

        with pytest.raises(InvalidInput) as invalid:
            client.lease("not a session!", "w")
        assert (invalid.value.code, invalid.value.status) == ("validation_error", 422)
        assert invalid.value.field.endswith("session")
        with pytest.raises(InvalidInput):
            client.lease(s, "w", ttl_s=0)
        assert client.stats(s) == Counts(done=1)  # refused calls changed nothing


def test_a_push_whose_answer_was_lost_is_retried_and_pushes_once(service: Service) -> None:
    s = session_name()
    path = f"/sessions/{s}/leads"
    transport = LosingTransport({path})
    with Client(service.url, transport=transport, retry_policy=FAST_RETRY) as client:
        pushed = client.push(s, [NewLead({"n": 1}), NewLead({"n": 2})])  # no dedupe keys
        assert pushed.created == 2 and len(pushed.ids) == 2
        assert client.stats(s) == Counts(queued=2)
    [first, retry] = transport.keys(path)
    assert first is not None and retry == first  # the retry was the same request


def test_a_lease_whose_answer_was_lost_gets_the_same_leases(service: Service) -> None:
    s = session_name()
    transport = LosingTransport({"/lease"})
    with Client(service.url, transport=transport, retry_policy=FAST_RETRY) as client:
        pushed = client.push(s, [NewLead({}), NewLead({})])
        leases = client.lease(s, "w", max=2, ttl_s=30)
        assert sorted(lease.lead.id for lease in leases) == sorted(pushed.ids)
        assert [lease.attempt for lease in leases] == [1, 1]  # no attempt burned by the retry
        for lease in leases:
            client.renew(lease.lead.id, lease.token)  # the tokens handed back are valid
        assert client.stats(s) == Counts(leased=2)
    assert len(transport.keys("/lease")) == 2
