"""The "raw REST" contender: the leanest server that speaks leaseq's wire form.

A bare ASGI callable (no framework, no validation, no ledger) on uvicorn
(httptools, and uvloop when installed) over one psycopg_pool, on leaseq's
schema. Every request is one SQL statement, and PostgreSQL builds the whole
JSON answer, so the server only parses the request and writes bytes:

* ``POST /sessions/{session}/leads`` ``{"leads": [{"payload": …}, …]}``: 201
  ``{"ids": […], "created": n, "duplicates": 0}`` (payloads only);
* ``POST /lease`` ``{"session", "owner", "max", "ttl_s"}``: 200 ``{"leases": […]}``;
* ``POST /complete`` ``{"lead_id", "token", "status", "result", "error", "next"}``:
  200 ``{"lead": …}`` (with ``next``: and ``"leases": […]``), or 409 ``lease_lost``;
* ``POST /complete/batch`` ``{"items": […], "next"}``: 200 ``{"results": […]}``
  (with ``next``: and ``"leases": […]``);
* ``GET /readyz``, ``GET /healthz``: 200 once the pool is open.

Complete-and-lease is one statement: a CTE completes the lead under the guard
(status, token, expiry on the database clock), then the lease picks with
``FOR UPDATE SKIP LOCKED``. A single complete that lost its lease leases
nothing and answers 409; a batch leases whatever its items' fate. What it
leaves out, as a yardstick should: delayed (scheduled) leads, ``wait_s``,
session settings, idempotent retries, the ledger, and any check of its input.

It imports nothing from leaseq or the bench package, so the harness starts it
as a script (``bench.service.RawRestService``)::

    python bench/raw_rest.py --database-url postgresql://… --port 8001
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from psycopg_pool import AsyncConnectionPool

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# The lead object of leaseq's wire form, built by PostgreSQL from a row aliased ``a``.
_LEAD_FIELDS = [
    *("id", "session", "priority", "payload", "key", "status", "owner", "attempts"),
    *("max_attempts", "available_at", "lease_expires_at", "result", "error", "created_at"),
    *("updated_at", "depth", "parent_id", "checkpoint"),
]
LEAD_JSON = "json_build_object(" + ", ".join(f"'{f}', a.{f}" for f in _LEAD_FIELDS) + ")"
LEASE_JSON = (
    f"json_build_object('lead', {LEAD_JSON}, 'token', a.lease_token, 'attempt', a.attempts, "
    "'owner', a.owner, 'expires_at', a.lease_expires_at, 'ttl_s', %(ttl_s)s::float8)"
)


def _lease_ctes(gate: str = "") -> str:
    """``picked`` and ``leased``: up to ``max`` ready leads of the session, leased."""
    return f"""picked AS (
    SELECT id FROM leads
    WHERE session = %(session)s AND status = 'queued' AND NOT scheduled
      AND available_at <= now() {gate}
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
),
leased AS (
    UPDATE leads AS l
    SET status = 'leased', owner = %(owner)s, lease_token = %(token)s || l.id,
        attempts = l.attempts + 1, updated_at = now(),
        lease_expires_at = now() + make_interval(secs => %(ttl_s)s::float8)
    FROM picked WHERE l.id = picked.id
    RETURNING l.*
)"""


LEASES = (
    f"(SELECT coalesce(json_agg({LEASE_JSON} ORDER BY a.priority DESC, a.id), '[]'::json) "
    "FROM leased AS a)"
)

PUSH = """
WITH pushed AS (
    INSERT INTO leads (session, payload)
    SELECT %(session)s, p::jsonb FROM unnest(%(payloads)s::text[]) WITH ORDINALITY AS r(p, ord)
    ORDER BY ord
    RETURNING id
)
SELECT json_build_object('ids', coalesce(json_agg(id ORDER BY id), '[]'::json),
                         'created', count(*), 'duplicates', 0)::text
FROM pushed
"""

LEASE = f"WITH {_lease_ctes()}\nSELECT json_build_object('leases', {LEASES})::text"

_COMPLETED = """completed AS (
    UPDATE leads AS l
    SET status = %(status)s, result = CAST(%(result)s AS jsonb), error = %(error)s,
        lease_expires_at = NULL, updated_at = now()
    WHERE l.id = %(lead_id)s AND l.status = 'leased' AND l.lease_token = %(lead_token)s
      AND l.lease_expires_at > now()
    RETURNING l.*
)"""

COMPLETE = f"""WITH {_COMPLETED}
SELECT json_build_object('lead', {LEAD_JSON})::text FROM completed AS a"""

# Leases only once the completion took (a lost lease answers 409 and leases nothing).
COMPLETE_NEXT = f"""WITH {_COMPLETED},
{_lease_ctes(gate="AND EXISTS (SELECT FROM completed)")}
SELECT json_build_object('lead', {LEAD_JSON}, 'leases', {LEASES})::text FROM completed AS a"""

_BATCH = """req AS (
    SELECT * FROM unnest(
        %(ids)s::bigint[], %(tokens)s::text[], %(statuses)s::text[], %(results)s::text[],
        %(errors)s::text[]
    ) WITH ORDINALITY AS r(lead_id, token, status, result, error, ord)
),
completed AS (
    UPDATE leads AS l
    SET status = req.status, result = CAST(req.result AS jsonb), error = req.error,
        lease_expires_at = NULL, updated_at = now()
    FROM req
    WHERE l.id = req.lead_id AND l.status = 'leased' AND l.lease_token = req.token
      AND l.lease_expires_at > now()
    RETURNING l.id
)"""

_RESULTS = """(SELECT coalesce(json_agg(CASE WHEN c.id IS NULL
        THEN json_build_object('lead_id', req.lead_id, 'ok', false, 'code', 'lease_lost')
        ELSE json_build_object('lead_id', req.lead_id, 'ok', true) END ORDER BY req.ord),
    '[]'::json)
 FROM req LEFT JOIN completed AS c ON c.id = req.lead_id)"""

COMPLETE_BATCH = f"WITH {_BATCH}\nSELECT json_build_object('results', {_RESULTS})::text"

COMPLETE_BATCH_NEXT = f"""WITH {_BATCH},
{_lease_ctes()}
SELECT json_build_object('results', {_RESULTS}, 'leases', {LEASES})::text"""

LEASE_LOST = json.dumps(
    {
        "type": "about:blank",
        "title": "The lease is no longer valid",
        "status": 409,
        "code": "lease_lost",
    }
).encode()

JSON = [(b"content-type", b"application/json")]
PROBLEM = [(b"content-type", b"application/problem+json")]


def _token() -> str:
    """A fresh token prefix; each lead's token is the prefix and its id."""
    return secrets.token_urlsafe(24) + "."


def _dump(value: Any) -> str | None:
    return None if value is None else json.dumps(value)


def _lease_params(want: dict[str, Any]) -> dict[str, Any]:
    return {
        "session": want["session"],
        "owner": want["owner"],
        "max": want.get("max", 1),
        "ttl_s": want.get("ttl_s", 300),
        "token": _token(),
    }


class RawRest:
    """The ASGI callable: one pool, one statement per request."""

    def __init__(self, url: str, pool_size: int) -> None:
        self.pool = AsyncConnectionPool(
            url,
            min_size=pool_size,
            max_size=pool_size,
            open=False,
            # Timestamps in UTC, so PostgreSQL's JSON carries them as RFC 3339 with +00:00.
            kwargs={"autocommit": True, "options": "-c TimeZone=UTC"},
        )

    async def one(self, sql: str, params: dict[str, Any]) -> str | None:
        async with self.pool.connection() as conn:
            cur = await conn.execute(sql, params, prepare=True)
            row = await cur.fetchone()
        return None if row is None else str(row[0])

    async def route(self, path: str, body: dict[str, Any]) -> tuple[int, str | None]:
        if path == "/lease":
            return 200, await self.one(LEASE, _lease_params(body))
        if path == "/complete":
            params = {
                "lead_id": body["lead_id"],
                "lead_token": body["token"],
                "status": body.get("status", "done"),
                "result": _dump(body.get("result")),
                "error": body.get("error"),
            }
            if (want := body.get("next")) is not None:
                answer = await self.one(COMPLETE_NEXT, params | _lease_params(want))
            else:
                answer = await self.one(COMPLETE, params)
            return (200, answer) if answer is not None else (409, None)
        if path == "/complete/batch":
            items = body["items"]
            params = {
                "ids": [i["lead_id"] for i in items],
                "tokens": [i["token"] for i in items],
                "statuses": [i.get("status", "done") for i in items],
                "results": [_dump(i.get("result")) for i in items],
                "errors": [i.get("error") for i in items],
            }
            if (want := body.get("next")) is not None:
                return 200, await self.one(COMPLETE_BATCH_NEXT, params | _lease_params(want))
            return 200, await self.one(COMPLETE_BATCH, params)
        if path.startswith("/sessions/") and path.endswith("/leads"):
            session = path[len("/sessions/") : -len("/leads")]
            payloads = [json.dumps(lead.get("payload", {})) for lead in body["leads"]]
            return 201, await self.one(PUSH, {"session": session, "payloads": payloads})
        return 404, None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] == "GET":
            ok = scope["path"] in ("/readyz", "/healthz")
            status, answer = (200, "{}") if ok else (404, None)
        else:
            chunks = []
            more = True
            while more:
                message = await receive()
                chunks.append(message.get("body", b""))
                more = message.get("more_body", False)
            status, answer = await self.route(scope["path"], json.loads(b"".join(chunks)))
        data = answer.encode() if answer is not None else LEASE_LOST if status == 409 else b""
        headers = JSON if status < 300 else PROBLEM
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [*headers, (b"content-length", str(len(data)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": data})

    async def lifespan(self, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await self.pool.open(wait=True)
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await self.pool.close()
                await send({"type": "lifespan.shutdown.complete"})
                return


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--database-url", required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--pool-size", type=int, default=10, help="as leaseq serve's default")
    args = parser.parse_args(argv)
    uvicorn.run(
        RawRest(args.database_url, args.pool_size),
        host=args.host,
        port=args.port,
        http="httptools",
        loop="uvloop" if importlib.util.find_spec("uvloop") else "asyncio",
        lifespan="on",
        log_level="warning",
        access_log=False,
    )


if __name__ == "__main__":
    main()
