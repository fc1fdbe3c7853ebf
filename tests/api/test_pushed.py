"""``GET /sessions/{session}/pushes/{key}``: a keyed push asked for by its key.

The answer is the push's own (its ids, created and duplicates), only in the session it
pushed into; a key no push of the session committed with answers 404. On a cluster
(``LEASEQ_TEST_CITUS=1``) the read runs on the session's shard, where the key lives.
"""

from __future__ import annotations

import uuid
from urllib.parse import quote

import httpx

from tests.api import shapes


async def test_a_keyed_push_is_answered_by_its_key_in_its_session_only(
    client: httpx.AsyncClient,
) -> None:
    session, other = f"p-{uuid.uuid4().hex[:8]}", f"q-{uuid.uuid4().hex[:8]}"
    key = f"batch:{uuid.uuid4()}"  # any visible ASCII, percent-encoded in the path
    body = {"leads": [{"payload": {"n": 1}}, {"payload": {"n": 2}, "key": "k"}]}
    pushed = await client.post(
        f"/sessions/{session}/leads", json=body, headers={"Idempotency-Key": key}
    )
    assert pushed.status_code == 201, pushed.text
    path = f"/pushes/{quote(key, safe='')}"
    found = await client.get(f"/sessions/{session}{path}")
    assert found.status_code == 200, found.text
    assert found.json() == pushed.json()
    assert found.json()["created"] == 2
    shapes.problem(await client.get(f"/sessions/{other}{path}"), 404, "not_found")
    shapes.problem(
        await client.get(f"/sessions/{session}/pushes/never-{key[6:]}"), 404, "not_found"
    )
    unkeyed = await client.post(f"/sessions/{session}/leads", json={"leads": [{"payload": {}}]})
    assert unkeyed.status_code == 201
    again = await client.get(f"/sessions/{session}{path}")
    assert again.json() == pushed.json()  # the key's push, not a later one
