"""An operator's lists of a session's leads and the bulk verbs, over REST on a real database:
``GET /sessions/{session}/leads`` (filters, order, cursor, limit), ``POST
/sessions/{session}/leads/retry`` and ``…/cancel`` (by ids or by filter, bounded and paged,
in the ledger), each bound by the token's sessions.

Every answer is checked against the OpenAPI document (tests/api/conftest.py), so each lead
is in the shape ``GET /leads/{id}`` gives, and each refusal is a problem.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import httpx
import psycopg
import pytest

from app.domain.listing import MAX_CHANGED
from app.store.pool import libpq_url
from tests.api import shapes
from tests.support import fetch
from tests.support.in_process import Serve, runtime_of, until

S = "ops"


async def push(client: httpx.AsyncClient, session: str, n: int, **lead: Any) -> list[int]:
    leads = [{"payload": {"i": i}, **lead} for i in range(n)]
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": leads})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


async def lease(client: httpx.AsyncClient, session: str, owner: str, n: int) -> list[Any]:
    body = {"session": session, "owner": owner, "max": n, "ttl_s": 300}
    answer = await client.post("/lease", json=body)
    leases: list[Any] = answer.json()["leases"]
    assert len(leases) == n, answer.text
    return leases


async def fail(client: httpx.AsyncClient, held: dict[str, Any], error: str) -> None:
    body = {"lead_id": held["lead"]["id"], "token": held["token"], "status": "failed"}
    answer = await client.post("/complete", json={**body, "error": error})
    assert answer.status_code == 200, answer.text


async def listed(client: httpx.AsyncClient, session: str = S, **query: Any) -> dict[str, Any]:
    answer = await client.get(f"/sessions/{session}/leads", params=query)
    assert answer.status_code == 200, answer.text
    page: dict[str, Any] = answer.json()
    assert set(page) == {"leads", "next_cursor"}
    for lead in page["leads"]:
        shapes.lead(lead)
    return page


async def ids_of(client: httpx.AsyncClient, session: str = S, **query: Any) -> list[int]:
    return [lead["id"] for lead in (await listed(client, session, limit=500, **query))["leads"]]


async def every_page(client: httpx.AsyncClient, **query: Any) -> list[int]:
    seen: list[int] = []
    cursor = None
    while True:
        page = await listed(client, **query, **({"cursor": cursor} if cursor else {}))
        seen += [lead["id"] for lead in page["leads"]]
        cursor = page["next_cursor"]
        if cursor is None:
            return seen


async def test_each_filter_selects_its_leads(client: httpx.AsyncClient) -> None:
    first = await push(client, S, 3, key="alpha")  # one lead: the others are duplicates
    keyed = await push(client, S, 1, key="beta-1") + await push(client, S, 1, key="beta-2")
    plain = await push(client, S, 6)
    held = await lease(client, S, "w1", 4)  # the oldest four: alpha, beta-1, beta-2, plain[0]
    await fail(client, held[0], "Disk FULL on /var")
    await fail(client, held[1], "timeout after 100%_ of budget")
    later = await push(client, S, 2)
    everyone = [first[0], *keyed, *plain, *later]
    assert await ids_of(client) == sorted(everyone, reverse=True)
    assert await ids_of(client, order="oldest") == sorted(everyone)
    assert await ids_of(client, status="failed") == [keyed[0], first[0]]
    assert await ids_of(client, status=["leased", "failed"], order="oldest") == [
        first[0],
        *keyed,
        plain[0],
    ]
    assert await ids_of(client, status="queued") == sorted([*plain[1:], *later], reverse=True)
    assert await ids_of(client, key_prefix="beta") == keyed[::-1]
    assert await ids_of(client, key_prefix="b", status="leased") == [keyed[1]]
    assert await ids_of(client, owner="w1") == [plain[0], *keyed[::-1], first[0]]
    assert await ids_of(client, owner="w2") == []
    assert await ids_of(client, error="disk full") == [first[0]]  # any case
    assert await ids_of(client, error="100%_") == [keyed[0]]  # % and _ are plain characters
    assert await ids_of(client, error="100%x") == []
    lead = (await listed(client, limit=1))["leads"][0]
    assert lead == (await client.get(f"/leads/{lead['id']}")).json()  # GET /leads/{id}'s shape
    # created_after is inclusive, created_before exclusive: the last push's instant splits.
    split = lead["created_at"]
    assert await ids_of(client, created_after=split) == later[::-1]
    assert await ids_of(client, created_before=split, status="queued") == plain[:0:-1]
    failed_at = (await client.get(f"/leads/{first[0]}")).json()["updated_at"]
    assert first[0] in await ids_of(client, updated_after=failed_at, updated_before=split)
    assert await ids_of(client, session="other") == []


async def test_pages_never_skip_nor_repeat_a_lead_while_others_are_pushed(
    client: httpx.AsyncClient,
) -> None:
    before = await push(client, S, 300)
    pushing = True

    async def keep_pushing() -> list[int]:
        more: list[int] = []
        while pushing:
            more += await push(client, S, 3)
        return more

    pusher = asyncio.create_task(keep_pushing())
    try:
        newest = await every_page(client, limit=7)
        oldest = await every_page(client, limit=11, order="oldest")
        queued = await every_page(client, limit=13, status="queued")
    finally:
        pushing = False
        during = await pusher
    assert during  # leads were pushed while the pages were read
    for seen, descending in ((newest, True), (oldest, False), (queued, True)):
        assert not [i for i, n in Counter(seen).items() if n > 1]  # none twice
        assert set(before) <= set(seen)  # none that existed is skipped
        assert seen == sorted(seen, reverse=descending)
    # Newest first, the leads pushed after the first page was read are on no later page.
    after_first = {i for i in during if i > newest[0]}
    assert after_first and not after_first & set(newest)


@pytest.mark.parametrize(
    "query",
    [
        {"limit": 0},
        {"limit": 501},
        {"limit": "ten"},
        {"order": "random"},
        {"status": "lost"},
        {"cursor": "nonsense"},
        {"cursor": "eyJpZCI6LTEsInEiOiJ4In0"},  # {"id":-1,"q":"x"}
        {"created_after": "yesterday"},
        {"updated_before": "2026-12-01T10:00:00"},  # no offset: no instant
        {"key_prefix": "x" * 600},
    ],
)
async def test_a_bad_value_is_a_problem(client: httpx.AsyncClient, query: dict[str, Any]) -> None:
    answer = await client.get(f"/sessions/{S}/leads", params=query)
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"] == "application/problem+json"
    assert answer.json()["code"] == "validation_error"


async def test_a_cursor_serves_only_its_own_query(client: httpx.AsyncClient) -> None:
    await push(client, S, 5)
    await push(client, "elsewhere", 5)
    cursor = (await listed(client, limit=2, status="queued"))["next_cursor"]
    assert cursor
    assert len((await listed(client, limit=2, status="queued", cursor=cursor))["leads"]) == 2
    for other in ({"status": "failed"}, {"order": "oldest", "status": "queued"}):
        answer = await client.get(f"/sessions/{S}/leads", params={**other, "cursor": cursor})
        assert answer.status_code == 422, answer.text
    answer = await client.get(
        "/sessions/elsewhere/leads", params={"status": "queued", "cursor": cursor}
    )
    assert answer.status_code == 422, answer.text


async def test_cancel_and_retry_by_ids_count_what_changed_and_write_the_ledger(
    client: httpx.AsyncClient,
) -> None:
    ids = await push(client, S, 5)
    held = await lease(client, S, "w1", 2)
    done = {"lead_id": held[1]["lead"]["id"], "token": held[1]["token"], "status": "done"}
    assert (await client.post("/complete", json=done)).status_code == 200
    cancelled = await client.post(f"/sessions/{S}/leads/cancel", json={"ids": [*ids, ids[0]]})
    assert cancelled.json() == {"changed": 4, "more": False}  # the done one is left
    renew = {"lead_id": held[0]["lead"]["id"], "token": held[0]["token"]}
    lost = await client.post("/renew", json=renew)
    assert lost.status_code == 409 and lost.json()["code"] == "lease_lost"
    assert await ids_of(client, error="cancelled") == sorted(set(ids) - {ids[1]}, reverse=True)
    retried = await client.post(f"/sessions/{S}/leads/retry", json={"ids": ids[:3]})
    assert retried.json() == {"changed": 2, "more": False}  # ids[1] is done
    again = await client.post(f"/sessions/{S}/leads/retry", json={"ids": ids[:3]})
    assert again.json() == {"changed": 0, "more": False}
    db = runtime_of(client).db
    events = await fetch(db, "SELECT lead_id, event FROM lead_events WHERE event <> 'leased'")
    by_lead = {i: [e["event"] for e in events if e["lead_id"] == i] for i in ids}
    assert by_lead[ids[0]] == ["pushed", "cancelled", "retried"]
    assert by_lead[ids[1]] == ["pushed", "completed"]
    assert by_lead[ids[2]] == ["pushed", "cancelled", "retried"]
    assert by_lead[ids[4]] == ["pushed", "cancelled"]
    # A lead of another session named by id is not this session's: left alone.
    [stranger] = await push(client, "elsewhere", 1)
    other = await client.post(f"/sessions/{S}/leads/cancel", json={"ids": [stranger]})
    assert other.json() == {"changed": 0, "more": False}
    assert (await client.get(f"/leads/{stranger}")).json()["status"] == "queued"


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"ids": []},
        {"ids": [1], "filter": {}},
        {"ids": list(range(1, 1002))},
        {"ids": [0]},
        {"filter": {"status": ["lost"]}},
        {"filter": {"created_after": "soon"}},
        {"filter": {"colour": "red"}},
    ],
)
async def test_a_bad_bulk_body_is_a_problem_and_changes_nothing(
    client: httpx.AsyncClient, body: dict[str, Any]
) -> None:
    ids = await push(client, S, 2)
    answer = await client.post(f"/sessions/{S}/leads/cancel", json=body)
    assert answer.status_code == 422, answer.text
    assert answer.json()["code"] == "validation_error"
    assert await ids_of(client, status="queued") == ids[::-1]


@pytest.mark.slow  # pushes and acts on 10,000 leads: about 30 s
async def test_ten_thousand_leads_by_filter_in_bounded_calls(client: httpx.AsyncClient) -> None:
    n = MAX_CHANGED + 500
    for size in [1000] * (n // 1000) + [n % 1000]:
        await push(client, S, size)
    body = {"filter": {"status": ["queued", "done"], "key_prefix": None}}
    first = await client.post(f"/sessions/{S}/leads/cancel", json=body)
    assert first.status_code == 200, first.text
    assert first.json() == {"changed": MAX_CHANGED, "more": True}
    rest = await client.post(f"/sessions/{S}/leads/cancel", json=body)
    assert rest.json() == {"changed": 500, "more": False}
    retry = {"filter": {"error": "CANCELLED"}}
    assert (await client.post(f"/sessions/{S}/leads/retry", json=retry)).json() == {
        "changed": MAX_CHANGED,
        "more": True,
    }
    assert (await client.post(f"/sessions/{S}/leads/retry", json=retry)).json() == {
        "changed": 500,
        "more": False,
    }
    db = runtime_of(client).db
    [counted] = await fetch(
        db,
        "SELECT count(*) FILTER (WHERE event = 'cancelled') AS cancelled, "
        "count(*) FILTER (WHERE event = 'retried') AS retried FROM lead_events",
    )
    assert counted == {"cancelled": n, "retried": n}
    stats = (await client.get(f"/sessions/{S}/stats")).json()
    assert (stats["queued"], stats["failed"]) == (n, 0)


async def test_a_lead_that_moved_while_the_batch_waited_is_left_alone(
    client: httpx.AsyncClient, database_url: str
) -> None:
    """The bulk cancel waits for a row another transaction holds, then re-checks it: that
    transaction finished the lead meanwhile, so it is not cancelled nor counted."""
    ids = await push(client, S, 3)
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as holder:
        # By session too: on a Citus cluster a locking read is routed to one shard only.
        await holder.execute(
            "SELECT id FROM leads WHERE session = %s AND id = %s FOR UPDATE", [S, ids[1]]
        )
        cancel = asyncio.create_task(
            client.post(f"/sessions/{S}/leads/cancel", json={"filter": {"status": ["queued"]}})
        )
        db = runtime_of(client).db

        async def waiting() -> bool:
            """The bulk statement waits for the row lock: on one PostgreSQL its backend
            waits on a lock; on a Citus cluster the lock waits on the shard's node, and the
            door's backend shows the statement under way (were it not waiting yet, the
            lead would be done before it looks, and left alike)."""
            rows = await fetch(
                db,
                "SELECT count(*) AS n FROM pg_stat_activity "
                "WHERE query LIKE '%%cancelled AS%%' AND state = 'active' "
                "AND pid <> pg_backend_pid() "
                "AND (wait_event_type = 'Lock' "
                "OR EXISTS (SELECT FROM pg_extension WHERE extname = 'citus'))",
            )
            return bool(rows[0]["n"])

        await until(waiting, within_s=30)
        await holder.execute(
            "UPDATE leads SET status = 'done', attempts = 1 WHERE session = %s AND id = %s",
            [S, ids[1]],
        )
        await holder.commit()
        answer = await cancel
    assert answer.json() == {"changed": 2, "more": False}
    assert (await client.get(f"/leads/{ids[1]}")).json()["status"] == "done"


BOOT = "boot-token"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_a_token_lists_and_acts_on_its_own_sessions_only(serve: Serve) -> None:
    async with serve(api_tokens=BOOT) as client:
        tokens = runtime_of(client).tokens
        reader = bearer((await tokens.create("r", "reader", "a:*")).token)
        operator = bearer((await tokens.create("o", "operator", "a:*")).token)
        boot = bearer(BOOT)
        for session in ("a:1", "b:1"):
            body = {"leads": [{"payload": {}}]}
            pushed = await client.post(f"/sessions/{session}/leads", json=body, headers=boot)
            assert pushed.status_code == 201
        mine = await client.get("/sessions/a:1/leads", headers=reader)
        assert mine.status_code == 200 and len(mine.json()["leads"]) == 1
        for headers in (reader, operator):
            theirs = await client.get("/sessions/b:1/leads", headers=headers)
            assert theirs.status_code == 403 and theirs.json()["code"] == "forbidden"
        cancel = {"filter": {}}
        refused = await client.post("/sessions/a:1/leads/cancel", json=cancel, headers=reader)
        assert refused.status_code == 403
        refused = await client.post("/sessions/b:1/leads/cancel", json=cancel, headers=operator)
        assert refused.status_code == 403
        done = await client.post("/sessions/a:1/leads/cancel", json=cancel, headers=operator)
        assert done.json() == {"changed": 1, "more": False}
        everyone = await client.get(
            "/sessions/b:1/leads", headers=boot, params={"status": "queued"}
        )
        assert len(everyone.json()["leads"]) == 1  # b:1 untouched
        unauthenticated = await client.get("/sessions/a:1/leads")
        assert unauthenticated.status_code == 401
        trail = await tokens.audit_trail()
        assert trail[0]["action"] == "cancel-leads" and trail[0]["detail"] == {"changed": 1}


async def test_a_blocked_lead_is_cancelled_as_one_by_one_cancel_does(
    client: httpx.AsyncClient,
) -> None:
    [parent] = await push(client, S, 1)
    [child] = await push(client, S, 1, after=[parent])
    cancelled = await client.post(f"/sessions/{S}/leads/cancel", json={"filter": {}})
    assert cancelled.json() == {"changed": 2, "more": False}
    lead = (await client.get(f"/leads/{child}")).json()
    assert (lead["status"], lead["error"]) == ("failed", "cancelled")
