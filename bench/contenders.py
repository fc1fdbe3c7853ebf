"""The contenders of ``python -m bench``: each pushes N leads, drains them with W workers.

* ``ceiling``: psycopg alone on leaseq's own schema: one ``WITH … FOR UPDATE
  SKIP LOCKED … UPDATE … RETURNING`` per lease and one guarded ``UPDATE`` per
  complete (``unnest`` for a batch), prepared statements, no ledger: the most a
  Python client gets from this database.
* ``core``: ``app.domain.queue.Queue`` in process: ``lease_next`` + ``complete`` (batch 1)
  or ``complete_many``, ledger on or off.
* ``rest``: ``leaseq serve --workers K`` and HTTP workers with a minimal
  keep-alive HTTP/1.1 client: ``POST /lease`` + ``/complete`` or ``/complete/batch``
  (two requests per lead, or per batch); with ``next``, one ``POST /lease`` and
  then ``/complete`` or ``/complete/batch`` carrying ``next`` (one request per
  lead, or per batch). A service that answers without ``leases`` fails the run.
  With ``--before CHECKOUT``, each also runs served from that checkout (an
  older leaseq) on a database migrated by that checkout's own migrations:
  ``rest-1proc-b1 (before)``, and so on.
* ``rawrest``: the same HTTP workers against bench/raw_rest.py, a bare ASGI
  callable on uvicorn with one statement per request: the ceiling of a REST
  hop in Python on this machine.
* ``pgqueuer``: one ``QueueManager`` per worker (a psycopg connection each), a
  no-op entrypoint, ``run(batch_size=B, mode=drain)``; pushed with ``Queries.enqueue``.
* ``procrastinate``: one worker per process with ``concurrency`` = its share of W,
  a no-op task, ``run_worker_async(wait=False)``; pushed with ``defer_async`` and
  ``batch_defer_async``.
* ``sdk``, ``cli-true`` and ``xargs-true``: what users run (bench/users.py): the
  SDK's ``Worker`` with its defaults, ``leaseq worker -- true``, and the machine's
  spawn ceiling beside it; ``ts-worker`` and ``go``: the TypeScript and Go clients'
  ``Worker`` with their defaults.

Every run checks its outcome: each lead (job) ran exactly once and the database
agrees; a run that fails its checks raises, and no figure is reported.

A peer's drain ends when its last job ran, not when its worker loop returns:
pgqueuer's drain mode takes about 4 s more to shut down here, a fixed cost that
would swamp a small N. That leaves out the peers' last status write, in their
favour.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import timedelta
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import psycopg

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database, libpq_url
from bench import common, users
from bench.common import LEASE_TTL_S, SESSION, WorkerReport
from bench.service import (
    RawPoster,
    RawRestService,
    Service,
    checkout_head,
    checkout_openapi,
    migrate_checkout,
)
from leaseq.model import CompleteItem, NewLead

PUSH_BATCH = 1000


@dataclass(frozen=True)
class Contender:
    family: str  # ceiling, core, rest, rawrest, pgqueuer, procrastinate
    batch: int
    ledger: bool | None = None  # core, and the REST contenders that name it
    servers: int | None = None  # rest only: uvicorn processes
    next: bool = False  # rest and rawrest: complete-and-lease in one request
    keyed: bool = False  # rest with next: each request with an Idempotency-Key, as the SDK
    only_workers: tuple[int, ...] | None = None  # run at these W only (None: every W)
    source: Path | None = None  # rest only: an older checkout of leaseq, served instead of this

    @property
    def name(self) -> str:
        if self.family in USER_RUN:
            return USER_RUN[self.family][0]
        parts = [self.family]
        if self.servers is not None:
            parts.append(f"{self.servers}proc")
        if self.next:
            parts.append("next")
        if self.keyed:
            parts.append("keyed")
        parts.append(f"b{self.batch}")
        if self.ledger is not None:
            parts.append("ledger" if self.ledger else "noledger")
        return "-".join(parts) + (BEFORE if self.source is not None else "")

    @property
    def label(self) -> str:
        if self.family in USER_RUN:
            return USER_RUN[self.family][1]
        extra = ""
        if self.servers is not None:
            extra = f", {self.servers} uvicorn process{'es' if self.servers > 1 else ''}"
        if self.next:
            extra += ", next"
        if self.keyed:
            extra += ", keyed"
        if self.ledger is not None:
            extra += ", ledger on" if self.ledger else ", ledger off"
        if self.source is not None:
            extra += BEFORE
        return f"{'raw REST' if self.family == 'rawrest' else self.family}{extra}"

    @property
    def schema(self) -> str:
        if self.source is not None:
            return BEFORE_SCHEMA
        return {"pgqueuer": "pgqueuer", "procrastinate": "procrastinate"}.get(self.family, "leaseq")


# What users run (bench/users.py), by family: the contender's name and its label.
USER_RUN = {
    "sdk": ("sdk", "leaseq.Worker (the SDK), defaults"),
    "go": ("go", "leaseq's Go Worker, defaults"),
    "cli": ("cli-true", "leaseq worker -- true"),
    "xargs": ("xargs-true", "xargs -n 1 true (no queue)"),
    "ts": ("ts-worker", "the TypeScript Worker (clients/typescript), defaults"),
}
BEFORE = " (before)"  # the mark of a contender served from the older checkout
BEFORE_SCHEMA = "leaseq_before"  # leaseq's schema as the older checkout's migrations make it


def with_before(chosen: list[Contender], source: Path) -> list[Contender]:
    """Each leaseq REST contender followed by the same served from ``source``, so that the
    two run one after the other in every round and share its load."""
    return [
        x for c in chosen for x in ([c, replace(c, source=source)] if c.family == "rest" else [c])
    ]


def all_contenders() -> list[Contender]:
    found = [Contender("ceiling", b) for b in (1, 10, 100)]
    found += [Contender("core", b, ledger=ledger) for ledger in (True, False) for b in (1, 100)]
    found += [
        Contender("rest", b, servers=k, next=n)
        for k in (1, 2)
        for n in (False, True)
        for b in (1, 10)
    ]
    # What the ledger costs a worker's request: the same with the service's ledger off.
    found += [Contender("rest", b, servers=1, next=True, ledger=False) for b in (1, 10)]
    # What the SDK and `leaseq worker` send: every lease keyed (docs/worker.md, "Lost answers").
    found += [Contender("rest", b, servers=1, next=True, keyed=True) for b in (1, 10)]
    found += [Contender("rawrest", b, next=n) for n in (False, True) for b in (1, 10)]
    found += [Contender("pgqueuer", b) for b in (1, 100)]
    found += [Contender("procrastinate", 1)]
    found += [Contender(family, 1) for family in USER_RUN]
    return found


@dataclass
class RunResult:
    contender: str
    workers: int
    repeat: int
    leads: int
    drain_per_s: float
    push_bulk_per_s: float
    push_single_per_s: float
    lease_p50_ms: float | None
    lease_p99_ms: float | None
    complete_p50_ms: float | None
    complete_p99_ms: float | None
    lease_calls: int
    client_cpu_ms_per_lead: float
    drain_s: float
    load_before: float
    load_after: float
    checks: list[str] = field(default_factory=list)
    service_cpu_ms_per_lead: float | None = None  # rest and rawrest: the server's processes
    database_cpu_ms_per_lead: float | None = None  # PostgreSQL's processes (a local server)
    exit_s: float | None = None  # cli: from its start to its exit (its drain is the ledger's)


def singles_of(n: int) -> int:
    """How many of the N leads are pushed one at a time (the rest in batches of 1,000)."""
    return max(1, min(1000, n // 10))


def twins(chosen: list[Contender]) -> list[list[Contender]]:
    """``chosen`` in groups: each contender alone, or followed by its twin served from an
    older checkout (as ``with_before`` places it)."""
    groups: list[list[Contender]] = []
    for c in chosen:
        if c.source is not None and groups and groups[-1] == [replace(c, source=None)]:
            groups[-1].append(c)
        else:
            groups.append([c])
    return groups


# -- schemas --------------------------------------------------------------------


def install(kind: str, url: str, source: Path | None = None) -> None:
    """Make ``kind``'s schema in ``url``: for ``BEFORE_SCHEMA``, with the migrations of the
    checkout ``source``, checked to reach that checkout's newest revision."""
    if kind == "leaseq":
        from app.store import migrate

        migrate.upgrade(url)
    elif kind == BEFORE_SCHEMA and source is not None:
        migrate_checkout(source, url)
        with psycopg.connect(libpq_url(url)) as conn:
            row = conn.execute("SELECT version_num FROM alembic_version").fetchone()
        if row is None or row[0] != checkout_head(source):
            raise RuntimeError(f"{url}: at revision {row}, not {source}'s newest")
    elif kind == "pgqueuer":
        asyncio.run(_pgqueuer_install(url))
    elif kind == "procrastinate":
        asyncio.run(_procrastinate_install(url))
    else:
        raise ValueError(kind)


# -- ceiling: psycopg alone -------------------------------------------------------

CEILING_LEASE = f"""
WITH picked AS (
    SELECT id FROM leads
    WHERE session = %(session)s AND status = 'queued' AND available_at <= now()
    ORDER BY priority DESC, id
    LIMIT %(max)s
    FOR UPDATE SKIP LOCKED
)
UPDATE leads AS l
SET status = 'leased', owner = %(owner)s, lease_token = %(token)s || l.id,
    attempts = l.attempts + 1, lease_expires_at = now() + interval '{int(LEASE_TTL_S)} seconds',
    updated_at = now()
FROM picked WHERE l.id = picked.id
RETURNING l.id, l.lease_token, l.payload
"""

CEILING_COMPLETE = """
UPDATE leads
SET status = 'done', lease_token = NULL, lease_expires_at = NULL, updated_at = now()
WHERE id = %(id)s AND status = 'leased' AND lease_token = %(token)s AND lease_expires_at > now()
"""

CEILING_COMPLETE_MANY = """
UPDATE leads AS l
SET status = 'done', lease_token = NULL, lease_expires_at = NULL, updated_at = now()
FROM unnest(%(ids)s::bigint[], %(tokens)s::text[]) AS r(id, token)
WHERE l.id = r.id AND l.status = 'leased' AND l.lease_token = r.token
  AND l.lease_expires_at > now()
"""

CEILING_PUSH = """
INSERT INTO leads (session, payload)
SELECT %(session)s, p::jsonb FROM unnest(%(payloads)s::text[]) AS p
RETURNING id
"""


async def _ceiling_loop(conn: psycopg.AsyncConnection[Any], owner: str, batch: int) -> WorkerReport:
    report = WorkerReport()
    params = {"session": SESSION, "owner": owner, "max": batch, "token": ""}
    while True:
        params["token"] = secrets.token_urlsafe(24) + "."
        started = time.perf_counter()
        cur = await conn.execute(CEILING_LEASE, params, prepare=True)
        rows = await cur.fetchall()
        leased = time.perf_counter()
        if not rows:
            report.finished_at = time.monotonic()
            return report
        report.lease_s.append(leased - started)
        if batch == 1:
            [(lead_id, token, _payload)] = rows
            cur = await conn.execute(
                CEILING_COMPLETE, {"id": lead_id, "token": token}, prepare=True
            )
        else:
            cur = await conn.execute(
                CEILING_COMPLETE_MANY,
                {"ids": [r[0] for r in rows], "tokens": [r[1] for r in rows]},
                prepare=True,
            )
        if cur.rowcount != len(rows):
            raise RuntimeError(f"{owner}: completed {cur.rowcount} of {len(rows)} leases")
        report.complete_s.append(time.perf_counter() - leased)
        report.done_ids.extend(r[0] for r in rows)


async def ceiling_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    conns = [
        await psycopg.AsyncConnection.connect(libpq_url(spec["url"]), autocommit=True)
        for _ in range(tasks)
    ]
    try:
        ready()
        reports = await asyncio.gather(
            *(_ceiling_loop(c, f"{name}t{i}", spec["batch"]) for i, c in enumerate(conns))
        )
    finally:
        for conn in conns:
            await conn.close()
    return merge(reports)


async def ceiling_push(url: str, n: int) -> tuple[list[int], float, float]:
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:

        async def push(payloads: list[str]) -> list[int]:
            cur = await conn.execute(CEILING_PUSH, {"session": SESSION, "payloads": payloads})
            return [row[0] for row in await cur.fetchall()]

        return await push_in_two_ways(
            n, lambda lo, hi: push([f'{{"n": {i}}}' for i in range(lo, hi)])
        )


# -- core: app.domain.queue.Queue --------------------------------------------------------


def database(url: str, pool_size: int) -> Database:
    return Database.from_settings(Settings(statement_timeout_ms=60_000), url, pool_size=pool_size)


async def _core_loop(queue: Queue, owner: str, batch: int) -> WorkerReport:
    report = WorkerReport()
    while True:
        started = time.perf_counter()
        leases = await common.leasing_of(queue).lease_next(
            SESSION, owner, max=batch, ttl_s=LEASE_TTL_S
        )
        leased = time.perf_counter()
        if not leases:
            report.finished_at = time.monotonic()
            return report
        report.lease_s.append(leased - started)
        if batch == 1:
            lead = await queue.complete(leases[0].lead.id, leases[0].token)
            report.done_ids.append(lead.id)
        else:
            answers = await queue.complete_many(
                [CompleteItem(lease.lead.id, lease.token) for lease in leases]
            )
            if lost := [a.lead_id for a in answers if not a.ok]:
                raise RuntimeError(f"{owner}: complete_many refused leads {lost[:5]}")
            report.done_ids.extend(a.lead_id for a in answers)
        report.complete_s.append(time.perf_counter() - leased)


async def core_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    db = database(spec["url"], tasks)
    try:
        queue = Queue(db, ledger=spec["ledger"])
        await asyncio.gather(*(queue.db_now() for _ in range(tasks)))  # open the connections
        ready()
        reports = await asyncio.gather(
            *(_core_loop(queue, f"{name}t{i}", spec["batch"]) for i in range(tasks))
        )
    finally:
        await db.close()
    return merge(reports)


async def core_push(url: str, n: int, ledger: bool) -> tuple[list[int], float, float]:
    db = database(url, 1)
    try:
        queue = Queue(db, ledger=ledger)

        async def push(lo: int, hi: int) -> list[int]:
            result = await queue.push(SESSION, [NewLead(payload={"n": i}) for i in range(lo, hi)])
            return result.ids

        return await push_in_two_ways(n, push)
    finally:
        await db.close()


async def push_in_two_ways(
    n: int, push: Callable[[int, int], Any]
) -> tuple[list[int], float, float]:
    """Push the first leads one at a time, the rest in batches; ids, and both rates per second."""
    singles = singles_of(n)
    ids: list[int] = []
    started = time.perf_counter()
    for i in range(singles):
        ids.extend(await push(i, i + 1))
    single_rate = common.timed(started, singles)
    started = time.perf_counter()
    for lo in range(singles, n, PUSH_BATCH):
        ids.extend(await push(lo, min(n, lo + PUSH_BATCH)))
    bulk_rate = common.timed(started, n - singles) if n > singles else 0.0
    return ids, bulk_rate, single_rate


async def leaseq_checks(url: str, n: int, ids: Sequence[int], done: Sequence[int]) -> list[str]:
    """Every way this run was not 'each pushed lead completed exactly once'."""
    problems = []
    if len(ids) != n or len(set(ids)) != n:
        problems.append(f"push returned {len(ids)} ids ({len(set(ids))} distinct), expected {n}")
    if dupes := [lead for lead, k in Counter(done).items() if k > 1]:
        problems.append(f"{len(dupes)} leads completed twice by workers, e.g. {dupes[:5]}")
    if set(done) != set(ids):
        problems.append(f"workers completed {len(set(done))} distinct leads of {n}")
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'done' AND attempts = 1), count(*) "
            "FROM leads WHERE session = %s",
            (SESSION,),
        )
        row = await cur.fetchone()
        assert row is not None
        if tuple(row) != (n, n):
            problems.append(f"database: {row[0]} of {row[1]} leads done once, expected {n}")
    return problems


# -- rest: leaseq serve ---------------------------------------------------------


async def _rest_loop(http: RawPoster, owner: str, batch: int) -> WorkerReport:
    report = WorkerReport()
    body = {"session": SESSION, "owner": owner, "max": batch, "ttl_s": LEASE_TTL_S}
    while True:
        started = time.perf_counter()
        leases = (await http.post("/lease", body))["leases"]
        leased = time.perf_counter()
        if not leases:
            report.finished_at = time.monotonic()
            return report
        report.lease_s.append(leased - started)
        if batch == 1:
            item = {"lead_id": leases[0]["lead"]["id"], "token": leases[0]["token"]}
            report.done_ids.append((await http.post("/complete", item))["lead"]["id"])
        else:
            items = [{"lead_id": x["lead"]["id"], "token": x["token"]} for x in leases]
            results = (await http.post("/complete/batch", {"items": items}))["results"]
            if lost := [r["lead_id"] for r in results if not r["ok"]]:
                raise RuntimeError(f"{owner}: /complete/batch refused leads {lost[:5]}")
            report.done_ids.extend(r["lead_id"] for r in results)
        report.complete_s.append(time.perf_counter() - leased)


@cache
def leaseq_takes_next(source: Path | None = None) -> bool:
    """Whether this checkout's service (or that of the checkout ``source``) takes ``next`` on
    ``/complete`` and ``/complete/batch`` (read from its OpenAPI document, built in process,
    or in a process run from ``source``: no database is touched)."""
    from app.api.app import create_app

    if source is None:
        document = create_app(Settings(database_url=common.DEFAULT_SERVER_URL)).openapi()
    else:
        document = checkout_openapi(source, common.DEFAULT_SERVER_URL)
    schemas = document.get("components", {}).get("schemas", {})

    def body_properties(path: str) -> dict[str, Any]:
        content = document["paths"][path]["post"].get("requestBody", {}).get("content", {})
        schema = content.get("application/json", {}).get("schema", {})
        if ref := schema.get("$ref"):
            schema = schemas.get(ref.rsplit("/", 1)[-1], {})
        properties: dict[str, Any] = schema.get("properties", {})
        return properties

    return all("next" in body_properties(p) for p in ("/complete", "/complete/batch"))


class NextIgnored(RuntimeError):
    """The service answered a complete carrying ``next`` without ``leases``."""


async def _rest_next_loop(
    http: RawPoster, owner: str, batch: int, keyed: bool = False
) -> WorkerReport:
    """One ``/lease``, then one ``/complete`` (or ``/complete/batch``) with ``next`` per lead
    (per batch), until a complete leases nothing; ``keyed``: each with an Idempotency-Key of
    its own. The lease figures are the requests that handed out leases (the first
    ``/lease``, and each complete that leased some); the complete figures are every
    complete."""

    def key() -> str | None:
        return str(uuid.uuid4()) if keyed else None

    report = WorkerReport()
    want = {"session": SESSION, "owner": owner, "max": batch, "ttl_s": LEASE_TTL_S, "wait_s": 0}
    started = time.perf_counter()
    leases = (await http.post("/lease", want, key()))["leases"]
    if leases:
        report.lease_s.append(time.perf_counter() - started)
    while leases:
        started = time.perf_counter()
        if batch == 1:
            path = "/complete"
            item = {"lead_id": leases[0]["lead"]["id"], "token": leases[0]["token"]}
            body = {**item, "status": "done", "result": None, "next": want}
            answer = await http.post(path, body, key())
            done = [answer["lead"]["id"]]
        else:
            path = "/complete/batch"
            items = [{"lead_id": x["lead"]["id"], "token": x["token"]} for x in leases]
            answer = await http.post(path, {"items": items, "next": want}, key())
            if lost := [r["lead_id"] for r in answer["results"] if not r["ok"]]:
                raise RuntimeError(f"{owner}: /complete/batch refused leads {lost[:5]}")
            done = [r["lead_id"] for r in answer["results"]]
        elapsed = time.perf_counter() - started
        if "leases" not in answer:
            raise NextIgnored(
                f"POST {path} with `next` answered without `leases` (keys {sorted(answer)}): "
                "this service does not complete-and-lease in one request"
            )
        report.complete_s.append(elapsed)
        report.done_ids.extend(done)
        leases = answer["leases"]
        if leases:
            report.lease_s.append(elapsed)
    report.finished_at = time.monotonic()
    return report


async def rest_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    clients = [RawPoster("127.0.0.1", spec["port"]) for _ in range(tasks)]
    try:
        for client in clients:
            await client.connect()
        ready()
        if spec.get("next"):
            loops = [
                _rest_next_loop(c, f"{name}t{i}", spec["batch"], spec.get("keyed", False))
                for i, c in enumerate(clients)
            ]
        else:
            loops = [_rest_loop(c, f"{name}t{i}", spec["batch"]) for i, c in enumerate(clients)]
        reports = await asyncio.gather(*loops)
    finally:
        for client in clients:
            await client.close()
    return merge(reports)


async def rest_push(base_url: str, n: int) -> tuple[list[int], float, float]:
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as client:

        async def push(lo: int, hi: int) -> list[int]:
            leads = [{"payload": {"n": i}} for i in range(lo, hi)]
            answer = await client.post(f"/sessions/{SESSION}/leads", json={"leads": leads})
            answer.raise_for_status()
            ids: list[int] = answer.json()["ids"]
            return ids

        return await push_in_two_ways(n, push)


# -- pgqueuer -------------------------------------------------------------------


async def _pgqueuer_install(url: str) -> None:
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        await Queries(PsycopgDriver(conn)).install()


async def pgqueuer_push(url: str, n: int) -> tuple[list[int], float, float]:
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.queries import Queries

    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        queries = Queries(PsycopgDriver(conn))

        async def push(lo: int, hi: int) -> list[int]:
            if hi - lo == 1:
                ids = await queries.enqueue("noop", f'{{"n": {lo}}}'.encode())
            else:
                payloads: list[bytes | None] = [f'{{"n": {i}}}'.encode() for i in range(lo, hi)]
                ids = await queries.enqueue(["noop"] * (hi - lo), payloads, [0] * (hi - lo))
            return [int(i) for i in ids]

        return await push_in_two_ways(n, push)


async def pgqueuer_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    from pgqueuer.db import PsycopgDriver
    from pgqueuer.models import Job
    from pgqueuer.qm import QueueManager
    from pgqueuer.queries import Queries
    from pgqueuer.types import QueueExecutionMode

    logging.getLogger("pgqueuer").setLevel(logging.WARNING)
    report = WorkerReport()
    conns = [
        await psycopg.AsyncConnection.connect(libpq_url(spec["url"]), autocommit=True)
        for _ in range(tasks)
    ]
    managers = []
    for conn in conns:
        qm = QueueManager(Queries(PsycopgDriver(conn)))

        @qm.entrypoint("noop")
        async def noop(job: Job) -> None:
            report.done_ids.append(int(job.id))
            report.finished_at = time.monotonic()

        managers.append(qm)
    try:
        ready()
        await asyncio.gather(
            *(
                qm.run(
                    batch_size=spec["batch"],
                    mode=QueueExecutionMode.drain,
                    # How long to wait for a job before looking again: the drain
                    # ends at the first look that finds the queue empty.
                    dequeue_timeout=timedelta(milliseconds=50),
                    log_aggregation_interval=timedelta(0),
                )
                for qm in managers
            )
        )
    finally:
        for conn in conns:
            await conn.close()
    return report


async def pgqueuer_checks(url: str, n: int, ids: Sequence[int], done: Sequence[int]) -> list[str]:
    problems = []
    if dupes := [job for job, k in Counter(done).items() if k > 1]:
        problems.append(f"{len(dupes)} jobs ran twice, e.g. {dupes[:5]}")
    if set(done) != set(ids) or len(ids) != n:
        problems.append(f"{len(set(done))} distinct jobs ran of {len(ids)} pushed, expected {n}")
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        row = await (await conn.execute("SELECT count(*) FROM pgqueuer")).fetchone()
        assert row is not None
        if row[0]:
            problems.append(f"{row[0]} jobs left in the pgqueuer table")
    return problems


# -- procrastinate --------------------------------------------------------------


def _procrastinate_app(
    url: str, pool_size: int, done: list[int] | None = None, finished: list[float] | None = None
) -> Any:
    import procrastinate

    finished = finished if finished is not None else [0.0]

    app = procrastinate.App(
        connector=procrastinate.PsycopgConnector(
            conninfo=libpq_url(url), min_size=pool_size, max_size=pool_size
        )
    )

    @app.task(name="noop", pass_context=True)
    async def noop(context: Any, n: int) -> None:
        if done is not None:
            done.append(int(context.job.id))
            finished[0] = time.monotonic()

    return app


async def _procrastinate_install(url: str) -> None:
    app = _procrastinate_app(url, 1)
    async with app.open_async():
        await app.schema_manager.apply_schema_async()


async def procrastinate_push(url: str, n: int) -> tuple[list[int], float, float]:
    app = _procrastinate_app(url, 1)
    async with app.open_async():
        task = app.tasks["noop"]

        async def push(lo: int, hi: int) -> list[int]:
            if hi - lo == 1:
                return [int(await task.defer_async(n=lo))]
            return [
                int(i) for i in await task.batch_defer_async(*({"n": i} for i in range(lo, hi)))
            ]

        return await push_in_two_ways(n, push)


async def procrastinate_worker(
    spec: dict[str, Any], tasks: int, name: str, ready: Callable[[], None]
) -> WorkerReport:
    logging.getLogger("procrastinate").setLevel(logging.WARNING)
    report = WorkerReport()
    finished = [0.0]
    app = _procrastinate_app(spec["url"], tasks + 2, report.done_ids, finished)
    async with app.open_async():
        ready()
        await app.run_worker_async(
            concurrency=tasks, wait=False, install_signal_handlers=False, name=name
        )
    report.finished_at = finished[0]
    return report


async def procrastinate_checks(
    url: str, n: int, ids: Sequence[int], done: Sequence[int]
) -> list[str]:
    problems = []
    if dupes := [job for job, k in Counter(done).items() if k > 1]:
        problems.append(f"{len(dupes)} jobs ran twice, e.g. {dupes[:5]}")
    if set(done) != set(ids) or len(ids) != n:
        problems.append(f"{len(set(done))} distinct jobs ran of {len(ids)} pushed, expected {n}")
    async with await psycopg.AsyncConnection.connect(libpq_url(url), autocommit=True) as conn:
        cur = await conn.execute(
            "SELECT count(*) FILTER (WHERE status = 'succeeded'), count(*) FROM procrastinate_jobs"
        )
        row = await cur.fetchone()
        assert row is not None
        if tuple(row) != (n, n):
            problems.append(f"procrastinate_jobs: {row[0]} of {row[1]} succeeded, expected {n}")
    return problems


# -- one run ------------------------------------------------------------------------


def merge(reports: Sequence[WorkerReport]) -> WorkerReport:
    merged = WorkerReport()
    for r in reports:
        merged.lease_s += r.lease_s
        merged.complete_s += r.complete_s
        merged.done_ids += r.done_ids
        merged.finished_at = max(merged.finished_at, r.finished_at)
    return merged


WORKERS = {
    "sdk": users.sdk_worker,
    "ceiling": ceiling_worker,
    "core": core_worker,
    "rest": rest_worker,
    "rawrest": rest_worker,
    "pgqueuer": pgqueuer_worker,
    "procrastinate": procrastinate_worker,
}


def run_once(
    contender: Contender, server_url: str, template: str, n: int, workers: int, repeat: int
) -> RunResult:
    """One fresh database, N leads pushed, drained by W workers, checked; its figures."""
    load_before = common.load_avg()
    service: Service | None = None
    service_cpu_ms: float | None = None
    exit_s: float | None = None
    family = contender.family
    with common.fresh_copy(server_url, template) as url:
        try:
            spec: dict[str, Any] = {"url": url, "batch": contender.batch}
            ids: list[int] = []
            bulk = single = 0.0
            if family == "ceiling":
                ids, bulk, single = asyncio.run(ceiling_push(url, n))
            elif family == "core":
                spec["ledger"] = contender.ledger
                ids, bulk, single = asyncio.run(core_push(url, n, bool(contender.ledger)))
            elif family in ("rest", "rawrest", "sdk", "cli", "ts", "go"):
                if family == "rawrest":
                    service = RawRestService(libpq_url(url))
                else:
                    service = Service(
                        url,
                        contender.servers or 1,
                        extra_args=["--no-ledger"] if contender.ledger is False else [],
                        source=contender.source,
                    )
                service.wait_ready()
                spec["port"], spec["next"] = service.port, contender.next
                spec["keyed"], spec["base_url"] = contender.keyed, service.base_url
                ids, bulk, single = asyncio.run(rest_push(service.base_url, n))
            elif family == "pgqueuer":
                ids, bulk, single = asyncio.run(pgqueuer_push(url, n))
            elif family == "procrastinate":
                ids, bulk, single = asyncio.run(procrastinate_push(url, n))
            service_cpu = service.cpu_s() if service is not None else 0.0
            server = common.postmaster(url)
            database_cpu = common.server_cpu_s(server)
            if family in ("cli", "ts", "go"):
                assert service is not None
                child = {"cli": users.cli_worker, "ts": users.ts_worker, "go": users.go_worker}
                exit_s, cpu_s = child[family](service.base_url, workers)
                done, drain_s = users.ledger_drain(url)
                reports = [WorkerReport(done_ids=done, cpu_s=cpu_s)]
            elif family == "xargs":
                drain_s = users.xargs(n, workers)
                reports = []
            else:
                # The SDK as its users run it: one Worker process of concurrency W.
                processes = 1 if family == "sdk" else None
                reports, started = common.run_workers(WORKERS[family], spec, workers, processes)
                drain_s = merge(reports).finished_at - started
            database_cpu_ms = (
                round((common.server_cpu_s(server) - database_cpu) / n * 1000, 3)
                if server is not None
                else None
            )
            merged = merge(reports)
            if service is not None:
                service_cpu_ms = round((service.cpu_s() - service_cpu) / n * 1000, 3)
                service.stop()
                service = None
            checks = {
                "pgqueuer": pgqueuer_checks,
                "procrastinate": procrastinate_checks,
                "xargs": xargs_checks,
            }.get(family, leaseq_checks)
            if problems := asyncio.run(checks(url, n, ids, merged.done_ids)):
                raise RuntimeError(f"{contender.name} W={workers}: " + "; ".join(problems))
        finally:
            if service is not None:
                service.stop()
    return RunResult(
        contender=contender.name,
        workers=workers,
        repeat=repeat,
        leads=n,
        drain_per_s=round(n / drain_s, 1),
        push_bulk_per_s=bulk,
        push_single_per_s=single,
        lease_p50_ms=common.percentile_ms(merged.lease_s, 50),
        lease_p99_ms=common.percentile_ms(merged.lease_s, 99),
        complete_p50_ms=common.percentile_ms(merged.complete_s, 50),
        complete_p99_ms=common.percentile_ms(merged.complete_s, 99),
        lease_calls=len(merged.lease_s),
        client_cpu_ms_per_lead=round(sum(r.cpu_s for r in reports) / n * 1000, 3),
        drain_s=round(drain_s, 3),
        load_before=load_before,
        load_after=common.load_avg(),
        checks=["xargs exited 0"] if family == "xargs" else CHECKED,
        service_cpu_ms_per_lead=service_cpu_ms,
        database_cpu_ms_per_lead=database_cpu_ms,
        exit_s=None if exit_s is None else round(exit_s, 3),
    )


CHECKED = ["each lead ran exactly once", "database agrees"]


async def xargs_checks(url: str, n: int, ids: Sequence[int], done: Sequence[int]) -> list[str]:
    """Nothing to check beyond xargs' exit status (``users.xargs`` raises on a failure)."""
    return []
