"""Past one PostgreSQL (docs/scaling.md): which statements stay inside one session.

Every statement of ``app.store.statements`` is classified:
scoped to one session, to one lead, or across sessions. Sharding by session
(Citus, or several databases behind a router) needs the first kind on the hot
path, so the test proves it on a stand-in: the schema with ``leads`` and
``lead_events`` hash-partitioned by ``session`` (the schema changes
docs/scaling.md lists). There, ``EXPLAIN`` of each session-scoped statement
touches one partition of each table, and the whole queue still works.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from sqlalchemy.dialects import postgresql
from sqlalchemy.schema import CreateIndex

from app.config import Settings
from app.domain import report
from app.domain.queue import Queue
from app.store import migrate, schema, statements
from app.store.pool import Database, libpq_url
from app.store.statements import text
from app.store.statements.fragments import DB_CLOCK
from app.store.statements.outcomes import ended_notice
from leaseq.model import NewLead, SessionSettings
from tests.deploy.compose import ROOT
from tests.support import leasing_of

PARTITIONS = 4
TABLES = ("leads", "lead_events", "lead_counts", "session_settings")  # partitioned by session

# Hot path, routed by session: each reads and writes the rows of one session only.
SESSION_SCOPED: dict[str, Callable[[], str]] = {
    "push": lambda: text("push", ledger=True),
    "push, ledger off": lambda: text("push", ledger=False),
    "push_rows": lambda: text("push_rows", rows=1),
    "throttle_session": lambda: text("throttle_session"),
    "existing_keys": lambda: text("existing_keys"),
    "lease_next": lambda: text("lease_next", ledger=True),
    "lease_next, ledger off": lambda: text("lease_next", ledger=False),
    "lease_group": lambda: text("lease_group", ledger=True),
    "lease_group, ledger off": lambda: text("lease_group", ledger=False),
    "lease_keyed": lambda: text("lease_keyed", ledger=True, remember=True),
    "lease_keyed, ledger off": lambda: text("lease_keyed", ledger=False, remember=True),
    "lease_keyed, its key apart": lambda: text("lease_keyed", ledger=False, remember=False),
    "sweep of one session": lambda: text("sweep", ledger=True, scoped=True),
    "stats": lambda: text("stats"),
    "completions": lambda: text("completions"),
    "lease_limited": lambda: text("lease_limited", ledger=True),
    "lease_limited, ledger off": lambda: text("lease_limited", ledger=False),
    "lock_settings": lambda: text("lock_settings"),
    "settings_get": lambda: text("settings_get"),
    "settings_put": lambda: text("settings_put"),
    "report": lambda: text("session_report"),
    "report attempts": lambda: text("attempts_per_lead"),
    "report owners": lambda: text("owners"),
    "lead_events": lambda: text("lead_events"),
    "retry_failed": lambda: text("retry_failed", ledger=True),
    "retry_failed, ledger off": lambda: text("retry_failed", ledger=False),
    "pause": lambda: text("pause"),
    "resume": lambda: text("resume"),
    "dependency_targets": lambda: text("dependency_targets"),
    "add_dependencies": lambda: text("add_dependencies", ledger=True, edges=True),
    "add_dependencies, ledger off": lambda: text("add_dependencies", ledger=False, edges=True),
    "add_dependencies, its edges apart": lambda: text(
        "add_dependencies", ledger=False, edges=False
    ),
    "add_edges": lambda: text("add_edges", rows=2),
    "tend_keys": lambda: text("tend_keys"),
    "unpark_session": lambda: text("unpark_session"),
    "throughput": lambda: text("throughput", window_minutes=60),
}
# Hot path, by lead id (renew, complete, release) and operator verbs: one row per lead.
LEAD_SCOPED = (
    "renew_many",
    "complete_many",
    "completed_already",
    "release",
    "cancel",
    "retry",
    "get",
    "valid_leases",
    "runtime_ran_out",
)
# The idempotency keys of a push or lease: in the transaction of that request, and named by
# its session, so on its session's shard (revision 0026). remembered_anywhere: one
# PostgreSQL's, after a claim another session's row refused.
WITH_THE_REQUEST = (
    "claim_key",
    "remember_answer",
    "remember_key",
    "remembered",
    "remembered_anywhere",
)
# Across sessions by design: recovery, maintenance, the operator's totals, and the fleet's
# view of which sessions have work (read once a second per process, not per lease).
CROSS_SESSION = ("stats_all", "sweep (all sessions)", "prune", "prune_keys")
FLEET_VIEW = ("oldest_available", "settings_all")
# A change of settings waits for the leases in flight: on the session's shard (a router), or
# every node's (Citus propagates LOCK); an operator's rare write, not a hot statement.
BARRIER = ("settings_barrier",)
# Maintenance of delayed leads and of the kept counts: each shard runs its own.
MAINTENANCE = (
    "promote",
    "fold_counts",
    "forget_zero_counts",
    "forget_frees",
    "sessions_to_keep",
)
# The dashboard's overview: cold reads across sessions, once per poll.
OVERVIEW = ("per_minute", "expiring", "failures")
# Small tables that are reference tables on Citus (revisions 0008, 0010): tokens, the audit
# trail, schedules, waits for outcomes. Operator-rate writes, or one row per waiting request.
REFERENCE = (
    "token_create",
    "token_lookup",
    "tokens_listing",
    "token_revoke",
    "audit",
    "audit_trail",
    "schedule_put",
    "schedule_get",
    "schedules_all",
    "schedule_delete",
    "schedules_due",
    "schedule_advance",
    "watch",
    "unwatch",
    "config_put",
    "config_get",
    "fence_key",
    "forget_stale_watches",
)
# A few leads by id, of any session: which session a scoped token's lead is in, and the leads a
# wait for outcomes watches.
BY_IDS = ("lead_sessions", "lead_sessions_on_nodes", "watched")
# The scheduler's tick: its lead pushed into a session (then its row moved: REFERENCE).
SCHEDULER = ("schedule_push",)
NO_TABLE = (
    "lead_ids",  # a sequence's next values, on the node connected to
    "pushed_notice",  # a NOTIFY
    "db_now",
    "autovacuum",
    "schema_revision",
    "lock_timeout",
    "one_snapshot",
    "schedule_now",
)
HELPERS = ("in_list",)  # builds SQL text from constants; not a statement


PARAMETERS: dict[str, Any] = {
    "session": "s1",
    "keys": ["k1"],
    "priorities": [0],
    "payloads": ["{}"],
    "depths": [0],
    "parent_ids": [None],
    "max_attempts": [5],
    "delays": [0.0],
    "concurrency_keys": [None],
    "max_runtimes": [None],
    "traceparents": [None],
    "has_dependents": [False],
    "lead_ids": [2],
    "after_ids": [1],
    "ids": [1],
    "owner": "w",
    "max": 10,
    "window": 42,
    "tokens": ["t"],
    "ttl_s": 60.0,
    "owners": ["w"],
    "ttls": [60.0],
    "now": DB_CLOCK,
    "limit": 1000,
    "weight": 1.0,
    "max_leased": 10,
    "rate_per_s": 5.0,
    "burst": 5,
    "max_leased_per_key": None,
    "max_runtime_s": None,
    "max_queued": None,
    "api_token": None,
    "window_s": 60.0,
    "generated": "k",
    "after_id": 0,
    "head_id": 10,
    "name": "max_queued",
    "value": "10",
    "for_s": 60.0,
    "lead_id": 1,
    "n": 1,
    "throttle_s": 30.0,
    "before": None,
    "key": "k",
    "key_session": "s1",
    "request": "r",
    "token": "t",
    "status": "done",
    "result": None,
    "error": None,
    "ledger_by_row": False,
    "notify_ended": True,  # as on a cluster: the statement joins lead_waits, still routed
}


def statement_names() -> set[str]:
    """Every statement function ``app.store.statements`` defines (most are wrapped in
    functools.cache)."""
    return set(statements.REGISTRY) - set(HELPERS)


def test_every_statement_is_classified() -> None:
    """A new statement must say how it shards (and docs/scaling.md must say it too)."""
    session_scoped = {"push", "existing_keys", "lease_next", "lease_group", "sweep", "stats"}
    session_scoped |= {"completions"}
    session_scoped |= {"push_rows", "throttle_session"}
    session_scoped |= {"lease_keyed", "complete_and_lease", "lease_together"}
    session_scoped |= {"session_report", "attempts_per_lead", "owners"}
    session_scoped |= {"lead_events", "retry_failed"}
    session_scoped |= {"lease_limited", "lock_settings", "settings_get", "settings_put"}
    session_scoped |= {"pause", "resume", "tend_keys", "unpark_session"}
    session_scoped |= {"dependency_targets", "add_dependencies", "add_edges", "dependents"}
    session_scoped |= {"list_leads", "retry_leads", "cancel_leads", "throughput"}
    cross = {
        "stats_all",
        "completions_all",
        "ledger_head",
        "lease_seconds",
        "lease_seconds_recent",
        "paused_all",
        "blocked",
        "prune",
        "prune_keys",
        *MAINTENANCE,
        *OVERVIEW,
        *FLEET_VIEW,
        *BARRIER,
        *SCHEDULER,
        "sessions_like",
    }
    keys = set(WITH_THE_REQUEST)
    elsewhere = set(REFERENCE) | set(BY_IDS)
    assert statement_names() == (
        session_scoped | set(LEAD_SCOPED) | keys | cross | elsewhere | set(NO_TABLE)
    )
    written = (ROOT / "docs" / "scaling.md").read_text()
    for name in [*session_scoped, *LEAD_SCOPED, *keys, *cross, *elsewhere]:
        assert f"`{name}`" in written, f"docs/scaling.md does not mention `{name}`"


@pytest.mark.parametrize("name", LEAD_SCOPED)
def test_lead_scoped_statements_touch_leads_by_id_only(name: str) -> None:
    variants = statements.REGISTRY[name].variants
    statement = text(name, **{variant: variant == "ledger" for variant in variants})
    # The NOTIFY of the leads it ended reads the statement's own rows, not leads.
    for source in re.findall(r"(\w+) AS \(\n", statement):
        statement = statement.replace(ended_notice(source), "")
    where = re.findall(r"WHERE ([^\n]*)", statement)
    assert where and all(re.search(r"\bl?\.?id = (%\(lead_id\)s|req\.lead_id)", w) for w in where)


def _index_ddl(table: Any) -> list[str]:
    """CREATE INDEX for every index of ``table`` as app.store.schema defines it (unique ones
    included)."""
    return [
        str(CreateIndex(index).compile(dialect=postgresql.dialect())) for index in table.indexes
    ]


def partition_by_session(url: str) -> None:
    """Turn the migrated ``leads``, ``lead_events``, ``lead_counts`` and ``session_settings``
    into tables hash-partitioned by session: the shape a sharded deployment needs
    (docs/scaling.md, "Schema changes"). The count triggers go on the new ``leads``."""
    ddl: list[str] = []
    for keyed in ("lead_counts", "session_settings"):  # their keys hold the session already
        ddl += [
            f"ALTER TABLE {keyed} RENAME TO {keyed}_plain",
            f"CREATE TABLE {keyed} (LIKE {keyed}_plain INCLUDING ALL) PARTITION BY HASH (session)",
            f"DROP TABLE {keyed}_plain",
            *(
                f"CREATE TABLE {keyed}_p{r} PARTITION OF {keyed}"
                f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {r})"
                for r in range(PARTITIONS)
            ),
        ]
    for table in (schema.leads, schema.lead_events):
        name = table.name
        ddl += [
            f"ALTER TABLE {name} RENAME TO {name}_plain",
            f"CREATE TABLE {name} (LIKE {name}_plain INCLUDING DEFAULTS INCLUDING CONSTRAINTS)"
            " PARTITION BY HASH (session)",
            f"DROP TABLE {name}_plain",
            # The id is drawn from a sequence (an identity column cannot be partitioned
            # before PostgreSQL 17; a sharded database draws it from its own range).
            f"CREATE SEQUENCE {name}_id_seq",
            f"ALTER TABLE {name} ALTER COLUMN id SET DEFAULT nextval('{name}_id_seq')",
            # Every unique key holds the distribution column.
            f"ALTER TABLE {name} ADD PRIMARY KEY (session, id)",
            # Lookups by id alone (renew, complete, release; lead_events by lead) probe each
            # partition through this index.
            f"CREATE INDEX {name}_id ON {name} (id)",
            *_index_ddl(table),
            *(
                f"CREATE TABLE {name}_p{r} PARTITION OF {name}"
                f" FOR VALUES WITH (MODULUS {PARTITIONS}, REMAINDER {r})"
                for r in range(PARTITIONS)
            ),
        ]
    ddl += [schema.CREATE_TRIGGER.format(name, when) for name, when in schema.TRIGGERS.items()]
    with psycopg.connect(libpq_url(url)) as conn:
        for statement in ddl:
            conn.execute(statement)  # type: ignore[arg-type]


@pytest.fixture
async def partitioned(empty_database_url: str) -> AsyncIterator[Database]:
    migrate.upgrade(empty_database_url)
    partition_by_session(empty_database_url)
    settings = Settings(statement_timeout_ms=30_000)
    async with Database.from_settings(settings, empty_database_url) as pool:
        yield pool


def partitions_in(plan: Any) -> dict[str, set[str]]:
    """The partitions an EXPLAIN (FORMAT JSON) plan reads ("leads", "lead_events",
    "lead_counts", "session_settings") and those its UPDATE or DELETE probes for the rows it
    changes ("leads written", ...)."""
    found = {name + written: set[str]() for name in TABLES for written in ("", " written")}

    def walk(node: Any, writing: bool) -> None:
        if isinstance(node, dict):
            writing = writing or node.get("Node Type") == "ModifyTable"
            relation = node.get("Relation Name", "")
            match = re.fullmatch(rf"({'|'.join(TABLES)})_p\d+", relation)
            if match:
                found[match[1] + (" written" if writing else "")].add(match[0])
            for value in node.values():
                walk(value, writing)
        elif isinstance(node, list):
            for value in node:
                walk(value, writing)

    walk(plan, False)
    return found


async def explain(pool: Database, statement: str) -> Any:
    names = set(re.findall(r"%\((\w+)\)s", statement))  # the statement's parameter names
    missing = names - set(PARAMETERS)
    assert not missing, f"give PARAMETERS a value for {missing}"
    [row] = await pool.rows(
        f"EXPLAIN (FORMAT JSON) {statement}",
        {k: v for k, v in PARAMETERS.items() if k in names},
    )
    plan = row["QUERY PLAN"]
    return json.loads(plan) if isinstance(plan, str) else plan


@pytest.mark.parametrize("name", SESSION_SCOPED)
async def test_a_session_scoped_statement_reads_one_partition(
    partitioned: Database, name: str
) -> None:
    touched = partitions_in(await explain(partitioned, SESSION_SCOPED[name]()))
    assert all(len(touched[table]) <= 1 for table in TABLES), touched
    # It reads something, pruned to one partition (an INSERT is routed as it runs instead; a
    # pause, a resume or a throttle touches the session's settings row alone, and
    # unpark_session writes the session's leads it reads).
    read = any(touched[table] for table in TABLES)
    writes_only = ("push", "settings_put", "pause", "resume", "add_dependencies", "add_edges")
    assert read or name.startswith((*writes_only, "unpark_session", "throttle_session")), touched
    assert len(touched["session_settings written"]) <= 1, touched
    assert len(touched["lead_events written"]) <= 1, touched
    # Its UPDATE names the session too, so the write is routed as well as the claim.
    assert len(touched["leads written"]) <= 1, touched


async def test_a_cross_session_statement_reads_every_partition(
    partitioned: Database,
) -> None:
    touched = partitions_in(await explain(partitioned, text("stats_all")))
    assert len(touched["lead_counts"]) == PARTITIONS


async def test_the_queue_works_on_the_partitioned_schema(partitioned: Database) -> None:
    queue = Queue(partitioned)
    sessions = [f"s{i}" for i in range(6)]
    for session in sessions:
        pushed = await queue.push(session, [NewLead({"i": i}, key=f"k{i}") for i in range(5)])
        assert pushed.created == 5
        again = await queue.push(session, [NewLead({}, key="k0"), NewLead({}, key="new")])
        assert again.created == 1 and again.duplicates == 1 and again.ids[0] == pushed.ids[0]

    first = sessions[0]
    leases = await leasing_of(queue).lease_next(first, "w", max=4, ttl_s=60)
    assert len(leases) == 4 and {lease.lead.session for lease in leases} == {first}
    done, kept, released, expiring = leases
    await queue.renew(kept.lead.id, kept.token, ttl_s=60)
    await queue.complete(done.lead.id, done.token, result={"ok": True})
    await queue.release(released.lead.id, released.token)
    later = await queue.db_now() + timedelta(seconds=120)
    await queue.renew(kept.lead.id, kept.token, ttl_s=600)
    swept = await queue.sweep(first, now=later)
    assert (swept.requeued, swept.failed) == (1, 0)  # `expiring` ran out; `kept` did not
    cancelled = await queue.cancel(
        (await leasing_of(queue).lease_next(first, "w", max=1))[0].lead.id
    )
    assert cancelled.status == "failed"
    assert (await queue.retry(cancelled.id)).status == "queued"
    assert (await queue.get(expiring.lead.id)).status == "queued"

    counts = await queue.stats(first)
    assert (counts.done, counts.leased, counts.queued) == (1, 1, 4)
    totals = await queue.stats_all()
    assert set(totals.sessions) == set(sessions) and totals.total.pending == 6 * 6 - 1

    audit = await report.report(queue, first)
    assert audit.completions == 1 and audit.double_completions == 0
    assert audit.overlapping_leases == 0
    assert (await queue.prune(0.0, now=later + timedelta(seconds=60))) == 1

    # Fleets: a session's settings, its capped and rate-limited lease, a checkpoint, its age.
    capped = sessions[1]
    limits = SessionSettings(weight=2, max_leased=2, rate_per_s=100, burst=3)
    assert await queue.put_settings(capped, limits) == limits
    held = await leasing_of(queue).lease_next(capped, "w", max=5)
    assert len(held) == 2 and await leasing_of(queue).lease_next(capped, "w") == []
    await queue.renew(held[0].lead.id, held[0].token, checkpoint={"at": 1})
    assert (await queue.get(held[0].lead.id)).checkpoint == {"at": 1}
    assert await queue.settings(capped) == limits
    assert (await queue.stats(capped)).oldest_available_age_s is not None
    assert set(await queue.available()) == set(sessions)
