"""No lead can poison a worker: what the API cannot give back is refused at push, nothing is
stored, and a real ``leaseq worker`` then works every lead that was accepted and exits 0.

A payload nested 300 levels deep used to be stored (201); each lease of it then
committed and answered 500, so the lead was held by nobody, an attempt burned
and the worker exited 1, again after each expiry.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.serving import Service
from tests.support.worker_support import HANDLER, exited, start_worker, tail

pytestmark = pytest.mark.service


def nested(depth: int) -> dict[str, Any]:
    value: Any = {}
    for _ in range(depth - 1):
        value = {"a": value}
    return value


HOSTILE = {
    "300 levels deep": nested(300),
    "65 levels deep": nested(65),
    "a lone surrogate": {"s": "\ud800"},
    "a lone surrogate as a key": {"\udc00": 1},
    "a NUL": {"s": "a\x00b"},
}


async def test_hostile_payloads_never_reach_a_worker(service: Service, tmp_path: Path) -> None:
    session = f"h-{uuid.uuid4().hex[:10]}"
    # The handler answers {"payload": payload, …}: its result nests one level deeper.
    fine = [nested(63), {"text": "\\u0000 is six characters"}, {"emoji": "😀"}]
    async with httpx.AsyncClient(base_url=service.url) as client:
        for name, payload in HOSTILE.items():
            body = json.dumps({"leads": [{"payload": {}}, {"payload": payload}]})
            refused = await client.post(
                f"/sessions/{session}/leads",
                content=body,
                headers={"content-type": "application/json"},
            )
            assert refused.status_code == 422, (name, refused.text)
            # The domain names the field; the front door (app/api/body.py) names the
            # member, or the nesting it found before parsing.
            detail = refused.json()["detail"]
            named = ("leads[1].payload", "body.leads.1.payload", "nest deeper than")
            assert any(part in detail for part in named), (name, detail)
        stats = (await client.get(f"/sessions/{session}/stats")).json()
        assert stats["queued"] == 0  # the good lead of each refused push was not stored either
        pushed = await client.post(
            f"/sessions/{session}/leads", json={"leads": [{"payload": p} for p in fine]}
        )
        assert pushed.status_code == 201, pushed.text
        ids = pushed.json()["ids"]

        log = tmp_path / "worker.log"
        process = start_worker(service.url, session, ["--wait", "0.5", "-q", "--", *HANDLER], log)
        assert await exited(process, log, timeout_s=60) == 0, tail(log)

        for lead_id, payload in zip(ids, fine, strict=True):
            lead = (await client.get(f"/leads/{lead_id}")).json()
            assert (lead["status"], lead["attempts"]) == ("done", 1), lead
            assert lead["payload"] == payload and lead["result"]["payload"] == payload
        stats = (await client.get(f"/sessions/{session}/stats")).json()
        assert (stats["done"], stats["pending"], stats["failed"]) == (3, 0, 0)
