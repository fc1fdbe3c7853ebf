"""A push whose answers are all lost is not lost to the producer (issue: round 4).

A real ``leaseq serve`` behind a proxy that drops every answer to a push: the
client's retries (each under the push's key) run out and it raises
``Unavailable`` naming the key. The push was stored once all the same, and the
producer learns so by asking with its key (``GET /sessions/{s}/pushes/{key}``).
"""

from __future__ import annotations

import uuid

import pytest

from leaseq import AsyncClient, RetryPolicy
from leaseq.errors import Unavailable
from leaseq.model import Counts, NewLead
from tests.support.lossy_proxy import Exchange, LossyProxy
from tests.support.serving import Services

pytestmark = pytest.mark.service

FAST_RETRY = RetryPolicy(attempts=4, base_s=0.05, max_s=0.2)


def a_push(exchange: Exchange) -> bool:
    """Every answer to a push is lost; other answers (the lookup) arrive."""
    return exchange.method == "POST" and exchange.path.endswith("/leads")


async def test_a_push_whose_answers_are_all_lost_is_stored_once_and_the_producer_learns_it(
    services: Services, database_url: str
) -> None:
    session = f"s-{uuid.uuid4().hex[:10]}"
    key = f"order/{uuid.uuid4()}"  # a key with a slash travels percent-encoded
    service = services.start(database_url=database_url)
    leads = [NewLead({"n": n}) for n in range(3)]
    async with (
        LossyProxy(service.port, a_push) as proxy,
        AsyncClient(proxy.url, retry_policy=FAST_RETRY) as client,
    ):
        with pytest.raises(Unavailable) as raised:
            await client.push(session, leads, idempotency_key=key)
        assert raised.value.idempotency_key == key
        assert "pushed(" in str(raised.value)
        assert len(proxy.dropped) == FAST_RETRY.attempts  # every try's answer lost
        stored = await client.pushed(session, key)
        tried = len(proxy.dropped)
        brief = RetryPolicy(attempts=2, base_s=0.05, max_s=0.1)  # one push's own budget
        other = f"brief-{uuid.uuid4()}"
        with pytest.raises(Unavailable) as short:
            await client.push(session, [NewLead({"n": 9})], idempotency_key=other, policy=brief)
        assert len(proxy.dropped) - tried == brief.attempts
        assert short.value.idempotency_key == other
        assert (await client.pushed(session, other)) is not None
        assert await client.pushed(session, f"never-{uuid.uuid4()}") is None
        assert await client.pushed(f"other-{session}", key) is None  # a key is its session's
    assert stored is not None
    assert (stored.created, stored.duplicates, len(set(stored.ids))) == (3, 0, 3)
    async with AsyncClient(service.url) as direct:
        assert await direct.stats(session) == Counts(queued=4)  # once each, not once per try
        again = await direct.push(session, leads, idempotency_key=key)
        assert again == stored  # the same key again: the first answer, nothing new
        assert await direct.stats(session) == Counts(queued=4)
        assert [(await direct.get(i)).payload for i in stored.ids] == [{"n": n} for n in range(3)]
