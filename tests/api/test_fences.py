"""Fences over REST and in SQL (docs/beyond.md#fences): every lease handed out (a lease, a
completion's next, a renewal) carries a fence its service's keys verify offline, and
``leaseq_fence_current`` says, inside a writer's transaction, whether it is still current: a
stale holder's fence is refused once its lead was leased again, by the downstream table of
the docs as by the function."""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

import httpx
import psycopg
import pytest

from app.config import Settings
from app.store.pool import libpq_url
from leaseq import FenceInvalid, verify_fence
from leaseq.timefmt import parse
from tests.support.in_process import Serve
from tests.support.worker_support import eventually

KEYS = "k-new,k-old"


async def lease(client: httpx.AsyncClient, session: str = "s", **body: Any) -> dict[str, Any]:
    answer = await client.post("/lease", json={"session": session, "owner": "w", **body})
    assert answer.status_code == 200, answer.text
    [got] = answer.json()["leases"]
    return got  # type: ignore[no-any-return]


def millis(stamp: str) -> int:
    return int(parse(stamp).timestamp() * 1000)


async def test_every_lease_carries_a_fence_the_keys_verify(serve: Serve) -> None:
    async with serve(fence_keys=KEYS) as client:
        await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}] * 3})
        held = await lease(client, ttl_s=30)
        named = verify_fence(held["fence"], ["k-old", "k-new"])
        assert (named.lead_id, named.attempt) == (held["lead"]["id"], held["attempt"])
        assert abs(named.expires_at.timestamp() * 1000 - millis(held["expires_at"])) <= 1
        with pytest.raises(FenceInvalid):
            verify_fence(held["fence"], ["k-old"])  # the first key signs

        renewed = (
            await client.post(
                "/renew", json={"lead_id": held["lead"]["id"], "token": held["token"], "ttl_s": 90}
            )
        ).json()
        again = verify_fence(renewed["fence"], ["k-new"])
        assert again.attempt == named.attempt and again.expires_at > named.expires_at
        batch = await client.post(
            "/renew/batch",
            json={"items": [{"lead_id": held["lead"]["id"], "token": held["token"]}]},
        )
        [item] = batch.json()["results"]
        assert verify_fence(item["fence"], ["k-new"]).lead_id == held["lead"]["id"]

        done = await client.post(
            "/complete",
            json={
                "lead_id": held["lead"]["id"],
                "token": held["token"],
                "next": {"session": "s", "owner": "w"},
            },
        )
        [following] = done.json()["leases"]
        assert verify_fence(following["fence"], ["k-new"]).lead_id == following["lead"]["id"]


async def test_without_keys_every_process_signs_with_the_key_kept_in_the_database(
    serve: Serve, api_settings: Settings
) -> None:
    async with serve() as one, serve() as two:
        await one.post("/sessions/s/leads", json={"leads": [{"payload": {}}] * 2})
        first, second = await lease(one), await lease(two)
    with psycopg.connect(libpq_url(api_settings.database_url or "")) as conn:
        [(key,)] = conn.execute("SELECT value FROM leaseq_config WHERE name = 'fence_key'")
    assert len(key) >= 40
    assert verify_fence(first["fence"], [key]).lead_id == first["lead"]["id"]
    assert verify_fence(second["fence"], [key]).lead_id == second["lead"]["id"]


def current(conn: psycopg.Connection[Any], fence: str | None) -> bool:
    [(answer,)] = conn.execute("SELECT leaseq_fence_current(%s)", (fence,))
    return bool(answer)


async def test_a_stale_holders_fence_is_refused_after_its_lead_is_leased_again(
    serve: Serve, api_settings: Settings
) -> None:
    """The example of docs/beyond.md: a worker whose lease expired writes late; its write is
    refused while the new holder's goes through."""
    url = libpq_url(api_settings.database_url or "")
    async with serve(fence_keys=KEYS) as client:
        await client.post("/sessions/s/leads", json={"leads": [{"payload": {}}]})
        stale = await lease(client, ttl_s=1)
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(DOWNSTREAM)
            assert current(conn, stale["fence"])

            async def expired() -> bool:
                return not current(conn, stale["fence"])

            await eventually(expired)  # the database's clock passed its expiry
            await client.post("/sweep", json={"session": "s"})
            fresh = await lease(client, ttl_s=60)
            assert fresh["attempt"] == stale["attempt"] + 1
            assert current(conn, fresh["fence"])

            # The new holder writes first, then the stale one: refused both ways.
            assert write(conn, fresh["fence"], "new") == 1
            assert write(conn, stale["fence"], "late") == 0
            [(value, attempt)] = conn.execute("SELECT value, attempt FROM downstream")
            assert (value, attempt) == ("new", fresh["attempt"])
            # Offline, the writer keeps the highest attempt it saw: the stale one is below it.
            assert verify_fence(stale["fence"], KEYS.split(",")).attempt < attempt

            tampered = fresh["fence"].replace(f".{fresh['attempt']}.", f".{stale['attempt']}.")
            for bad in (tampered, "", "1.2.3", "not a fence", None, fresh["fence"] + "x"):
                assert not current(conn, bad)
            await client.post(
                "/complete", json={"lead_id": fresh["lead"]["id"], "token": fresh["token"]}
            )
            assert not current(conn, fresh["fence"])  # a finished lead has no current lease


# The downstream table of docs/beyond.md#fences: a write lands only with a current fence, and
# never below an attempt already written.
DOWNSTREAM = """
CREATE TABLE downstream (lead_id bigint PRIMARY KEY, attempt integer NOT NULL, value text)
"""
WRITE = """
INSERT INTO downstream (lead_id, attempt, value)
SELECT split_part(%(fence)s, '.', 2)::bigint, split_part(%(fence)s, '.', 3)::integer, %(value)s
WHERE leaseq_fence_current(%(fence)s)
ON CONFLICT (lead_id) DO UPDATE SET attempt = excluded.attempt, value = excluded.value
WHERE downstream.attempt <= excluded.attempt
"""


def write(conn: psycopg.Connection[Any], fence: str, value: str) -> int:
    return conn.execute(WRITE, {"fence": fence, "value": value}).rowcount


@pytest.mark.parametrize("key", ["k", "", "é-key", "x" * 64, "y" * 65, "z" * 200])
def test_the_sql_hmac_is_rfc_2104(database_url: str, key: str) -> None:
    message = "1.42.3.1796611200123"
    expected = hmac.new(key.encode(), message.encode(), hashlib.sha256).digest()
    with psycopg.connect(libpq_url(database_url)) as conn:
        [(got,)] = conn.execute(
            "SELECT leaseq_hmac_sha256(convert_to(%s, 'UTF8'), convert_to(%s, 'UTF8'))",
            (key, message),
        )
    assert bytes(got) == expected
