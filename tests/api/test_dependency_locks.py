"""Completions whose dependents overlap, from many connections at once (docs/design.md,
"Dependencies: one trigger per statement, dependents locked in id order"): every request
answers 200 and every child is unblocked, or failed, exactly once.

A parent's completion locks the rows of the leads waiting on it. Two statements that each
end several parents, with children in common, would deadlock if each took its children in
its own order; PostgreSQL then cancels one of them (SQLSTATE 40P01, answered 503). Several
apps share the database, half with group commit (their concurrent batches go as one
statement) and half without (each batch its own statement), so statements of every shape
overlap; a hard timeout fails the test should anything hang instead.
"""

from __future__ import annotations

import asyncio
import random
from contextlib import AsyncExitStack
from typing import Any

import httpx

from tests.support.in_process import Serve

PARENTS = 20
CHILDREN = 50
COMPLETERS = 16
APPS = 4
ROUNDS = 8
FAILED_PARENTS = 3


async def _push(client: httpx.AsyncClient, session: str, leads: list[dict[str, Any]]) -> list[int]:
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": leads})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


async def _round(clients: list[httpx.AsyncClient], session: str, rng: random.Random) -> None:
    """20 parents, 50 children on two of them each; the parents completed by 16 completers
    at once, in batches of one or two and one more parent of another batch (a retry of a lost
    answer), 3 of them as failed."""
    main = clients[0]
    parents = await _push(main, session, [{"payload": {"p": i}} for i in range(PARENTS)])
    pairs = rng.sample([(a, b) for a in range(PARENTS) for b in range(a + 1, PARENTS)], CHILDREN)
    children = await _push(
        main,
        session,
        [{"payload": {"c": [a, b]}, "after": [parents[a], parents[b]]} for a, b in pairs],
    )
    leased = await main.post("/lease", json={"session": session, "owner": "w", "max": PARENTS})
    tokens = {each["lead"]["id"]: each["token"] for each in leased.json()["leases"]}
    assert sorted(tokens) == parents
    failing = set(rng.sample(parents, FAILED_PARENTS))
    order = rng.sample(parents, PARENTS)
    batches = [[*order[k::COMPLETERS], rng.choice(parents)] for k in range(COMPLETERS)]
    go = asyncio.Event()

    async def complete(k: int, batch: list[int]) -> httpx.Response:
        items = [
            {"lead_id": p, "token": tokens[p], "status": "failed" if p in failing else "done"}
            for p in dict.fromkeys(batch)
        ]
        await go.wait()
        return await clients[k % len(clients)].post("/complete/batch", json={"items": items})

    sent = [asyncio.create_task(complete(k, batch)) for k, batch in enumerate(batches)]
    await asyncio.sleep(0)
    go.set()
    answers = await asyncio.gather(*sent)
    assert [answer.status_code for answer in answers] == [200] * COMPLETERS, [
        answer.text for answer in answers if answer.status_code != 200
    ]
    assert all(item["ok"] for answer in answers for item in answer.json()["results"])

    doomed = [
        c for c, (a, b) in zip(children, pairs, strict=True) if {parents[a], parents[b]} & failing
    ]
    ready = sorted(set(children) - set(doomed))
    stats = (await main.get(f"/sessions/{session}/stats")).json()
    assert (stats["done"], stats["failed"]) == (
        PARENTS - FAILED_PARENTS,
        FAILED_PARENTS + len(doomed),
    )
    assert (stats["queued"], stats["blocked"]) == (len(ready), 0)
    got = await main.post("/lease", json={"session": session, "owner": "w", "max": 100})
    assert sorted(each["lead"]["id"] for each in got.json()["leases"]) == ready
    for child in children:  # unblocked once (leased once), or failed once
        page = (await main.get(f"/leads/{child}/events")).json()
        ended = "failed" if child in doomed else "leased"
        assert [event["event"] for event in page["events"]] == ["pushed", ended], page


async def test_completions_whose_dependents_overlap_never_deadlock(serve: Serve) -> None:
    rng = random.Random(26)
    async with AsyncExitStack() as stack, asyncio.timeout(120):
        clients = [
            await stack.enter_async_context(serve(group_commit=n % 2 == 0, pool_size=8))
            for n in range(APPS)
        ]
        for n in range(ROUNDS):
            await _round(clients, f"r{n}", rng)
