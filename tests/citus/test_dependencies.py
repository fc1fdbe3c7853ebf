"""Dependencies on the cluster (revision 0015, docs/scaling.md, "Dependencies on a cluster"):
every test of one PostgreSQL's dependencies (``tests/integration/test_dependencies.py``), each
on a fresh database of the cluster (this folder's ``database_url``), by a queue before and
after it knows it is sharded, and leads waiting on others in sessions on both worker
nodes, completed by workers of two API processes."""

from __future__ import annotations

import asyncio

import pytest

from app.config import Settings
from app.domain.queue import Queue
from app.domain.report import report
from app.store.pool import Database
from leaseq.model import NewLead
from tests.citus.cluster import node_of
from tests.integration.test_dependencies import (
    finish,
    test_a_bad_reference_pushes_nothing,
    test_a_cancelled_parent_fails_its_dependents_and_a_retry_revives_it_alone,
    test_a_cancelled_parent_fails_its_dependents_in_the_ledger_once,
    test_a_diamond_pushed_in_one_call_leases_in_dependency_order,
    test_a_failed_parent_fails_its_descendants,
    test_a_fan_in_of_1000_unblocks_once_under_16_workers,
    test_a_lead_pushed_after_a_failed_one_has_its_failed_event,
    test_a_push_racing_its_parent_s_completion_counts_it_once,
    test_another_session_s_lead_is_unknown,
    test_each_lead_failed_down_the_chain_has_one_failed_event,
    test_one_lead_waits_on_1000_completed_by_16_workers_at_once,
    test_pruning_a_parent_takes_its_edges,
    test_with_the_ledger_off_a_failure_down_the_chain_writes_nothing,
)

__all__ = [
    "test_a_bad_reference_pushes_nothing",
    "test_a_cancelled_parent_fails_its_dependents_and_a_retry_revives_it_alone",
    "test_a_cancelled_parent_fails_its_dependents_in_the_ledger_once",
    "test_a_diamond_pushed_in_one_call_leases_in_dependency_order",
    "test_a_failed_parent_fails_its_descendants",
    "test_a_fan_in_of_1000_unblocks_once_under_16_workers",
    "test_a_lead_pushed_after_a_failed_one_has_its_failed_event",
    "test_a_push_racing_its_parent_s_completion_counts_it_once",
    "test_another_session_s_lead_is_unknown",
    "test_each_lead_failed_down_the_chain_has_one_failed_event",
    "test_one_lead_waits_on_1000_completed_by_16_workers_at_once",
    "test_pruning_a_parent_takes_its_edges",
    "test_with_the_ledger_off_a_failure_down_the_chain_writes_nothing",
]

SESSIONS = 8
CHAIN = 4


@pytest.fixture
async def queue(db: Database) -> Queue:
    """A fresh queue: it reads that it runs on a cluster before its first statement, so its
    ledger is written on the shard by the row trigger from the first push on."""
    queue = Queue(db)
    assert await queue.db.know_topology() == queue.db.topology and queue.sharded
    return queue


async def test_chains_in_sessions_on_both_nodes_end_in_order(
    queue: Queue, database_url: str, settings: Settings
) -> None:
    """A chain a → b → c → d in each of 8 sessions on both worker nodes, leased and completed by
    two API processes at once: each lead is leased only once its parent is done, once, and
    the sessions' ledgers are clean."""
    sessions = [f"s{n}" for n in range(SESSIONS)]
    assert len(set(node_of(database_url, sessions).values())) == 2
    chains = {}
    for session in sessions:
        chain = [NewLead({"n": 0}, key="k0")]
        for n in range(1, CHAIN):
            chain.append(NewLead({"n": n}, key=f"k{n}", after=[{"key": f"k{n - 1}"}]))
        chains[session] = (await queue.push(session, chain)).ids
    async with Database.from_settings(settings, database_url) as other_db:
        queues = [queue, Queue(other_db)]

        async def drain(session: str) -> list[list[int]]:
            rounds = []
            for step in range(CHAIN):
                rounds.append(await finish(queues[step % 2], session))
            return rounds

        rounds = await asyncio.gather(*(drain(session) for session in sessions))
    for session, done in zip(sessions, rounds, strict=True):
        assert done == [[lead_id] for lead_id in chains[session]], session
        found = await report(queue, session)
        assert (found.leads, found.completed, found.leases) == (CHAIN,) * 3, session
        assert found.double_completions == 0 and found.overlapping_leases == 0, session
        assert (await queue.stats(session)).done == CHAIN
