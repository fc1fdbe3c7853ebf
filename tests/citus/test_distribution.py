"""``leaseq db upgrade`` on a Citus coordinator: what it distributes, and how.

Revision 0006 distributes every per-session table by ``session``, colocated
with ``leads``; the others by their own key or as reference tables. Revision 0026
distributes the idempotency keys by the session of their request, colocated too. A
single-database deployment moves onto a cluster by adding the extension and
the workers, then upgrading: its rows move to the workers and stay leasable.
"""

from __future__ import annotations

import psycopg

from app.config import Settings
from app.domain.queue import Queue
from app.store import migrate, statements
from app.store.pool import Database
from tests.citus.cluster import Cluster
from tests.support.serving import leaseq

BY_SESSION = {
    "leads",
    "lead_events",
    "lead_counts",
    "session_settings",
    "lead_dependencies",
    "lead_key_frees",
    "idempotency_keys",  # by the session of the key's request since revision 0026
}
# The lease's claim as a router statement takes it: one session, FOR UPDATE SKIP LOCKED.
CLAIM = (
    "SELECT id FROM leads WHERE session = %(session)s AND status = 'queued' AND NOT scheduled "
    "ORDER BY priority DESC, id LIMIT 10 FOR UPDATE SKIP LOCKED"
)
KEYS_COLUMN = (
    "SELECT distribution_column FROM citus_tables WHERE table_name = 'idempotency_keys'::regclass"
)


def _rows(url: str, query: str, params: object = None) -> list[tuple[object, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, params).fetchall()  # type: ignore[arg-type]


def test_db_upgrade_distributes_every_table(citus_cluster: Cluster, citus_database: str) -> None:
    url = citus_cluster.url(citus_database)
    done = leaseq("db", "upgrade", env={"LEASEQ_DATABASE_URL": url})
    assert done.returncode == 0, done.stderr
    assert migrate.current(url) == migrate.head()

    tables = {
        name: (kind, column, colocation)
        for name, kind, column, colocation in _rows(
            url,
            "SELECT table_name::text, citus_table_type, distribution_column, colocation_id "
            "FROM citus_tables",
        )
    }
    every = {
        name
        for (name,) in _rows(url, "SELECT tablename FROM pg_tables WHERE schemaname = 'public'")
    }
    assert set(tables) == every  # no table is left on the coordinator alone
    assert {name for name, (_, column, _) in tables.items() if column == "session"} == BY_SESSION
    assert {tables[name][2] for name in BY_SESSION} == {tables["leads"][2]}  # colocated
    assert tables["alembic_version"][0] == "reference"

    keys = dict(
        _rows(
            url,
            "SELECT conrelid::regclass::text, pg_get_constraintdef(oid) FROM pg_constraint "
            "WHERE contype = 'p' AND connamespace = 'public'::regnamespace",
        )
    )
    assert keys["leads"] == keys["lead_events"] == "PRIMARY KEY (session, id)"
    assert keys["lead_counts"] == "PRIMARY KEY (session, status, slot)"
    assert keys["session_settings"] == "PRIMARY KEY (session)"
    assert keys["idempotency_keys"] == "PRIMARY KEY (session, verb, key)"

    # Every worker holds shards of leads, and reads the revision from its own copy.
    placed = _rows(
        url, "SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = 'leads'::regclass"
    )
    assert {port for (port,) in placed} == {worker.port for worker in citus_cluster.workers}
    for worker in citus_cluster.workers:
        assert migrate.current(worker.url(citus_database)) == migrate.head()


async def test_the_counts_are_kept_on_each_shard(citus_url: str, settings: Settings) -> None:
    """The counting triggers fire on the shards and write the colocated counts there."""
    sessions = [f"s{i}" for i in range(8)]  # over every shard of the test cluster
    with psycopg.connect(citus_url, autocommit=True) as conn:
        for i, session in enumerate(sessions):
            conn.execute(
                "INSERT INTO leads (session) SELECT %s FROM generate_series(1, %s)",
                (session, i + 1),
            )
        conn.execute("UPDATE leads SET status = 'done' WHERE session = 's3'")  # one shard
        conn.execute("UPDATE leads SET priority = 1")  # every shard, no status changed
        conn.execute(
            "DELETE FROM leads WHERE session = 's5' "
            "AND id = (SELECT min(id) FROM leads WHERE session = 's5')"
        )
    async with Database.from_settings(settings, citus_url) as db:
        queue = Queue(db)
        for i, session in enumerate(sessions):
            counts = await queue.stats(session)
            expected = i if session == "s5" else i + 1
            assert (counts.queued, counts.done) == (
                (0, expected) if session == "s3" else (expected, 0)
            )


async def test_a_single_postgresql_moves_onto_the_cluster(
    citus_cluster: Cluster, settings: Settings
) -> None:
    """docs/scaling.md: at 0005 on one PostgreSQL, add Citus and the workers, then upgrade."""
    name = "leaseq_move"
    url = citus_cluster.create_database(name, citus=False)  # the coordinator alone
    try:
        migrate.upgrade(url, "0005")
        # Written in the SQL of 0005: today's statements name columns of later revisions.
        with psycopg.connect(url, autocommit=True) as conn:
            for session in ("a", "b", "c"):
                for n in range(5):
                    conn.execute(
                        "INSERT INTO leads (session, payload, key) VALUES (%s, %s::jsonb, %s)",
                        (session, f'{{"n": {n}}}', f"k{n}"),
                    )
            [(held,)] = conn.execute(
                "UPDATE leads SET status = 'leased', lease_token = 't0', owner = 'w1',"
                " attempts = attempts + 1,"
                " lease_expires_at = now() + interval '1 minute'"
                " WHERE id = (SELECT min(id) FROM leads WHERE session = 'a') RETURNING id"
            ).fetchall()
        before = _counts(url)
        leads_before = _rows(url, "SELECT id, session, status, key FROM leads ORDER BY id")

        citus_cluster.add_citus(name)
        migrate.upgrade(url)

        assert _rows(
            url, "SELECT count(*) FROM citus_tables WHERE table_name = 'leads'::regclass"
        ) == [(1,)]
        assert _rows(url, "SELECT id, session, status, key FROM leads ORDER BY id") == leads_before
        assert _counts(url) == before
        async with Database.from_settings(settings, url) as db:
            queue = Queue(db)
            for session, counts in before.items():
                stats = await queue.stats(session)
                assert (stats.queued, stats.leased) == counts, session
        # Still leasable: the claim runs on the shard of its session and takes its queued leads.
        with psycopg.connect(url) as conn:
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + CLAIM, {"session": "a"}))
            assert "Task Count: 1" in plan, plan
            claimed = [row[0] for row in conn.execute(CLAIM, {"session": "a"})]
            assert held not in claimed and len(claimed) == 4
            conn.execute(
                "UPDATE leads SET status = 'leased', lease_token = 't', attempts = attempts + 1, "
                "lease_expires_at = now() + interval '1 minute' "
                "WHERE session = 'a' AND id = ANY(%s)",
                (claimed,),
            )
        async with Database.from_settings(settings, url) as db:
            assert (await Queue(db).stats("a")).leased == 5
    finally:
        citus_cluster.drop_database(name)


async def test_the_one_session_lease_is_a_router_statement(citus_url: str) -> None:
    with psycopg.connect(citus_url, autocommit=True) as conn:
        conn.execute("INSERT INTO leads (session) VALUES ('s'), ('s')")
        lease = statements.lease_next(
            session="s", owner="w", max=1, ttl_s=30.0, now=None, tokens=["t"], ledger=True
        )
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + lease.text, lease.params))
    assert "Task Count: 1" in plan, plan


def _counts(url: str) -> dict[str, tuple[int, int]]:
    """Per session: its queued and its leased leads, counted in SQL of any revision."""
    rows = _rows(
        url,
        "SELECT session, count(*) FILTER (WHERE status = 'queued'),"
        " count(*) FILTER (WHERE status = 'leased') FROM leads GROUP BY session",
    )
    return {session: (queued, leased) for session, queued, leased in rows}


def test_revision_0026_moves_the_keys_to_the_shards_of_their_sessions(
    citus_cluster: Cluster, citus_database: str
) -> None:
    """The keys distributed by key (0006) come over with their rows, then are distributed by
    session; a key of one session's request then lives on that session's shard, and the
    revision is undone back to the keys of 0006 (distributed by key, one row per key)."""
    url = citus_cluster.url(citus_database)
    migrate.upgrade(url, "0025")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO idempotency_keys (verb, key, request, answer)"
            " VALUES ('push', 'old', 'r', '{}'), ('lease', 'old', 'r', NULL)"
        )
    migrate.upgrade(url)
    [(column,)] = _rows(url, KEYS_COLUMN)
    assert column == "session"
    kept = _rows(url, "SELECT session, verb, key FROM idempotency_keys ORDER BY verb")
    assert kept == [("", "lease", "old"), ("", "push", "old")]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO idempotency_keys (session, verb, key, request)"
            " VALUES ('a', 'push', 'old', 'r'), ('b', 'push', 'old', 'r')"
        )
    assert len(_rows(url, "SELECT FROM idempotency_keys WHERE key = 'old'")) == 4

    migrate.downgrade(url, "0025")
    [(column,)] = _rows(url, KEYS_COLUMN)
    assert column == "key"
    assert sorted(_rows(url, "SELECT verb, key FROM idempotency_keys")) == [
        ("lease", "old"),
        ("push", "old"),
    ]
