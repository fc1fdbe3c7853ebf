"""Flow control's price: a lease in a session capped per key, beside a plain session.

A lease and its completion, one after the other over one pool, in four sessions of
the same database: ``plain`` (no settings row), ``paused-beside`` (a paused session's
neighbour: the statement every plain lease runs, with its pause probe), ``keyed``
(``max_leased_per_key`` 2 over 10,000 keys, five leads each: the lease under the
session's lock that counts its leased leads per key), and ``keyed-full`` (the same, but
2,000 keys are at their cap and their 6,000 other leads come first in leasing order: the
first leases park them, app.store.statements.parking). Each lead's completion is timed
too: the trigger that notes the ends of keyed leases runs on every one. Figures in
``results/flow.json``.

`python -m bench.flow --calls 1000`
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import psycopg

from app.config import Settings
from app.domain.queue import Queue
from app.store import migrate
from app.store.pool import Database, libpq_url
from bench import common
from leaseq.model import CompleteItem, SessionSettings

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
KEYS = 10_000
PER_KEY = 5
FULL_KEYS = 2_000  # in keyed-full: held at their cap through the run
CAP = 2
WARM = 50
SESSIONS = ("plain", "paused-beside", "keyed", "keyed-full")


def fill(url: str, plain: int) -> None:
    """KEYS * PER_KEY keyed leads (keys interleaved) and ``plain`` leads in each other."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO leads (session, payload, concurrency_key) "
            "SELECT 'keyed', '{}', 'k' || (i %% %s) FROM generate_series(0, %s - 1) AS i",
            (KEYS, KEYS * PER_KEY),
        )
        # keyed-full: each key's leads one after the other, so the full keys' come first
        conn.execute(
            "INSERT INTO leads (session, payload, concurrency_key) "
            "SELECT 'keyed-full', '{}', 'k' || (i / %s) FROM generate_series(0, %s - 1) AS i",
            (PER_KEY, KEYS * PER_KEY),
        )
        for session in ("plain", "paused-beside"):
            conn.execute(
                "INSERT INTO leads (session, payload) SELECT %s, '{}' FROM generate_series(1, %s)",
                (session, plain),
            )
        conn.execute("VACUUM ANALYZE leads")


async def leases(url: str, calls: int) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    """Each session's lease times and completion times, in turn."""
    db = Database.from_settings(Settings(statement_timeout_ms=60_000), url, pool_size=2)
    queue = Queue(db)
    try:
        for keyed in ("keyed", "keyed-full"):
            await queue.put_settings(keyed, SessionSettings(max_leased_per_key=CAP))
        await queue.pause("paused")
        leasing = common.leasing_of(queue)
        held = 0
        while held < FULL_KEYS * CAP:  # the first keys of keyed-full to their cap
            held += len(await leasing.lease_next("keyed-full", "b", max=100, ttl_s=3600))
        took: dict[str, list[float]] = {session: [] for session in SESSIONS}
        ended: dict[str, list[float]] = {session: [] for session in SESSIONS}
        for i in range(WARM + calls):
            for session, samples in took.items():
                started = time.perf_counter()
                [lease] = await leasing.lease_next(session, "b", max=1, ttl_s=300)
                leased = time.perf_counter()
                await queue.complete_many([CompleteItem(lease.lead.id, lease.token)])
                if i >= WARM:
                    samples.append(leased - started)
                    ended[session].append(time.perf_counter() - leased)
        return took, ended
    finally:
        await db.close()


def run(server_url: str, calls: int) -> dict[str, Any]:
    load_before = common.load_avg()
    name = common.new_name("flow")
    url = common.create_database(server_url, name)
    try:
        migrate.upgrade(url)
        fill(url, WARM + calls + 10)
        took, ended = asyncio.run(leases(url, calls))
    finally:
        common.drop_database(server_url, name)
    return {
        "keys": KEYS,
        "leads_per_key": PER_KEY,
        "max_leased_per_key": CAP,
        "keys_full_in_keyed_full": FULL_KEYS,
        "lease": {
            session: {
                "calls": len(samples),
                "p50_ms": common.percentile_ms(samples, 50),
                "p99_ms": common.percentile_ms(samples, 99),
            }
            for session, samples in took.items()
        },
        "complete": {
            session: {
                "calls": len(samples),
                "p50_ms": common.percentile_ms(samples, 50),
                "p99_ms": common.percentile_ms(samples, 99),
            }
            for session, samples in ended.items()
        },
        "machine": common.machine(server_url),
        "load_before": load_before,
        "load_after": common.load_avg(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.flow", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_SERVER)
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args(argv)
    result = run(args.database_url, args.calls)
    (RESULTS / "flow.json").write_text(json.dumps(result, indent=2) + "\n")
    for verb in ("lease", "complete"):
        for session, found in result[verb].items():
            print(f"{verb}, {session}: p50 {found['p50_ms']} ms, p99 {found['p99_ms']} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
