"""Bad input: InvalidInput naming the field, and nothing written (docs/contract.md#input)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from app.domain.queue import Queue
from leaseq.errors import InvalidInput
from leaseq.model import CompleteItem, Counts, Lease, NewLead, RenewItem
from tests.support import T0, at, events, fetch, leads, leasing_of

NAN = float("nan")
INF = float("inf")

Call = Callable[[Queue, Lease], Awaitable[Any]]


def _push(*new: NewLead, session: str = "s") -> Call:
    return lambda q, _: q.push(session, list(new), now=at(1))


def _lease(session: str = "s", owner: str = "w", **options: Any) -> Call:
    return lambda q, _: leasing_of(q).lease_next(session, owner, now=at(1), **options)


CASES: list[tuple[str, Call, str]] = [
    # push
    ("session with a space", _push(NewLead({}), session="bad name"), "session"),
    ("empty session", _push(NewLead({}), session=""), "session"),
    ("session starting with a dash", _push(NewLead({}), session="-s"), "session"),
    ("session of 129 characters", _push(NewLead({}), session="s" * 129), "session"),
    ("session not a string", lambda q, _: q.push(7, [NewLead({})]), "session"),  # type: ignore[arg-type]
    ("no leads", lambda q, _: q.push("s", [], now=at(1)), "leads"),
    ("1001 leads", lambda q, _: q.push("s", leads(1001), now=at(1)), "leads"),
    ("leads not a list", lambda q, _: q.push("s", NewLead({})), "leads"),  # type: ignore[arg-type]
    ("payload a list", _push(NewLead([1, 2])), "leads[0].payload"),  # type: ignore[arg-type]
    ("payload a string", _push(NewLead("x")), "leads[0].payload"),  # type: ignore[arg-type]
    ("payload null", _push(NewLead(None)), "leads[0].payload"),  # type: ignore[arg-type]
    ("NaN in the second payload", _push(NewLead({}), NewLead({"x": NAN})), "leads[1].payload"),
    ("infinity nested in payload", _push(NewLead({"a": [{"b": INF}]})), "leads[0].payload"),
    ("payload not JSON", _push(NewLead({"when": {1, 2}})), "leads[0].payload"),
    ("NUL in payload", _push(NewLead({"s": "a\x00b"})), "leads[0].payload"),
    ("priority beyond int32", _push(NewLead({}, priority=2**31)), "leads[0].priority"),
    ("priority a string", _push(NewLead({}, priority="1")), "leads[0].priority"),  # type: ignore[arg-type]
    ("priority a bool", _push(NewLead({}, priority=True)), "leads[0].priority"),
    ("empty key", _push(NewLead({}), NewLead({}, key="")), "leads[1].key"),
    ("key of 513 characters", _push(NewLead({}, key="k" * 513)), "leads[0].key"),
    ("negative depth", _push(NewLead({}, depth=-1)), "leads[0].depth"),
    ("parent id 0", _push(NewLead({}, parent_id=0)), "leads[0].parent_id"),
    ("max_attempts 0", _push(NewLead({}, max_attempts=0)), "leads[0].max_attempts"),
    ("negative delay", _push(NewLead({}, delay_s=-1)), "leads[0].delay_s"),
    ("NaN delay", _push(NewLead({}, delay_s=NAN)), "leads[0].delay_s"),
    # lease_next
    ("lease from a bad session", _lease(session="a b"), "session"),
    ("empty owner", _lease(owner=""), "owner"),
    ("max 0", _lease(max=0), "max"),
    ("max 101", _lease(max=101), "max"),
    ("max a bool", _lease(max=True), "max"),
    ("max a float", _lease(max=1.5), "max"),
    ("ttl 0", _lease(ttl_s=0), "ttl_s"),
    ("negative ttl", _lease(ttl_s=-1), "ttl_s"),
    ("ttl over an hour", _lease(ttl_s=3600.001), "ttl_s"),
    ("NaN ttl", _lease(ttl_s=NAN), "ttl_s"),
    ("infinite ttl", _lease(ttl_s=INF), "ttl_s"),
    ("ttl a string", _lease(ttl_s="10"), "ttl_s"),
    # renew
    ("renew with ttl 0", lambda q, x: q.renew(x.lead.id, x.token, 0, now=at(1)), "ttl_s"),
    ("renew with ttl 3601", lambda q, x: q.renew(x.lead.id, x.token, 3601, now=at(1)), "ttl_s"),
    ("renew with an empty token", lambda q, x: q.renew(x.lead.id, "", now=at(1)), "token"),
    ("renew lead 0", lambda q, x: q.renew(0, x.token, now=at(1)), "lead_id"),
    ("renew no items", lambda q, _: q.renew_many([], now=at(1)), "items"),
    (
        "renew 101 items",
        lambda q, x: q.renew_many([RenewItem(x.lead.id, x.token)] * 101, now=at(1)),
        "items",
    ),
    (
        "renew a batch with one bad ttl",
        lambda q, x: q.renew_many(
            [RenewItem(x.lead.id, x.token, 30), RenewItem(x.lead.id, x.token, -5)], now=at(1)
        ),
        "ttl_s",
    ),
    # complete
    (
        "complete with an unknown status",
        lambda q, x: q.complete(x.lead.id, x.token, "bogus", now=at(1)),
        "status",
    ),
    (
        "complete as queued",
        lambda q, x: q.complete(x.lead.id, x.token, "queued", now=at(1)),
        "status",
    ),
    (
        "complete with NaN in the result",
        lambda q, x: q.complete(x.lead.id, x.token, result={"x": NAN}, now=at(1)),
        "result",
    ),
    (
        "complete with an empty error",
        lambda q, x: q.complete(x.lead.id, x.token, "failed", error="", now=at(1)),
        "error",
    ),
    ("complete no items", lambda q, _: q.complete_many([], now=at(1)), "items"),
    (
        "complete a batch whose second item is bad",
        lambda q, x: q.complete_many(
            [CompleteItem(x.lead.id, x.token), CompleteItem(x.lead.id, x.token, "bogus")],  # type: ignore[arg-type]
            now=at(1),
        ),
        "status",
    ),
    (
        "complete 101 items",
        lambda q, x: q.complete_many([CompleteItem(x.lead.id, x.token)] * 101, now=at(1)),
        "items",
    ),
    # release, cancel, retry, get, stats, sweep
    (
        "release with a negative delay",
        lambda q, x: q.release(x.lead.id, x.token, delay_s=-1, now=at(1)),
        "delay_s",
    ),
    ("release lead -1", lambda q, x: q.release(-1, x.token, now=at(1)), "lead_id"),
    ("cancel lead 0", lambda q, _: q.cancel(0, now=at(1)), "lead_id"),
    ("cancel lead '1'", lambda q, _: q.cancel("1", now=at(1)), "lead_id"),  # type: ignore[arg-type]
    ("retry lead 2**63", lambda q, _: q.retry(2**63, now=at(1)), "lead_id"),
    ("get lead True", lambda q, _: q.get(True), "lead_id"),
    ("stats of a bad session", lambda q, _: q.stats("no/slash"), "session"),
    ("sweep a bad session", lambda q, _: q.sweep("", now=at(100)), "session"),
]


async def _snapshot(queue: Queue) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    return (
        await fetch(queue.db, "SELECT * FROM leads ORDER BY id"),
        await events(queue.db),
    )


@pytest.mark.parametrize(("call", "field"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
async def test_bad_input_names_the_field_and_writes_nothing(
    queue: Queue, call: Call, field: str
) -> None:
    await queue.push("s", leads(2), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=60, now=T0)
    before = await _snapshot(queue)
    stats = await queue.stats_all()

    with pytest.raises(InvalidInput) as caught:
        await call(queue, lease)

    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert caught.value.code == "validation_error"
    assert await _snapshot(queue) == before
    assert await queue.stats_all() == stats


async def test_the_limits_themselves_are_accepted(queue: Queue) -> None:
    session = "S" + "x._:-9" * 21 + "x"  # 128 characters, every allowed symbol
    assert len(session) == 128
    pushed = await queue.push(session, leads(1000), now=T0)
    assert pushed.created == 1000
    edge = NewLead(
        {}, priority=2**31 - 1, key="k" * 512, depth=2**31 - 1, parent_id=2**63 - 1, max_attempts=1
    )
    await queue.push(session, [edge, NewLead({}, priority=-(2**31))], now=T0)
    got = await leasing_of(queue).lease_next(session, "o" * 200, max=100, ttl_s=3600, now=T0)
    assert len(got) == 100
    assert got[0].expires_at == at(3600)
    renewal = await queue.renew(got[0].lead.id, got[0].token, 0.001, now=T0)
    assert renewal.expires_at == at(0.001)
    assert await queue.stats(session) == Counts(queued=902, leased=100)
