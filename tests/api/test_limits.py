"""Limits and back-pressure: payload and result sizes, an exhausted pool, the server's bounds."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from app.api import serve as serving
from app.config import DEFAULT_MAX_PAYLOAD_BYTES, MAX_HEAD_BYTES, Settings
from app.domain.queue import Queue
from app.store.pool import Connection, Database
from leaseq.errors import InvalidInput
from leaseq.model import CompleteItem, NewLead
from tests.api import shapes
from tests.support import leasing_of
from tests.support.in_process import Serve, runtime_of


def _blob(size: int) -> dict[str, Any]:
    """A payload of exactly ``size`` bytes as compact JSON."""
    return {"b": "x" * (size - len('{"b":""}'))}


# -- the domain ---------------------------------------------------------------


async def test_a_payload_over_the_limit_is_refused_and_nothing_is_written(queue: Queue) -> None:
    limit = DEFAULT_MAX_PAYLOAD_BYTES
    assert (await queue.push("s", [NewLead(_blob(limit))])).created == 1
    with pytest.raises(InvalidInput, match=r"leads\[1\]\.payload: must be at most 262144 bytes"):
        await queue.push("s", [NewLead({}), NewLead(_blob(limit + 1))])
    assert (await queue.stats("s")).queued == 1


async def test_the_payload_limit_counts_bytes_not_characters(db: Database) -> None:
    queue = Queue(db, max_payload_bytes=64)
    with pytest.raises(InvalidInput, match="payload"):
        await queue.push("s", [NewLead({"t": "é" * 20})])  # 20 characters, 120 bytes escaped
    await queue.push("s", [NewLead({"t": "é" * 5})])


async def test_a_result_over_the_limit_is_refused_and_the_lease_stays_valid(db: Database) -> None:
    queue = Queue(db, max_payload_bytes=1024)
    await queue.push("s", [NewLead({})])
    [held] = await leasing_of(queue).lease_next("s", "w")
    with pytest.raises(InvalidInput, match=r"^result: must be at most 1024 bytes"):
        await queue.complete(held.lead.id, held.token, result=_blob(1025))
    with pytest.raises(InvalidInput, match=r"items\[1\]\.result"):
        await queue.complete_many(
            [
                CompleteItem(held.lead.id, held.token, result={}),
                CompleteItem(held.lead.id, held.token, result=_blob(1025)),
            ]
        )
    done = await queue.complete(held.lead.id, held.token, result=_blob(1024))
    assert done.status == "done"


# -- the API ------------------------------------------------------------------


async def test_the_api_refuses_a_large_payload_and_result_with_422(serve: Serve) -> None:
    async with serve(max_payload_bytes=2048) as client:
        big = await client.post("/sessions/s/leads", json={"leads": [{"payload": _blob(4096)}]})
        body = shapes.problem(big, 422, "validation_error")
        assert "leads[0].payload" in body["detail"]
        pushed = await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
        assert pushed.status_code == 201
        lease = (await client.post("/lease", json={"session": "s", "owner": "w"})).json()
        [held] = lease["leases"]
        item = {"lead_id": held["lead"]["id"], "token": held["token"], "result": _blob(4096)}
        refused = await client.post("/complete", json=item)
        assert "result" in shapes.problem(refused, 422, "validation_error")["detail"]
        batch = await client.post("/complete/batch", json={"items": [item]})
        assert "items[0].result" in shapes.problem(batch, 422, "validation_error")["detail"]
        lead = (await client.get(f"/leads/{held['lead']['id']}")).json()
        assert lead["status"] == "leased"


@asynccontextmanager
async def holding(db: Database) -> AsyncIterator[None]:
    """One connection of ``db``'s pool checked out and busy until the block ends."""
    taken, release = asyncio.Event(), asyncio.Event()

    async def hold(conn: Connection) -> None:
        await conn.execute("SELECT 1")
        taken.set()
        await release.wait()

    held = asyncio.create_task(db.run(hold))
    await taken.wait()
    try:
        yield
    finally:
        release.set()
        await held


async def test_an_exhausted_pool_answers_503_within_the_pool_timeout(serve: Serve) -> None:
    async with serve(pool_size=1, pool_timeout_s=0.5) as client:
        async with holding(runtime_of(client).db):  # the only connection of the pool
            # Held until the block ends: only the pool's timeout can answer this.
            response = await client.get("/sessions/s/stats")
            shapes.problem(response, 503, "unavailable")
        assert (await client.get("/sessions/s/stats")).status_code == 200


async def test_an_exhausted_pool_does_not_hold_a_long_poll_forever(serve: Serve) -> None:
    async with serve(pool_size=1, pool_timeout_s=0.5) as client, holding(runtime_of(client).db):
        # The pool's timeout answers, long before the end of the 30 s wait.
        async with asyncio.timeout(15):
            body = {"session": "s", "owner": "w", "wait_s": 30}
            response = await client.post("/lease", json=body)
        shapes.problem(response, 503, "unavailable")


def test_the_server_bounds_connections_heads_and_idle_keep_alive() -> None:
    settings = Settings(max_waiters=10)
    assert serving.KEEP_ALIVE_S > 60  # longer than a balancer's idle timeout
    assert MAX_HEAD_BYTES <= 64 * 1024  # enforced by app.api.http_connections (431 beyond)
    assert 1 <= serving.limit_concurrency(settings) <= 10 + serving.CONNECTION_HEADROOM


async def test_every_database_call_is_bounded_by_statement_timeout(serve: Serve) -> None:
    async with serve(statement_timeout_ms=1234) as client:
        [shown] = await runtime_of(client).db.rows("SHOW statement_timeout")
        assert shown["statement_timeout"] == "1234ms"


@pytest.mark.parametrize("path", ["/healthz", "/readyz"])
async def test_probes_answer_quickly(client: httpx.AsyncClient, path: str) -> None:
    assert (await client.get(path)).status_code == 200
