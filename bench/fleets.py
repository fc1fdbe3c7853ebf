"""What fleets cost a lease: ``python -m bench.fleets [--before CHECKOUT]``.

0. **A one-session lease before and after, over REST** (with ``--before``, a
   checkout of the commit before fleets, e.g. ``git archive <commit> | tar -x
   -C /tmp/before``, with ``ln -s ../migrations /tmp/before/app/_migrations``
   as its wheel has them): its ``leaseq serve`` on a database at its own schema
   (revision 0004) beside this one's, each filled alike; one client leases
   one lead at a time from each in turn (each first every other round),
   ``--calls`` times.
1. **Across sessions, over REST.** One ``leaseq serve`` (one process) on a
   database of 1,000 sessions with ``--per-session`` queued leads each, and a
   session ``one`` of its own. One client (a raw keep-alive HTTP/1.1
   connection, ``bench.service.RawPoster``) leases one lead at a time, in
   turn: from ``one`` (``{"session": "one"}``), from any session (``{}``), and
   from the 1,000 named (``{"sessions": [1,000 names]}``); ``--calls`` times
   each. The target: a lease across 1,000 sessions within 2 times a
   one-session lease, p50 and p99.
2. **Sessions without limits pay nothing, in process.** The lease statement
   as it was before fleets (``app.store.statements._claim_and_lease`` without the settings probe:
   the statement of revision 0004, byte for byte but the checkpoint column)
   against ``lease_next`` as it is, on a session without settings, and again
   with 1,000 other sessions capped and rate-limited in ``session_settings``;
   and, for reference, a capped session (``SessionLeases.lease``: its
   transaction, lock and count). Interleaved, ``--calls`` each, through
   ``app.store.pool.Database`` as the queue runs them.
3. **Where a one-session lease's time goes in PostgreSQL**: ``EXPLAIN
   (ANALYZE, SUMMARY)`` of the statement before fleets and of ``lease_next``,
   interleaved, ``--explains`` each: the planning and the execution time (the
   server plans the lease statement at each execution: psycopg's prepared
   statements get custom plans).

Results go to ``bench/results/fleets.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import psycopg

from app.config import Settings
from app.domain.lease_tokens import mint
from app.domain.queue import Queue
from app.store import migrate, statements
from app.store.pool import Database, libpq_url
from app.store.statements.fragments import DB_CLOCK
from bench import common
from bench.service import RawPoster, Service
from leaseq.model import SessionSettings

RESULTS = Path(__file__).parent / "results"
DEFAULT_SERVER = "postgresql://postgres@127.0.0.1:5432/postgres"
SESSIONS = 1000
WARM = 50
# The lease statement of revision 0004: no settings probe, no gate.
BEFORE = statements._claim_and_lease(
    True,
    clock=statements.NOW,
    before="",
    only_if="",
    limit="%(max)s",
    after="",
    answer=f"SELECT {statements.LEAD_COLUMNS}, lease_token FROM leased ORDER BY priority DESC, id",
)


def fill(url: str, per_session: int, alone: int) -> None:
    """``per_session`` leads in each of SESSIONS sessions s0..s999; ``alone`` in each of the
    sessions of part 2 and in ``one``."""
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(
            "INSERT INTO leads (session, payload) SELECT 's' || (i %% %s), '{}' "
            "FROM generate_series(0, %s - 1) AS i",
            (SESSIONS, SESSIONS * per_session),
        )
        for session in ("one", "before", "now", "neighbours", "capped", "explain"):
            conn.execute(
                "INSERT INTO leads (session, payload) SELECT %s, '{}' FROM generate_series(1, %s)",
                (session, alone),
            )
        conn.execute("VACUUM ANALYZE leads")


async def timed(call: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await call()
    return time.perf_counter() - started


def figures(samples: list[float]) -> dict[str, Any]:
    return {
        "calls": len(samples),
        "p50_ms": common.percentile_ms(samples, 50),
        "p99_ms": common.percentile_ms(samples, 99),
    }


async def across_sessions(base_url: str, calls: int) -> dict[str, list[float]]:
    """Part 1: the three kinds of lease, in turn, over one connection."""
    host, port = base_url.removeprefix("http://").split(":")
    poster = RawPoster(host, int(port))
    await poster.connect()
    named = [f"s{i}" for i in range(SESSIONS)]
    bodies = {
        "one session": {"session": "one", "owner": "b"},
        "any session (of 1,001)": {"owner": "b"},
        "1,000 sessions named": {"sessions": named, "owner": "b"},
    }
    took: dict[str, list[float]] = {name: [] for name in bodies}
    for i in range(WARM + calls):
        for name, body in bodies.items():
            started = time.perf_counter()
            answer = await poster.post("/lease", body)
            elapsed = time.perf_counter() - started
            assert len(answer["leases"]) == 1, (name, answer)
            if i >= WARM:
                took[name].append(elapsed)
    return took


async def without_limits(url: str, calls: int) -> dict[str, list[float]]:
    """Part 2: the statement before and now, with and without limited neighbours."""
    db = Database.from_settings(Settings(statement_timeout_ms=60_000), url, pool_size=2)
    queue = Queue(db)
    try:
        neighbours = SessionSettings(max_leased=100, rate_per_s=1000, burst=1000)
        for i in range(SESSIONS):
            await queue.put_settings(f"limited-{i}", neighbours)
        await queue.put_settings("capped", SessionSettings(max_leased=10 * calls))

        def statement(text: str, session: str) -> Callable[[], Awaitable[Any]]:
            async def lease() -> None:
                params = {"session": session, "owner": "b", "max": 1, "ttl_s": 300.0}
                params |= {"now": DB_CLOCK, "tokens": [mint("s")], "ledger_by_row": False}
                params["api_token"] = None
                rows = await db.rows(text, params)
                assert rows and rows[0]["id"] is not None

            return lease

        async def capped() -> None:
            assert await common.leasing_of(queue).lease_next("capped", "b", max=1, ttl_s=300)

        variants = {
            "before fleets (revision 0004's statement)": statement(BEFORE, "before"),
            "now, no settings": statement(statements.text("lease_next", ledger=True), "now"),
            "now, 1,000 limited sessions beside": statement(
                statements.text("lease_next", ledger=True), "neighbours"
            ),
            "a capped session (lock, count, lease)": capped,
        }
        took: dict[str, list[float]] = {name: [] for name in variants}
        for i in range(WARM + calls):
            for name, lease in variants.items():
                elapsed = await timed(lease)
                if i >= WARM:
                    took[name].append(elapsed)
        return took
    finally:
        await db.close()


async def one_session(urls: dict[str, str], calls: int) -> dict[str, list[float]]:
    """Part 0: a one-session lease from each service in turn."""
    posters = {}
    for version, base_url in urls.items():
        host, port = base_url.removeprefix("http://").split(":")
        posters[version] = RawPoster(host, int(port))
        await posters[version].connect()
    took: dict[str, list[float]] = {version: [] for version in urls}
    order = list(posters.items())
    for i in range(WARM + calls):
        for version, poster in order if i % 2 else order[::-1]:  # neither always goes first
            started = time.perf_counter()
            answer = await poster.post("/lease", {"session": "one", "owner": "b"})
            elapsed = time.perf_counter() - started
            assert len(answer["leases"]) == 1, (version, answer)
            if i >= WARM:
                took[version].append(elapsed)
    return took


def before_and_after(server_url: str, before: Path, calls: int) -> dict[str, Any]:
    """Part 0, on two fresh databases (one at revision 0004, one at head)."""
    names = {"before fleets": common.new_name("before"), "with fleets": common.new_name("after")}
    services: list[Service] = []
    try:
        urls = {}
        for version, name in names.items():
            url = common.create_database(server_url, name)
            migrate.upgrade(url, "0004" if version == "before fleets" else "head")
            with psycopg.connect(libpq_url(url), autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO leads (session, payload) SELECT 'one', '{}' "
                    "FROM generate_series(1, %s)",
                    (WARM + calls + 10,),
                )
                conn.execute("VACUUM ANALYZE leads")
            source = before if version == "before fleets" else None
            service = Service(
                url, workers=1, extra_args=["--sweep-interval", "3600"], source=source
            )
            services.append(service)
            urls[version] = service.base_url
        for service in services:
            service.wait_ready()
        took = asyncio.run(one_session(urls, calls))
    finally:
        for service in services:
            service.stop()
        for name in names.values():
            common.drop_database(server_url, name)
    return {version: figures(samples) for version, samples in took.items()}


def explained(url: str, explains: int) -> dict[str, dict[str, float | None]]:
    """Part 3: the median planning and execution time of each statement, by EXPLAIN."""
    compared = {"before fleets": BEFORE, "now": statements.text("lease_next", ledger=True)}
    took: dict[str, dict[str, list[float]]] = {
        name: {"planning": [], "execution": []} for name in compared
    }
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        for _ in range(explains):
            for name, statement in compared.items():
                params = {"session": "explain", "owner": "b", "max": 1, "ttl_s": 300.0}
                params |= {"now": DB_CLOCK, "tokens": [mint("s")], "ledger_by_row": False}
                params["api_token"] = None
                found = conn.execute(
                    f"EXPLAIN (ANALYZE, SUMMARY, FORMAT JSON) {statement}",  # type: ignore[arg-type]
                    params,
                    prepare=False,
                ).fetchall()
                [[plan]] = found
                took[name]["planning"].append(plan[0]["Planning Time"] / 1000)
                took[name]["execution"].append(plan[0]["Execution Time"] / 1000)
    return {
        name: {
            f"{part}_p50_ms": common.percentile_ms(samples, 50) for part, samples in parts.items()
        }
        for name, parts in took.items()
    }


def run(
    server_url: str, per_session: int, calls: int, before: Path | None, explains: int = 500
) -> dict[str, Any]:
    # Enough for the two kinds of lease across sessions that draw on them.
    per_session = max(per_session, -(-2 * (WARM + calls) // SESSIONS) + 2)
    load_before = common.load_avg()
    one_session_rest = None if before is None else before_and_after(server_url, before, calls)
    name = common.new_name("fleets")
    url = common.create_database(server_url, name)
    try:
        migrate.upgrade(url)
        started = time.perf_counter()
        fill(url, per_session, WARM + max(calls, explains) + 10)
        fill_s = time.perf_counter() - started
        service = Service(url, workers=1, extra_args=["--sweep-interval", "3600"])
        try:
            service.wait_ready()
            rest = asyncio.run(across_sessions(service.base_url, calls))
        finally:
            service.stop()
        core = asyncio.run(without_limits(url, calls))
        explain = explained(url, explains)
    finally:
        common.drop_database(server_url, name)
    across = {name: figures(samples) for name, samples in rest.items()}
    one = across["one session"]
    ratios = {
        name: {
            "p50": round(f["p50_ms"] / one["p50_ms"], 2),
            "p99": round(f["p99_ms"] / one["p99_ms"], 2),
        }
        for name, f in across.items()
        if name != "one session"
    }
    return {
        "sessions": SESSIONS,
        "leads_per_session": per_session,
        "fill_s": round(fill_s, 1),
        "rest_one_session_before_and_after": one_session_rest,
        "rest_lease": across,
        "rest_ratio_to_one_session": ratios,
        "target_ratio": 2.0,
        "statement": {name: figures(samples) for name, samples in core.items()},
        "statement_explained": explain,
        "machine": common.machine(server_url),
        "load_before": load_before,
        "load_after": common.load_avg(),
    }


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.fleets", description=__doc__)
    parser.add_argument("--database-url", default=DEFAULT_SERVER)
    parser.add_argument("--per-session", type=int, default=20)
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--explains", type=int, default=500)
    parser.add_argument("--name", default="fleets")
    parser.add_argument(
        "--before", type=Path, help="a checkout of leaseq before fleets, to serve beside this one"
    )
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args.database_url, args.per_session, args.calls, args.before, args.explains)
    (RESULTS / f"{args.name}.json").write_text(json.dumps(result, indent=2) + "\n")
    for version, found in (result["rest_one_session_before_and_after"] or {}).items():
        print(
            f"REST one-session lease, {version}: p50 {found['p50_ms']} ms, p99 {found['p99_ms']} ms"
        )
    for kind, found in result["rest_lease"].items():
        print(f"REST lease, {kind}: p50 {found['p50_ms']} ms, p99 {found['p99_ms']} ms")
    for kind, found in result["statement"].items():
        print(f"statement, {kind}: p50 {found['p50_ms']} ms, p99 {found['p99_ms']} ms")
    for kind, parts in result["statement_explained"].items():
        print(f"EXPLAIN, {kind}: " + ", ".join(f"{k} {v} ms" for k, v in parts.items()))
    within = all(
        r["p50"] <= result["target_ratio"] and r["p99"] <= result["target_ratio"]
        for r in result["rest_ratio_to_one_session"].values()
    )
    print(f"across sessions within {result['target_ratio']}x of one session: {within}")
    return 0 if within else 1


if __name__ == "__main__":
    raise SystemExit(main())
