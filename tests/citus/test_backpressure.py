"""Backpressure on the cluster (revision 0025): every test of one PostgreSQL's ``max_queued``
(``tests/integration/test_backpressure.py``), the concurrent ones included, each on a fresh
database of the cluster (this folder's ``database_url``); and producers connected to
different nodes at once, whose pushes all meet at the session's shard, where the bound is
decided.
"""

from __future__ import annotations

import threading
from urllib.parse import urlsplit

import psycopg

from app.store.statements import QUOTA_SQLSTATE
from leaseq import push_in
from tests.citus.cluster import Cluster
from tests.integration.test_backpressure import (
    queue_url,
    test_a_keyed_retry_after_room_frees_gets_a_first_answer,
    test_a_push_past_max_queued_stores_none_of_its_batch,
    test_concurrent_producer_transactions_never_pass_the_bound,
    test_concurrent_pushers_never_pass_the_bound,
    test_keys_already_in_the_session_take_no_room,
    test_leaseq_push_in_a_transaction_obeys_it,
    test_the_service_default_binds_sessions_without_their_own,
)

__all__ = [
    "queue_url",
    "test_a_keyed_retry_after_room_frees_gets_a_first_answer",
    "test_a_push_past_max_queued_stores_none_of_its_batch",
    "test_concurrent_producer_transactions_never_pass_the_bound",
    "test_concurrent_pushers_never_pass_the_bound",
    "test_keys_already_in_the_session_take_no_room",
    "test_leaseq_push_in_a_transaction_obeys_it",
    "test_the_service_default_binds_sessions_without_their_own",
]


def test_producers_on_every_node_never_pass_the_bound(
    citus_cluster: Cluster, citus_url: str
) -> None:
    """Twelve producers, four connected to each node (the coordinator and both workers),
    each pushing 2 leads per transaction five times through ``leaseq_push``, against a bound
    of 25 and the service's default of 1 for every other session: what commits never passes
    25, and it fills to 24 (twelve transactions); a session without its own bound takes 1."""
    database = urlsplit(citus_url).path.lstrip("/")
    urls = [node.url(database) for node in citus_cluster.nodes]
    with psycopg.connect(urls[0], autocommit=True) as conn:
        conn.execute("INSERT INTO session_settings (session, max_queued) VALUES ('s', 25)")
        conn.execute("INSERT INTO leaseq_config (name, value) VALUES ('max_queued', '1')")
    committed: list[int] = []
    start = threading.Barrier(12)

    def producer(url: str) -> None:
        with psycopg.connect(url) as conn:
            start.wait()
            for _ in range(5):
                try:
                    for n in range(2):
                        push_in(conn, "s", {"n": n})
                    conn.commit()
                    committed.append(2)
                except psycopg.Error as exc:
                    assert exc.sqlstate in (QUOTA_SQLSTATE, "40P01"), exc  # 40P01: deadlock
                    conn.rollback()

    threads = [threading.Thread(target=producer, args=(urls[i % 3],)) for i in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with psycopg.connect(urls[0]) as conn:
        [(n,)] = conn.execute("SELECT count(*) FROM leads WHERE session = 's'").fetchall()
        assert n == sum(committed) == 24
        push_in(conn, "other", {"n": 1})
        conn.commit()
        try:
            push_in(conn, "other", {"n": 2})
            refused = ""
        except psycopg.Error as exc:
            refused = exc.sqlstate or ""
        assert refused == QUOTA_SQLSTATE
