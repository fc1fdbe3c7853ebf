"""Flow control on the cluster: every test of one PostgreSQL's pause, cooldown and maximum
runtime (``tests/integration/test_flow_control.py``) and of its concurrency keys
(``tests/integration/test_concurrency_keys.py``, ``tests/integration/test_parked_keys.py``),
each on a fresh database of the cluster
(this folder's ``database_url``), and the cap per key under 16 workers of two pools.

Left out: the plan of a keyed lease (an ``EXPLAIN`` of one PostgreSQL; on the cluster
``tests/citus/test_routing.py`` checks that ``lease_limited`` runs on one shard), and the
cap read from the ledger's lease intervals. The coordinator takes a statement's instant
before a worker node takes its snapshot, so a ``leased`` row's ``at`` may precede the
completion whose slot it took by that moment (docs/scaling.md, "The clock on a cluster").
Here the cap is checked where it holds: in what the database has committed, read again and
again while the workers lease.
"""

from __future__ import annotations

import asyncio

from app.config import Settings
from app.domain.queue import Queue
from app.domain.report import report
from app.store.pool import Database
from leaseq.model import NewLead, SessionSettings
from tests.integration.test_concurrency_keys import (
    CAP,
    KEYS,
    WORKERS,
    _work,
    test_a_key_at_its_cap_holds_up_no_other_key,
    test_an_expired_lease_not_yet_swept_still_counts,
)
from tests.integration.test_flow_control import (
    test_a_heartbeat_cannot_keep_a_lead_past_its_maximum_runtime,
    test_a_lease_across_sessions_skips_a_paused_one,
    test_a_limited_session_paused_leases_nothing,
    test_a_lost_lease_cannot_throttle_and_bad_throttles_change_nothing,
    test_a_pause_binds_a_lease_through_another_connection_pool,
    test_a_pause_for_a_time_ends_on_the_database_clock,
    test_a_paused_session_leases_nothing_and_its_held_leases_go_on,
    test_a_throttle_never_shortens_a_pause,
    test_a_throttled_release_pauses_the_session_and_spends_no_attempt,
    test_hostile_flow_fields_of_a_push_write_nothing,
    test_hostile_flow_settings_store_nothing,
    test_hostile_pauses_are_refused,
    test_the_session_default_runtime_and_a_short_one_bound_the_lease_itself,
)
from tests.integration.test_parked_keys import (
    test_a_change_of_settings_brings_back_every_parked_lead,
    test_a_full_keys_backlog_is_parked_once_and_comes_back_as_the_key_frees_room,
    test_a_key_that_freed_room_gives_its_session_work_in_the_fleets_view,
    test_a_lead_brought_back_keeps_its_time_and_leases_in_its_order,
    test_a_lease_never_waits_for_a_free_being_written,
    test_a_lease_that_ends_while_its_key_is_parked_brings_the_key_back,
    test_a_session_without_a_cap_parks_nothing_and_its_frees_are_forgotten,
    test_every_way_a_keyed_lease_ends_brings_its_key_back,
    test_no_key_keeps_room_with_its_leads_parked_under_load,
)
from tests.support import fetch

__all__ = [
    "test_a_change_of_settings_brings_back_every_parked_lead",
    "test_a_full_keys_backlog_is_parked_once_and_comes_back_as_the_key_frees_room",
    "test_a_heartbeat_cannot_keep_a_lead_past_its_maximum_runtime",
    "test_a_key_at_its_cap_holds_up_no_other_key",
    "test_a_key_that_freed_room_gives_its_session_work_in_the_fleets_view",
    "test_a_lead_brought_back_keeps_its_time_and_leases_in_its_order",
    "test_a_lease_across_sessions_skips_a_paused_one",
    "test_a_lease_never_waits_for_a_free_being_written",
    "test_a_lease_that_ends_while_its_key_is_parked_brings_the_key_back",
    "test_a_limited_session_paused_leases_nothing",
    "test_a_lost_lease_cannot_throttle_and_bad_throttles_change_nothing",
    "test_a_pause_binds_a_lease_through_another_connection_pool",
    "test_a_pause_for_a_time_ends_on_the_database_clock",
    "test_a_paused_session_leases_nothing_and_its_held_leases_go_on",
    "test_a_session_without_a_cap_parks_nothing_and_its_frees_are_forgotten",
    "test_a_throttle_never_shortens_a_pause",
    "test_a_throttled_release_pauses_the_session_and_spends_no_attempt",
    "test_an_expired_lease_not_yet_swept_still_counts",
    "test_every_way_a_keyed_lease_ends_brings_its_key_back",
    "test_hostile_flow_fields_of_a_push_write_nothing",
    "test_hostile_flow_settings_store_nothing",
    "test_hostile_pauses_are_refused",
    "test_no_key_keeps_room_with_its_leads_parked_under_load",
    "test_the_session_default_runtime_and_a_short_one_bound_the_lease_itself",
]

PER_KEY = 6
MOST_HELD = """
SELECT coalesce(max(n), 0) AS most FROM (
    SELECT count(*) AS n FROM leads
    WHERE session = 'crawl' AND status = 'leased' AND concurrency_key IS NOT NULL
    GROUP BY concurrency_key
) AS held
"""


async def test_the_cap_per_key_holds_in_what_the_cluster_commits(
    queue: Queue, db: Database, database_url: str, settings: Settings
) -> None:
    """16 workers of two pools over 50 keys with ``max_leased_per_key = 2``: no committed state
    of the session, read over and over while they lease, holds more than 2 leads of one key,
    and some hold 2; every lead is done once."""
    await queue.put_settings("crawl", SessionSettings(max_leased_per_key=CAP))
    pushed = [
        NewLead({"key": k, "n": n}, concurrency_key=f"domain-{k}")
        for k in range(KEYS)
        for n in range(PER_KEY)
    ]
    await queue.push("crawl", pushed)
    seen: list[int] = []
    draining = True

    async def watch() -> None:
        while draining:
            [row] = await fetch(db, MOST_HELD)
            seen.append(row["most"])

    watcher = asyncio.create_task(watch())
    async with Database.from_settings(settings, database_url) as other_db:
        queues = [queue, Queue(other_db)]
        done = await asyncio.gather(
            *(_work(queues[i % 2], f"w{i}", 1 + i % 3) for i in range(WORKERS))
        )
    draining = False
    await watcher
    assert sum(done) == KEYS * PER_KEY
    assert seen and max(seen) == CAP, sorted(set(seen))
    found = await report(queue, "crawl")
    assert found.completed == KEYS * PER_KEY and found.double_completions == 0
    assert found.overlapping_leases == 0
