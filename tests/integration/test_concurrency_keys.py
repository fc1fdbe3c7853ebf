"""Concurrency keys: ``max_leased_per_key`` holds across workers and pools, checked from the ledger.

Two pools with a leasing each stand for two API processes; their workers lease at once
on many connections, on the database clock. The cap is checked where it must hold: in the
ledger's lease intervals (from ``leased`` to the event that ended the attempt), never in
what a worker believes.
"""

from __future__ import annotations

import asyncio
import re
from collections import defaultdict
from datetime import datetime

from app.config import Settings
from app.domain.queue import Queue
from app.domain.report import report as session_report
from app.store import statements
from app.store.pool import Database
from app.store.statements.fragments import DB_CLOCK
from leaseq.model import CompleteItem, NewLead, SessionSettings
from tests.support import T0, at, fetch, lease_from

KEYS = 50
PER_KEY = 8
CAP = 2
WORKERS = 16


async def _work(queue: Queue, owner: str, batch: int) -> int:
    """Lease and complete until three leases in a row find nothing; returns leads done."""
    done = idle = 0
    while idle < 3:
        leases = (await lease_from(queue, "crawl", owner, max=batch, ttl_s=60)).leases
        if not leases:
            idle += 1
            await asyncio.sleep(0.01)
            continue
        idle = 0
        await asyncio.sleep(0.002)  # the work: other workers lease meanwhile
        results = await queue.complete_many([CompleteItem(x.lead.id, x.token) for x in leases])
        assert all(result.ok for result in results)
        done += len(leases)
    return done


def _most_at_once(spans: list[tuple[datetime, datetime]]) -> int:
    """The most spans [start, end) that overlap at any instant."""
    points = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    held = most = 0
    for _, step in points:  # an end sorts before a start at the same instant (-1 < 1)
        held += step
        most = max(most, held)
    return most


async def test_the_cap_per_key_holds_across_sixteen_workers_and_two_pools(
    queue: Queue, db: Database, database_url: str, settings: Settings
) -> None:
    await queue.put_settings("crawl", SessionSettings(max_leased_per_key=CAP))
    # Each key's leads side by side in leasing order: every lease meets keys at their cap.
    pushed = [
        NewLead({"key": k, "n": n}, concurrency_key=f"domain-{k}")
        for k in range(KEYS)
        for n in range(PER_KEY)
    ]
    await queue.push("crawl", pushed)
    async with Database.from_settings(settings, database_url) as other_db:
        other = Queue(other_db)
        queues = [queue, other]
        done = await asyncio.gather(
            *(_work(queues[i % 2], f"w{i}", 1 + i % 3) for i in range(WORKERS))
        )
    assert sum(done) == KEYS * PER_KEY
    spans: dict[str, list[tuple[datetime, datetime]]] = defaultdict(list)
    rows = await fetch(
        db,
        """
SELECT l.concurrency_key AS key, s.at AS start, e.at AS end_at
FROM lead_events AS s
JOIN lead_events AS e ON e.session = s.session AND e.lead_id = s.lead_id
     AND e.attempt = s.attempt AND e.event IN ('completed', 'released', 'expired')
JOIN leads AS l ON l.session = s.session AND l.id = s.lead_id
WHERE s.session = 'crawl' AND s.event = 'leased'
""",
    )
    assert len(rows) == KEYS * PER_KEY  # one lease per lead, each ended by its completion
    for row in rows:
        spans[row["key"]].append((row["start"], row["end_at"]))
    most = {key: _most_at_once(held) for key, held in spans.items()}
    assert max(most.values()) <= CAP, most
    assert max(most.values()) == CAP  # the cap was reached, not just never approached
    report = await session_report(queue, "crawl")
    assert report.completed == KEYS * PER_KEY and report.double_completions == 0
    assert report.overlapping_leases == 0


async def test_a_key_at_its_cap_holds_up_no_other_key(queue: Queue) -> None:
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    hot = [NewLead({}, priority=9, concurrency_key="hot") for _ in range(50)]
    await queue.push("s", [*hot, NewLead({}, concurrency_key="cold"), NewLead({})], now=T0)
    first = (await lease_from(queue, "s", "w", now=T0)).leases
    assert [lease.lead.concurrency_key for lease in first] == ["hot"]
    # the hot key is at its cap: the next leases take the other key and the keyless lead
    rest = (await lease_from(queue, "s", "w", max=5, now=at(1))).leases
    assert sorted(str(lease.lead.concurrency_key) for lease in rest) == ["None", "cold"]
    assert (await lease_from(queue, "s", "w", max=5, now=at(2))).leases == []
    # one batch never takes more of a key than its room
    await queue.complete_many([CompleteItem(first[0].lead.id, first[0].token)], now=at(3))
    again = (await lease_from(queue, "s", "w", max=5, now=at(4))).leases
    assert [lease.lead.concurrency_key for lease in again] == ["hot"]


async def test_an_expired_lease_not_yet_swept_still_counts(queue: Queue) -> None:
    await queue.put_settings("s", SessionSettings(max_leased_per_key=1), now=T0)
    await queue.push("s", [NewLead({}, concurrency_key="k") for _ in range(2)], now=T0)
    assert len((await lease_from(queue, "s", "w", ttl_s=5, now=T0)).leases) == 1
    assert (await lease_from(queue, "s", "w", now=at(10))).leases == []
    await queue.sweep("s", now=at(10))
    assert len((await lease_from(queue, "s", "w", now=at(10))).leases) == 1


async def test_a_keyed_lease_counts_the_leased_leads_by_their_index(db: Database) -> None:
    """The count per key reads a partial index of leased leads, one key at a time (the keys
    the claim meets), and the claim is the ordered scan of ``leads_ready``: the session's
    waiting leads are never read to count, nor every key it holds."""
    await db.rows(
        """
INSERT INTO leads (session, payload, concurrency_key, status, attempts, owner, lease_token,
                   lease_expires_at)
SELECT 's', '{}', 'k' || (n %% 10000),
       CASE WHEN n %% 100 = 0 THEN 'leased' ELSE 'queued' END,
       CASE WHEN n %% 100 = 0 THEN 1 ELSE 0 END,
       CASE WHEN n %% 100 = 0 THEN 'w' END,
       CASE WHEN n %% 100 = 0 THEN md5(n::text) END,
       CASE WHEN n %% 100 = 0 THEN now() + interval '1 hour' END
FROM generate_series(1, 50000) AS n
""",
        {},
    )
    await db.rows("INSERT INTO session_settings (session, max_leased_per_key) VALUES ('s', 2)", {})
    await db.rows("ANALYZE leads", {})
    params = {"session": "s", "owner": "w", "max": 10, "ttl_s": 60.0, "now": DB_CLOCK}
    params["ledger_by_row"] = False
    params["api_token"] = None
    params["tokens"] = [f"t{i}" for i in range(10)]
    query = statements.text("lease_limited", ledger=True)
    plan = "\n".join(row["QUERY PLAN"] for row in await db.rows(f"EXPLAIN {query}", params))
    claiming = plan[plan.index("CTE ready") : plan.index("CTE due")]
    assert "Index Scan using leads_ready on leads" in claiming, claiming
    # each key the claim meets: a probe of leased leads by session and key
    counted = re.findall(r"Index (?:Only )?Scan using (\w+) on leads h", plan)
    assert counted and set(counted) == {"leads_leased_keys"}, plan
    assert "Index Cond: ((session = 's'::text) AND (concurrency_key = " in plan, plan
    assert "Seq Scan on leads" not in plan, plan
