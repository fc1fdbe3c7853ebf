"""What checking a token costs a request: ``python -m bench.tokens``.

The API in process (``httpx.ASGITransport``, so the figure is the service's own
time, not a network's), on a fresh migrated database: ``--requests`` calls of
``GET /tokens/self`` (a route that touches no table) with a bootstrap token
(compared in memory), with a scoped token (looked up once, then served from the
process's cache) and with the cache's recheck set to zero (a lookup on every
request: what a check without a cache would cost), in alternating rounds. It
reports the median time per request of each, and the lookups each spent.

Results go to ``bench/results/tokens.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path
from typing import Any

import httpx

from app.api.app import create_app
from app.config import Settings
from app.service.runtime import Runtime
from app.store import migrate
from bench import common

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
BOOT = "bench-boot-token"


async def rounds(url: str, requests: int, repeats: int) -> dict[str, Any]:
    timings: dict[str, list[float]] = {"bootstrap": [], "scoped": [], "scoped-uncached": []}
    lookups: dict[str, int] = dict.fromkeys(timings, 0)
    for recheck, kinds in ((5.0, ("bootstrap", "scoped")), (1e-9, ("scoped-uncached",))):
        settings = Settings(database_url=url, api_tokens=BOOT, token_recheck_s=recheck)
        app = create_app(settings)
        async with app.router.lifespan_context(app):
            runtime: Runtime = app.state.runtime
            scoped = (await runtime.tokens.create(f"bench-{recheck}", "reader", "*")).token
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as c:
                for _ in range(repeats):
                    for kind in kinds:
                        token = BOOT if kind == "bootstrap" else scoped
                        headers = {"Authorization": f"Bearer {token}"}
                        before = runtime.tokens.lookups
                        started = time.perf_counter()
                        for _ in range(requests):
                            answer = await c.get("/tokens/self", headers=headers)
                            assert answer.status_code == 200, answer.text
                        timings[kind].append((time.perf_counter() - started) / requests)
                        lookups[kind] += runtime.tokens.lookups - before
    return {
        kind: {
            "median_us_per_request": round(common.median(values) * 1e6, 1),
            "lookups_per_request": round(lookups[kind] / (requests * repeats), 3),
        }
        for kind, values in timings.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--server-url", default=DEFAULT_SERVER)
    parser.add_argument("--requests", type=int, default=500)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    name = common.new_name("tokens")
    url = common.create_database(args.server_url, name)
    try:
        migrate.upgrade(url)
        found = asyncio.run(rounds(url, args.requests, args.repeats))
    finally:
        common.drop_database(args.server_url, name)
    report = {"machine": common.machine(args.server_url), "requests": args.requests, **found}
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "tokens.json").write_text(json.dumps(report, indent=2) + "\n")
    print(json.dumps(found, indent=2))


if __name__ == "__main__":
    main()
