"""Every verb in every state a lead can be in (docs/contract.md#rest-api): each answer is a
2xx or a documented 4xx problem, never a 5xx, and a refusal changes nothing.

The matrix is generated: each state is built by a function of ``STATES`` (through the API,
and through SQL for the states only time would reach: a lease past its expiry or its
maximum runtime), each verb is a request of ``VERBS``, and every pair runs on a lead built
afresh in a session of its own. A refusal (a 4xx, or a batch item answered ``ok: false``)
must leave the lead and its session's counts as they were.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest

from app.api.problems import CODES
from tests.support.in_process import runtime_of

# The 4xx statuses a verb on a lead may answer with, by the contract.
REFUSALS = {404, 409, 422}


@dataclass
class Built:
    """A lead in some state: its id, its session, and the token of its latest lease (a
    made-up one when it never had one), which the holder's verbs send."""

    lead_id: int
    session: str
    token: str


async def push(client: httpx.AsyncClient, session: str, *leads: dict[str, Any]) -> list[int]:
    answer = await client.post(f"/sessions/{session}/leads", json={"leads": list(leads)})
    assert answer.status_code == 201, answer.text
    ids: list[int] = answer.json()["ids"]
    return ids


async def lease(client: httpx.AsyncClient, session: str, n: int = 1) -> list[dict[str, Any]]:
    answer = await client.post("/lease", json={"session": session, "owner": "w", "max": n})
    assert answer.status_code == 200, answer.text
    leases: list[dict[str, Any]] = answer.json()["leases"]
    return leases


NO_TOKEN = "t" * 32
KEY = "k-1"  # the key of a keyed lead, which ``get_push`` asks for in every state


async def queued(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}})
    return Built(lead, s, NO_TOKEN)


async def delayed(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}, "delay_s": 3600})
    return Built(lead, s, NO_TOKEN)


async def blocked(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [parent] = await push(client, s, {"payload": {}})
    [lead] = await push(client, s, {"payload": {}, "after": [parent]})
    return Built(lead, s, NO_TOKEN)


async def blocked_on_a_leased_parent(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [parent] = await push(client, s, {"payload": {}})
    [lead] = await push(client, s, {"payload": {}, "after": [parent]})
    await lease(client, s)
    return Built(lead, s, NO_TOKEN)


async def parked(client: httpx.AsyncClient, db: str, s: str) -> Built:
    put = await client.put(f"/sessions/{s}/settings", json={"max_leased_per_key": 1})
    assert put.status_code == 200, put.text
    ids = await push(
        client, s, {"payload": {}, "concurrency_key": "k"}, {"payload": {}, "concurrency_key": "k"}
    )
    [held] = await lease(client, s, 2)
    [lead] = [each for each in ids if each != held["lead"]["id"]]
    return Built(lead, s, NO_TOKEN)


async def paused(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}})
    answer = await client.post(f"/sessions/{s}/pause", json={})
    assert answer.status_code == 200, answer.text
    return Built(lead, s, NO_TOKEN)


async def cooling(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}})
    [held] = await lease(client, s)
    answer = await client.post(
        "/release", json={"lead_id": lead, "token": held["token"], "throttle_s": 3600}
    )
    assert answer.status_code == 200, answer.text
    return Built(lead, s, held["token"])


async def leased(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}})
    [held] = await lease(client, s)
    return Built(lead, s, held["token"])


async def leased_in_a_paused_session(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased(client, db, s)
    answer = await client.post(f"/sessions/{s}/pause", json={"for_s": 3600})
    assert answer.status_code == 200, answer.text
    return built


async def leased_with_a_dependent(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased(client, db, s)
    await push(client, s, {"payload": {}, "after": [built.lead_id]})
    return built


async def keyed(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}, "key": KEY})
    return Built(lead, s, NO_TOKEN)


async def scheduled(client: httpx.AsyncClient, db: str, s: str) -> Built:
    """The lead of a schedule's tick (pushed by ``leaseq_push`` with the tick's key)."""
    put = await client.put(
        f"/schedules/{s}", json={"session": s, "cron": "* * * * *", "lead": {"payload": {}}}
    )
    assert put.status_code in (200, 201), put.text
    later = datetime.now(UTC) + timedelta(minutes=2)
    [tick] = [t for t in await runtime_of(client).schedules.tick(now=later) if t.name == s]
    return Built(tick.lead_id, s, NO_TOKEN)


async def leased_on_its_last_attempt(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}, "max_attempts": 1})
    [held] = await lease(client, s)
    return Built(lead, s, held["token"])


async def _move(db: str, lead: int, assignment: str) -> None:
    """What only time would do to a lead, done at once on the database."""
    with psycopg.connect(db, autocommit=True) as conn:
        conn.execute(f"UPDATE leads SET {assignment} WHERE id = %s", (lead,))  # type: ignore[arg-type]


async def expired(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased(client, db, s)
    await _move(db, built.lead_id, "lease_expires_at = now() - interval '1 second'")
    return built


async def past_its_runtime(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [lead] = await push(client, s, {"payload": {}, "max_runtime_s": 60})
    [held] = await lease(client, s)
    await _move(db, lead, "runtime_ends_at = now() - interval '1 second'")
    return Built(lead, s, held["token"])


async def done(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased(client, db, s)
    answer = await client.post("/complete", json={"lead_id": built.lead_id, "token": built.token})
    assert answer.status_code == 200, answer.text
    return built


async def cached(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased(client, db, s)
    answer = await client.post(
        "/complete", json={"lead_id": built.lead_id, "token": built.token, "status": "cached"}
    )
    assert answer.status_code == 200, answer.text
    return built


async def failed(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased(client, db, s)
    answer = await client.post(
        "/complete",
        json={"lead_id": built.lead_id, "token": built.token, "status": "failed", "error": "x"},
    )
    assert answer.status_code == 200, answer.text
    return built


async def cancelled(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await queued(client, db, s)
    answer = await client.post(f"/leads/{built.lead_id}/cancel")
    assert answer.status_code == 200, answer.text
    return built


async def cancelled_while_blocked(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await blocked(client, db, s)
    answer = await client.post(f"/leads/{built.lead_id}/cancel")
    assert answer.status_code == 200, answer.text
    return built


async def failed_by_its_parent(client: httpx.AsyncClient, db: str, s: str) -> Built:
    [parent] = await push(client, s, {"payload": {}})
    [lead] = await push(client, s, {"payload": {}, "after": [parent]})
    answer = await client.post(f"/leads/{parent}/cancel")
    assert answer.status_code == 200, answer.text
    return Built(lead, s, NO_TOKEN)


async def failed_with_a_dependent(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await leased_with_a_dependent(client, db, s)
    answer = await client.post(
        "/complete",
        json={"lead_id": built.lead_id, "token": built.token, "status": "failed", "error": "x"},
    )
    assert answer.status_code == 200, answer.text
    return built


async def retried(client: httpx.AsyncClient, db: str, s: str) -> Built:
    built = await failed(client, db, s)
    answer = await client.post(f"/leads/{built.lead_id}/retry")
    assert answer.status_code == 200, answer.text
    return built


async def unknown(client: httpx.AsyncClient, db: str, s: str) -> Built:
    return Built(987_654_321, s, NO_TOKEN)


Builder = Callable[[httpx.AsyncClient, str, str], Awaitable[Built]]
STATES: dict[str, Builder] = {
    builder.__name__: builder
    for builder in (
        queued,
        delayed,
        blocked,
        blocked_on_a_leased_parent,
        parked,
        paused,
        cooling,
        keyed,
        scheduled,
        leased,
        leased_in_a_paused_session,
        leased_with_a_dependent,
        leased_on_its_last_attempt,
        expired,
        past_its_runtime,
        done,
        cached,
        failed,
        cancelled,
        cancelled_while_blocked,
        failed_by_its_parent,
        failed_with_a_dependent,
        retried,
        unknown,
    )
}


Request = tuple[str, str, dict[str, Any] | None]


def _complete(b: Built, status: str) -> dict[str, Any]:
    return {"lead_id": b.lead_id, "token": b.token, "status": status, "error": "e"}


VERBS: dict[str, Callable[[Built], Request]] = {
    "get": lambda b: ("GET", f"/leads/{b.lead_id}", None),
    "get_wait": lambda b: ("GET", f"/leads/{b.lead_id}?wait_s=0", None),
    "events": lambda b: ("GET", f"/leads/{b.lead_id}/events", None),
    "lease": lambda b: ("POST", "/lease", {"session": b.session, "owner": "v", "max": 100}),
    "renew": lambda b: ("POST", "/renew", {"lead_id": b.lead_id, "token": b.token}),
    "renew_checkpoint": lambda b: (
        "POST",
        "/renew",
        {"lead_id": b.lead_id, "token": b.token, "checkpoint": {"at": 1}},
    ),
    "renew_batch": lambda b: (
        "POST",
        "/renew/batch",
        {"items": [{"lead_id": b.lead_id, "token": b.token}]},
    ),
    "complete_done": lambda b: ("POST", "/complete", _complete(b, "done")),
    "complete_failed": lambda b: ("POST", "/complete", _complete(b, "failed")),
    "complete_cached": lambda b: ("POST", "/complete", _complete(b, "cached")),
    "complete_next": lambda b: (
        "POST",
        "/complete",
        _complete(b, "done") | {"next": {"session": b.session, "owner": "v"}},
    ),
    "complete_batch": lambda b: ("POST", "/complete/batch", {"items": [_complete(b, "done")]}),
    "release": lambda b: ("POST", "/release", {"lead_id": b.lead_id, "token": b.token}),
    "release_throttled": lambda b: (
        "POST",
        "/release",
        {"lead_id": b.lead_id, "token": b.token, "throttle_s": 60},
    ),
    "cancel": lambda b: ("POST", f"/leads/{b.lead_id}/cancel", None),
    "retry": lambda b: ("POST", f"/leads/{b.lead_id}/retry", None),
    "cancel_by_ids": lambda b: (
        "POST",
        f"/sessions/{b.session}/leads/cancel",
        {"ids": [b.lead_id]},
    ),
    "retry_by_ids": lambda b: ("POST", f"/sessions/{b.session}/leads/retry", {"ids": [b.lead_id]}),
    "list": lambda b: ("GET", f"/sessions/{b.session}/leads", None),
    "sweep": lambda b: ("POST", "/sweep", {"session": b.session}),
    "stats": lambda b: ("GET", f"/sessions/{b.session}/stats", None),
    # The doors and verbs around a lead: a dependency's push onto it, a keyed push's
    # question, the leases across sessions, waiting and keyed, and the session's verbs.
    "push_after": lambda b: (
        "POST",
        f"/sessions/{b.session}/leads",
        {"leads": [{"payload": {}, "after": [b.lead_id]}]},
    ),
    "push_after_key": lambda b: (
        "POST",
        f"/sessions/{b.session}/leads",
        {"leads": [{"payload": {}, "after": [{"key": KEY}]}]},
    ),
    "push_same_key": lambda b: (
        "POST",
        f"/sessions/{b.session}/leads",
        {"leads": [{"payload": {}, "key": KEY}]},
    ),
    "get_push": lambda b: ("GET", f"/sessions/{b.session}/pushes/{KEY}", None),
    "lease_sessions": lambda b: ("POST", "/lease", {"sessions": [b.session], "owner": "v"}),
    "lease_any": lambda b: ("POST", "/lease", {"owner": "v", "max": 100}),
    "lease_waiting": lambda b: (
        "POST",
        "/lease",
        {"session": b.session, "owner": "v", "max": 100, "wait_s": 0.05},
    ),
    "lease_keyed": lambda b: ("POST", "/lease", {"session": b.session, "owner": "v", "max": 100}),
    "renew_ttl": lambda b: ("POST", "/renew", {"lead_id": b.lead_id, "token": b.token, "ttl_s": 5}),
    "complete_next_keyed": lambda b: (
        "POST",
        "/complete",
        _complete(b, "done") | {"next": {"session": b.session, "owner": "v", "max": 100}},
    ),
    "complete_batch_next": lambda b: (
        "POST",
        "/complete/batch",
        # A batch leases whatever its items' answers (docs/contract.md): from a session of
        # its own, so a refused item leaves this one's counts as they were.
        {
            "items": [_complete(b, "failed")],
            "next": {"sessions": [f"{b.session}-next"], "owner": "v"},
        },
    ),
    "release_delayed": lambda b: (
        "POST",
        "/release",
        {"lead_id": b.lead_id, "token": b.token, "delay_s": 60, "error": "later"},
    ),
    "release_unstarted": lambda b: (
        "POST",
        "/release",
        {"lead_id": b.lead_id, "token": b.token, "unstarted": True},
    ),
    "retry_failed": lambda b: ("POST", f"/sessions/{b.session}/retry-failed", None),
    "pause": lambda b: ("POST", f"/sessions/{b.session}/pause", {"for_s": 60}),
    "resume": lambda b: ("POST", f"/sessions/{b.session}/resume", None),
    "settings": lambda b: (
        "PUT",
        f"/sessions/{b.session}/settings",
        {"max_leased_per_key": 5, "max_runtime_s": 30},
    ),
    "get_settings": lambda b: ("GET", f"/sessions/{b.session}/settings", None),
    "list_failed": lambda b: ("GET", f"/sessions/{b.session}/leads?status=failed", None),
    "report": lambda b: ("GET", f"/sessions/{b.session}/report", None),
    "throughput": lambda b: ("GET", f"/sessions/{b.session}/throughput", None),
    "scaling": lambda b: ("GET", f"/sessions/{b.session}/scaling", None),
    "sweep_all": lambda b: ("POST", "/sweep", {"all": True}),
    "stats_all": lambda b: ("GET", "/stats", None),
    "scaling_all": lambda b: ("GET", "/scaling", None),
    "dashboard_data": lambda b: ("GET", "/dashboard/data", None),
}
# The operations of the document no lead's state can change the answer of: each other one
# is among the verbs (``test_every_operation_on_leads_and_sessions_is_a_verb``).
NOT_ABOUT_LEADS = {
    ("get", "/schedules"),
    ("get", "/schedules/{name}"),
    ("put", "/schedules/{name}"),
    ("delete", "/schedules/{name}"),
    ("get", "/metrics"),
    ("get", "/dashboard"),
    ("get", "/tokens"),
    ("post", "/tokens"),
    ("delete", "/tokens/{name}"),
    ("get", "/tokens/self"),
    ("get", "/healthz"),
    ("get", "/readyz"),
}
# The verbs sent with a header of their own.
HEADERS: dict[str, dict[str, str]] = {
    "lease_keyed": {"Idempotency-Key": "lease-1"},
    "complete_next_keyed": {"Idempotency-Key": "next-1"},
}


async def _seen(client: httpx.AsyncClient, built: Built) -> tuple[Any, Any]:
    """The lead (or its 404) and its session's counts, as a refusal must leave them."""
    lead = await client.get(f"/leads/{built.lead_id}")
    stats = await client.get(f"/sessions/{built.session}/stats")
    assert lead.status_code in (200, 404) and stats.status_code == 200
    counts = stats.json()
    counts.pop("oldest_available_age_s")  # an age grows while nothing changes
    return (lead.status_code, lead.json()), counts


def _refused(response: httpx.Response) -> bool:
    """A 4xx, a batch whose only item was refused, or a bulk verb that changed nothing."""
    if response.status_code >= 400:
        return True
    body = response.json() if response.status_code == 200 else {}
    if body.get("changed") == 0:
        return True
    results = body.get("results")
    return bool(results) and not results[0]["ok"]


@pytest.mark.parametrize("state", list(STATES))
async def test_every_verb_in_this_state_answers_as_documented_and_refusals_change_nothing(
    client: httpx.AsyncClient, database_url: str, state: str
) -> None:
    wrong: list[str] = []
    for n, (verb, request) in enumerate(VERBS.items()):
        built = await STATES[state](client, database_url, f"{state}-{n}")
        method, path, body = request(built)
        before = await _seen(client, built)
        answer = await client.request(method, path, json=body, headers=HEADERS.get(verb))
        where = f"{verb} on a {state} lead: {answer.status_code} {answer.text[:300]}"
        if answer.status_code >= 500:
            wrong.append(where)
            continue
        if answer.status_code >= 400:
            problem = answer.json()
            if answer.status_code not in REFUSALS or problem.get("code") not in CODES:
                wrong.append(where)
        if _refused(answer) and await _seen(client, built) != before:
            wrong.append(f"{where}: the refusal changed the lead or its session")
    assert not wrong, "\n".join(wrong)


def test_the_matrix_covers_every_status() -> None:
    """Each status of the contract is among the states built (by name)."""
    names = " ".join(STATES)
    for status in ("queued", "leased", "done", "failed", "cached", "cancelled", "blocked"):
        assert status in names, status
    assert len(list(itertools.product(STATES, VERBS))) >= 300


async def test_every_operation_on_leads_and_sessions_is_a_verb(client: httpx.AsyncClient) -> None:
    """The verbs are the document's operations but those of ``NOT_ABOUT_LEADS``: a route
    added later is walked through every state, or named there, never forgotten."""
    built = Built(1, "s", NO_TOKEN)
    sent: set[tuple[str, str]] = set()
    for verb in VERBS.values():
        method, path, _ = verb(built)
        sent.add((method.lower(), path.split("?")[0]))
    document = client.app.openapi()  # type: ignore[attr-defined]
    missing: list[str] = []
    for template, operations in document["paths"].items():
        pattern = re.compile("^" + re.sub(r"\{[^}]+\}", "[^/]+", template) + "$")
        for method in operations:
            if (method, template) in NOT_ABOUT_LEADS:
                continue
            if not any(m == method and pattern.match(path) for m, path in sent):
                missing.append(f"{method.upper()} {template}")
    assert not missing, missing


async def test_a_blocked_lead_cancelled_waits_on_nothing_and_a_retry_runs_it(
    client: httpx.AsyncClient,
) -> None:
    [parent] = await push(client, "s", {"payload": {}})
    [child] = await push(client, "s", {"payload": {}, "after": [parent]})
    answer = await client.post(f"/leads/{child}/cancel")
    assert answer.status_code == 200, answer.text
    assert answer.json()["status"] == "failed" and answer.json()["error"] == "cancelled"
    assert answer.json()["available_at"] < "9999"
    stats = (await client.get("/sessions/s/stats")).json()
    assert (stats["queued"], stats["blocked"], stats["failed"]) == (1, 0, 1)
    [held] = await lease(client, "s")
    done = await client.post("/complete", json={"lead_id": parent, "token": held["token"]})
    assert done.status_code == 200
    assert (await client.get(f"/leads/{child}")).json()["status"] == "failed"
    assert (await client.post(f"/leads/{child}/retry")).status_code == 200
    [again] = await lease(client, "s")
    assert again["lead"]["id"] == child
