"""Group commit (app/store/group_commit.py, and its use by the queue): calls of one kind that arrive
while one of theirs runs go together as one statement, and every caller still gets exactly
its own answer, its own errors, and the ledger rows the same calls make one by one.

The first tests drive ``Grouper`` with a fake statement; the rest run 32 concurrent callers
on one ``Queue`` against PostgreSQL, each scenario once with group commit and once without
(``group_commit=False``), in two sessions of one database, and compare.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from datetime import timedelta
from itertools import pairwise
from typing import Any

import httpx
import psycopg
import pytest

from app import metrics
from app.config import Settings
from app.domain.lease_tokens import mint
from app.domain.queue import Queue
from app.store.group_commit import Grouper
from app.store.pool import Database, libpq_url
from leaseq.errors import LeaseLost, Unavailable
from leaseq.model import (
    CompleteItem,
    FinalStatus,
    ItemResult,
    Lead,
    Lease,
    NewLead,
    RenewItem,
    SessionSettings,
)
from tests.support import T0, at, fetch, leads, leasing_of
from tests.support.in_process import BASE_URL, database_settings, runtime_of, serving, until

CALLERS = 32
DEADLINE_S = 30.0
NOW = at(5)  # every concurrent call of a scenario: one instant, so they may group
WAITING_ON_A_LOCK = (
    "SELECT FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
)

ASKED = 65  # what the leases of the lease scenario ask for in all


def groups(kind: str) -> tuple[float, float]:
    """How many statements of ``kind`` were sent so far, and how many calls they carried."""
    labels = {"kind": kind}
    sent = metrics.REGISTRY.get_sample_value("leaseq_group_commit_size_count", labels)
    calls = metrics.REGISTRY.get_sample_value("leaseq_group_commit_size_sum", labels)
    return sent or 0.0, calls or 0.0


def since(kind: str, before: tuple[float, float]) -> tuple[int, int]:
    sent, calls = groups(kind)
    return int(sent - before[0]), int(calls - before[1])


async def outcomes(calls: Sequence[Awaitable[Any]]) -> list[Any]:
    """Each call's answer, or its error as ``("error", name)``, all run at once."""
    answers = await asyncio.wait_for(asyncio.gather(*calls, return_exceptions=True), DEADLINE_S)
    return [
        ("error", type(answer).__name__) if isinstance(answer, BaseException) else answer
        for answer in answers
    ]


async def measured(kind: str, calls: Sequence[Awaitable[Any]]) -> tuple[list[Any], tuple[int, int]]:
    """``outcomes(calls)``, and the statements of ``kind`` they took and the calls those carried."""
    before = groups(kind)
    answers = await outcomes(calls)
    return answers, since(kind, before)


async def turns(n: int = 3) -> None:
    """Let the other tasks run ``n`` times round, with no time passing."""
    for _ in range(n):
        await asyncio.sleep(0)


# -- the grouper alone ---------------------------------------------------------------


class Statement:
    """A fake statement: records each group; held until ``release`` when ``hold`` is set."""

    def __init__(self, *, hold: bool = False) -> None:
        self.sent: list[list[int]] = []
        self.gate = asyncio.Event()
        if not hold:
            self.gate.set()
        self.fail: Exception | None = None

    async def __call__(self, key: str, args: Sequence[int]) -> list[int]:
        self.sent.append(list(args))
        await self.gate.wait()
        if self.fail is not None:
            failure, self.fail = self.fail, None
            raise failure
        return [arg * 10 for arg in args]


async def test_a_lone_call_goes_at_once_without_a_timer() -> None:
    statement = Statement()
    grouper: Grouper[str, int, int] = Grouper(statement, max_size=100)
    task = asyncio.create_task(grouper.submit("k", 1))
    # Two turns of the loop and no time: a batching window would still be waiting.
    await asyncio.sleep(0)
    await asyncio.sleep(0)
    assert statement.sent == [[1]]
    assert await task == 10


async def test_calls_that_arrive_while_one_runs_go_together_next() -> None:
    statement = Statement(hold=True)
    sizes: list[int] = []
    grouper: Grouper[str, int, int] = Grouper(statement, max_size=100, on_group=sizes.append)
    first = asyncio.create_task(grouper.submit("k", 0))
    await turns()
    assert statement.sent == [[0]]
    rest = [asyncio.create_task(grouper.submit("k", i)) for i in range(1, CALLERS)]
    other = asyncio.create_task(grouper.submit("another key", 99))  # its own lane: at once
    await turns()
    assert statement.sent == [[0], [99]]  # the rest wait for the statement running
    statement.gate.set()
    assert await first == 0 and await other == 990
    assert [await task for task in rest] == [i * 10 for i in range(1, CALLERS)]
    assert statement.sent == [[0], [99], list(range(1, CALLERS))]
    assert sizes == [1, 1, CALLERS - 1]
    assert (grouper.groups, grouper.grouped) == (3, CALLERS - 1)


async def test_a_failed_statement_fails_its_group_and_no_other() -> None:
    statement = Statement(hold=True)
    grouper: Grouper[str, int, int] = Grouper(statement, max_size=100)
    first = asyncio.create_task(grouper.submit("k", 0))
    await turns()
    group = [asyncio.create_task(grouper.submit("k", i)) for i in (1, 2, 3)]
    await turns()
    statement.fail = Unavailable("database unavailable")
    statement.gate.set()
    with pytest.raises(Unavailable):
        await first
    assert await asyncio.gather(*group) == [10, 20, 30]  # the next group did not fail


async def test_a_caller_cancelled_while_waiting_is_never_sent() -> None:
    statement = Statement(hold=True)
    grouper: Grouper[str, int, int] = Grouper(statement, max_size=100)
    first = asyncio.create_task(grouper.submit("k", 0))
    await turns()
    waiting = [asyncio.create_task(grouper.submit("k", i)) for i in (1, 2, 3)]
    await turns()
    waiting[1].cancel()
    await turns()
    statement.gate.set()
    assert await first == 0
    assert await waiting[0] == 10 and await waiting[2] == 30
    assert waiting[1].cancelled()
    assert statement.sent == [[0], [1, 3]]


async def test_a_caller_cancelled_while_its_group_runs_breaks_no_other() -> None:
    statement = Statement(hold=True)
    grouper: Grouper[str, int, int] = Grouper(statement, max_size=100)
    group = [asyncio.create_task(grouper.submit("k", i)) for i in (1, 2, 3)]
    await turns()
    assert statement.sent == [[1, 2, 3]]
    group[0].cancel()
    await turns()
    after = asyncio.create_task(grouper.submit("k", 4))
    statement.gate.set()
    assert await group[1] == 20 and await group[2] == 30 and await after == 40
    assert group[0].cancelled()


async def test_a_group_is_bounded_by_size_and_by_conflicts() -> None:
    statement = Statement(hold=True)
    grouper: Grouper[str, int, int] = Grouper(
        statement, max_size=5, size=lambda arg: arg, conflicts=lambda arg: {arg % 2}
    )
    first = asyncio.create_task(grouper.submit("k", 9))  # larger than max_size: goes alone
    await turns()
    # 2 and 4 name the same key (even): 4 waits; 3 fits beside 2; 1 would pass 5.
    rest = [asyncio.create_task(grouper.submit("k", i)) for i in (2, 4, 3, 1)]
    await turns()
    statement.gate.set()
    assert await first == 90
    assert await asyncio.gather(*rest) == [20, 40, 30, 10]
    assert statement.sent == [[9], [2, 3], [4, 1]]


# -- the queue: renewals -------------------------------------------------------------


def _queues(db: Database) -> tuple[Queue, Queue]:
    """The same database without group commit, and with it (the default)."""
    return Queue(db, group_commit=False), Queue(db)


async def _held(
    queue: Queue, session: str, *, valid: int, expiring: int, extra: int = 4
) -> list[Lease]:
    """``valid`` leads leased for 60 s and ``expiring`` for 1 s at at(1), in id order; and
    ``extra`` leads left queued."""
    await queue.push(session, leads(valid + expiring + extra), now=T0)
    held = await leasing_of(queue).lease_next(session, "w", max=valid, ttl_s=60, now=at(1))
    held += await leasing_of(queue).lease_next(session, "w", max=expiring, ttl_s=1, now=at(1))
    assert [lease.lead.id for lease in held] == sorted(lease.lead.id for lease in held)
    return held


async def _positions(db: Database, session: str) -> dict[int, int]:
    """Each lead of the session by its position in push order (so two sessions compare)."""
    rows = await fetch(db, "SELECT id FROM leads WHERE session = %(session)s", session=session)
    return {lead_id: n for n, lead_id in enumerate(sorted(row["id"] for row in rows))}


async def _lead_state(db: Database, session: str) -> list[tuple[Any, ...]]:
    """Each lead's state, by its position."""
    position = await _positions(db, session)
    rows = await fetch(
        db,
        "SELECT id, status, owner, attempts, lease_expires_at, checkpoint, result, error"
        " FROM leads WHERE session = %(session)s ORDER BY id",
        session=session,
    )
    return [(position[row.pop("id")], *row.values()) for row in rows]


async def _ledger(db: Database, session: str) -> list[tuple[Any, ...]]:
    """The session's ledger rows, lead by position, in lead then event order."""
    position = await _positions(db, session)
    rows = await fetch(
        db,
        "SELECT lead_id, event, status, attempt, owner, at, expires_at FROM lead_events"
        " WHERE session = %(session)s ORDER BY lead_id, id",
        session=session,
    )
    return [(position[row.pop("lead_id")], *row.values()) for row in rows]


def _renewed(lead_id: int, ttl: float, attempt: int | None = None) -> ItemResult:
    """A renewal's answer; a batch's item carries the lease's attempt (to sign its fence)."""
    return ItemResult(
        lead_id, True, expires_at=NOW + timedelta(seconds=ttl), ttl_s=ttl, attempt=attempt
    )


def _lost(lead_id: int) -> ItemResult:
    return ItemResult(lead_id, False, code=LeaseLost.code)


Scenario = tuple[list[Any], list[Any], tuple[int, int]]


async def _renew_scenario(queue: Queue, session: str) -> Scenario:
    """32 renewals at once: valid ones, lost ones of every kind, batches, bad input, and one
    lead renewed by two callers. Returns the answers, what they expect, and the statements
    sent and the calls they carried (``measured``). Leads are pushed and leased in order, so
    lead ``ids[i]`` is the session's i-th."""
    held = await _held(queue, session, valid=30, expiring=6)
    ids = [lease.lead.id for lease in held]
    tok = [lease.token for lease in held]
    await queue.complete(ids[28], tok[28], now=at(2))
    await queue.cancel(ids[29], now=at(2))

    calls: list[Awaitable[Any]] = []
    expected: list[Any] = []
    for i in range(20):  # valid, each its own ttl; every other one leaves a checkpoint
        checkpoint = {"c": i} if i % 2 == 0 else None
        calls.append(queue.renew(ids[i], tok[i], 10 + i, checkpoint=checkpoint, now=NOW))
        expected.append(_renewed(ids[i], 10 + i))
    calls.append(queue.renew(ids[20], mint("s"), 30, now=NOW))  # a wrong token
    calls.append(queue.renew(ids[30], tok[30], 30, now=NOW))  # expired at at(2)
    calls.append(queue.renew(ids[28], tok[28], 30, now=NOW))  # completed
    calls.append(queue.renew(ids[29], tok[29], 30, now=NOW))  # cancelled
    expected += [("error", "LeaseLost")] * 4
    calls.append(queue.renew(ids[20], tok[20], 0, now=NOW))  # bad input: ttl 0
    expected.append(("error", "InvalidInput"))
    calls.append(
        queue.renew_many(
            [
                RenewItem(ids[21], tok[21], 40),
                RenewItem(ids[31], tok[31], 40),
                RenewItem(ids[22], tok[22], 41, {"b": 1}),
            ],
            now=NOW,
        )
    )
    expected.append([_renewed(ids[21], 40, 1), _lost(ids[31]), _renewed(ids[22], 41, 1)])
    calls.append(
        queue.renew_many(
            [RenewItem(ids[23], tok[23], 42), RenewItem(ids[24], "not the token", 42)], now=NOW
        )
    )
    expected.append([_renewed(ids[23], 42, 1), _lost(ids[24])])
    calls.append(
        queue.renew_many([RenewItem(ids[24], tok[24]), RenewItem(ids[25], tok[25], 43)], now=NOW)
    )
    expected.append([_renewed(ids[24], 300, 1), _renewed(ids[25], 43, 1)])  # the default ttl
    calls.append(queue.renew_many([RenewItem(ids[26], tok[26], 9), RenewItem(0, "t")], now=NOW))
    expected.append(("error", "InvalidInput"))  # one bad item: nothing of the batch renewed
    calls.append(queue.renew(ids[26], tok[26], now=NOW))
    expected.append(_renewed(ids[26], 300))
    # One lead, two callers (a heartbeat and its retry): each is answered with its own ttl.
    calls.append(queue.renew(ids[27], tok[27], 50, checkpoint={"first": True}, now=NOW))
    calls.append(queue.renew(ids[27], tok[27], 51, now=NOW))
    expected += [_renewed(ids[27], 50), _renewed(ids[27], 51)]
    assert len(calls) == CALLERS

    answers, grouping = await measured("renew", calls)
    for i, answer in enumerate(answers):  # a single renewal answers a Renewal
        if not isinstance(answer, (list, tuple)):
            lead_id = expected[i].lead_id
            answers[i] = ItemResult(lead_id, True, expires_at=answer.expires_at, ttl_s=answer.ttl_s)
    return answers, expected, grouping


async def test_32_concurrent_renewals_each_get_their_own_answer(db: Database) -> None:
    plain, grouped = _queues(db)
    answers, expected, (sent, carried) = await _renew_scenario(grouped, "grouped")
    assert answers == expected
    assert carried == CALLERS - 2  # the two refused for bad input never joined
    assert sent < carried  # groups of more than one formed
    assert sent >= 2  # the second renewal of one lead waited for the next group

    plain_answers, plain_expected, plain_grouping = await _renew_scenario(plain, "plain")
    assert plain_grouping == (0, 0)  # without group commit: no group
    assert plain_answers == plain_expected
    # The same leads in the same state, but the lead two callers renewed at once: one by one,
    # either may go last; grouped, the second goes after the first, as it arrived.
    state = await _lead_state(db, "grouped")
    plain_state = await _lead_state(db, "plain")
    assert [s for s in state if s[0] != 27] == [s for s in plain_state if s[0] != 27]
    [twice] = [s for s in state if s[0] == 27]
    assert twice[4] == NOW + timedelta(seconds=51) and twice[5] == {"first": True}
    assert state[0][4:6] == (NOW + timedelta(seconds=10), {"c": 0})
    assert await _ledger(db, "grouped") == await _ledger(db, "plain")


# -- the queue: completions ----------------------------------------------------------


def _finished(lead: Any) -> Any:
    """What a caller is told of its lead, comparable across sessions."""
    if isinstance(lead, Lead):
        return ("lead", lead.id, lead.status, lead.result, lead.error, lead.updated_at)
    return lead


async def _complete_scenario(queue: Queue, session: str) -> Scenario:
    """32 completions at once: valid ones, lost ones of every kind, a completion retried
    while its original runs, batches, bad input."""
    held = await _held(queue, session, valid=30, expiring=6)
    ids = [lease.lead.id for lease in held]
    tok = [lease.token for lease in held]
    await queue.complete(ids[27], tok[27], "done", {"before": True}, now=at(2))
    await queue.complete(ids[28], tok[28], "done", now=at(2))
    await queue.cancel(ids[29], now=at(2))
    statuses: tuple[FinalStatus, ...] = ("done", "failed", "cached")

    calls: list[Awaitable[Any]] = []
    expected: list[Any] = []
    for i in range(16):
        status = statuses[i % 3]
        result = {"i": i} if status != "failed" else None
        error = f"e{i}" if status == "failed" else None
        calls.append(queue.complete(ids[i], tok[i], status, result, error, now=NOW))
        expected.append(("lead", ids[i], status, result, error, NOW))
    calls.append(queue.complete(ids[16], mint("s"), now=NOW))  # a wrong token
    calls.append(queue.complete(ids[30], tok[30], now=NOW))  # expired
    calls.append(queue.complete(ids[28], tok[28], "failed", now=NOW))  # done before, not failed
    calls.append(queue.complete(ids[29], tok[29], now=NOW))  # cancelled
    expected += [("error", "LeaseLost")] * 4
    # Done before with this status: the same completion again is answered as it was.
    calls.append(queue.complete(ids[27], tok[27], "done", {"before": True}, now=NOW))
    expected.append(("lead", ids[27], "done", {"before": True}, None, at(2)))
    # A completion retried while its original runs: both are told it is done.
    for _ in range(2):
        calls.append(queue.complete(ids[17], tok[17], "done", {"r": 1}, now=NOW))
        expected.append(("lead", ids[17], "done", {"r": 1}, None, NOW))
    calls.append(queue.complete(ids[18], tok[18], "bogus", now=NOW))  # type: ignore[arg-type]
    calls.append(queue.complete(ids[18], tok[18], "failed", error="x" * 100_000, now=NOW))
    expected += [("error", "InvalidInput")] * 2
    calls.append(
        queue.complete_many(
            [
                CompleteItem(ids[18], tok[18], "done", {"b": 18}),
                CompleteItem(ids[31], tok[31]),
                CompleteItem(ids[19], tok[19], "failed", error="b19"),
            ],
            now=NOW,
        )
    )
    expected.append([ItemResult(ids[18], True), _lost(ids[31]), ItemResult(ids[19], True)])
    calls.append(
        queue.complete_many(
            [CompleteItem(ids[20], tok[20], "cached"), CompleteItem(ids[20], tok[20], "cached")],
            now=NOW,
        )
    )
    expected.append([ItemResult(ids[20], True), ItemResult(ids[20], True)])
    calls.append(
        queue.complete_many(
            [CompleteItem(ids[21], tok[21]), CompleteItem(ids[22], "not the token")], now=NOW
        )
    )
    expected.append([ItemResult(ids[21], True), _lost(ids[22])])
    # The retried completion a third time, in a batch, and a batch with one bad item.
    calls.append(queue.complete_many([CompleteItem(ids[17], tok[17], "done", {"r": 1})], now=NOW))
    expected.append([ItemResult(ids[17], True)])
    calls.append(
        queue.complete_many([CompleteItem(ids[23], tok[23]), CompleteItem(-1, "t")], now=NOW)
    )
    expected.append(("error", "InvalidInput"))
    for i in (22, 24):
        calls.append(queue.complete(ids[i], tok[i], "done", now=NOW))
        expected.append(("lead", ids[i], "done", None, None, NOW))
    assert len(calls) == CALLERS

    answers, grouping = await measured("complete", calls)
    return [_finished(answer) for answer in answers], expected, grouping


async def test_32_concurrent_completions_each_get_their_own_answer(db: Database) -> None:
    plain, grouped = _queues(db)
    answers, expected, (sent, carried) = await _complete_scenario(grouped, "grouped")
    assert answers == expected
    assert carried == CALLERS - 3  # the three refused for bad input never joined
    assert sent < carried

    plain_answers, plain_expected, plain_grouping = await _complete_scenario(plain, "plain")
    assert plain_grouping == (0, 0)
    assert plain_answers == plain_expected
    assert await _lead_state(db, "grouped") == await _lead_state(db, "plain")
    ledger = await _ledger(db, "grouped")
    assert ledger == await _ledger(db, "plain")
    assert [row[1] for row in ledger if row[0] == 17] == ["pushed", "leased", "completed"]


async def test_a_completion_whose_row_is_locked_waits_alone_and_the_rest_go_on(
    db: Database, database_url: str
) -> None:
    """A completion of a row another transaction holds is skipped by its group and sent again
    alone, which waits for the lock; the 31 that come meanwhile go as one statement and are
    answered while the lock is still held."""
    queue = Queue(db)
    await queue.push("s", leads(CALLERS), now=T0)
    held = await leasing_of(queue).lease_next("s", "w", max=CALLERS, ttl_s=60, now=at(1))
    before = groups("complete")
    async with await psycopg.AsyncConnection.connect(libpq_url(database_url)) as blocker:
        async with blocker.transaction():
            await blocker.execute("SELECT FROM leads WHERE id = %s FOR UPDATE", [held[0].lead.id])
            first = asyncio.create_task(queue.complete(held[0].lead.id, held[0].token, now=NOW))

            async def waiting_on_the_lock() -> bool:
                return bool(await fetch(db, WAITING_ON_A_LOCK))

            await until(waiting_on_the_lock, within_s=DEADLINE_S)
            assert since("complete", before) == (1, 1)  # its group; the wait is its own
            rest = [queue.complete(lease.lead.id, lease.token, now=NOW) for lease in held[1:]]
            done = await asyncio.wait_for(asyncio.gather(*rest), DEADLINE_S)
            assert [lead.status for lead in done] == ["done"] * (CALLERS - 1)
            assert since("complete", before) == (2, CALLERS)  # the 31 went as one
            assert not first.done()
        lead = await asyncio.wait_for(first, DEADLINE_S)
    assert lead.status == "done"
    assert since("complete", before) == (2, CALLERS)  # sent again alone, outside the groups


async def test_a_lone_call_on_an_idle_queue_goes_alone(queue: Queue) -> None:
    await queue.push("s", leads(1), now=T0)
    [lease] = await leasing_of(queue).lease_next("s", "w", ttl_s=60, now=at(1))
    before = groups("renew")
    renewal = await queue.renew(lease.lead.id, lease.token, 20, now=NOW)
    assert renewal.ttl_s == 20
    assert since("renew", before) == (1, 1)


async def test_a_failed_statement_reaches_every_caller_of_its_group(
    database_url: str, settings: Settings
) -> None:
    db = Database.from_settings(settings, database_url)
    await db.open()
    await db.close()  # every statement now fails: Unavailable
    queue = Queue(db)
    answers = await outcomes(
        [queue.renew(i, "token", 10, now=NOW) for i in range(1, CALLERS // 2 + 1)]
        + [queue.complete(i, "token", now=NOW) for i in range(1, CALLERS // 2 + 1)]
    )
    assert answers == [("error", "Unavailable")] * CALLERS


# -- the queue: leases ---------------------------------------------------------------


async def _lease_scenario(
    queue: Queue, session: str
) -> tuple[list[int], list[Any], dict[int, tuple[str, float]], tuple[int, int]]:
    """32 leases of one session at once, asking 65 leads (ASKED) of 84 (4 of them delayed and due,
    of the highest priority), one with a key (it goes alone), one with bad input.
    Returns the pushed ids, the answers, each caller's owner and ttl, and the grouping."""
    pushed = await queue.push(
        session, [NewLead({"i": i}, priority=i % 5) for i in range(80)], now=T0
    )
    due = await queue.push(session, leads(4, priority=9, delay_s=2), now=T0)
    ids = pushed.ids + due.ids
    calls: list[Awaitable[Any]] = []
    holders: dict[int, tuple[str, float]] = {}
    for k in range(CALLERS - 2):
        owner, ttl = f"w{k}", 10.0 + k
        holders[k] = owner, ttl
        calls.append(
            leasing_of(queue).lease_next(session, owner, max=1 + k % 3, ttl_s=ttl, now=NOW)
        )
    holders[30] = "keyed", 99.0
    key = f"key-{session}"  # a key stands for one request
    calls.append(
        leasing_of(queue).lease_next(
            session, "keyed", max=5, ttl_s=99, idempotency_key=key, now=NOW
        )
    )
    calls.append(leasing_of(queue).lease_next(session, "bad", max=0, now=NOW))
    answers, grouping = await measured("lease", calls)
    return ids, answers, holders, grouping


async def test_32_concurrent_leases_of_one_session_each_get_their_own(db: Database) -> None:
    plain, grouped = _queues(db)
    ids, answers, holders, (sent, carried) = await _lease_scenario(grouped, "grouped")
    assert carried == CALLERS - 2  # the keyed lease went alone, the bad one nowhere
    assert sent < carried

    plain_ids, plain_answers, _, plain_grouping = await _lease_scenario(plain, "plain")
    assert plain_grouping == (0, 0)
    for session, answer_list, pushed in (
        ("grouped", answers, ids),
        ("plain", plain_answers, plain_ids),
    ):
        assert answer_list[-1] == ("error", "InvalidInput")
        taken: dict[int, tuple[str, float]] = {}
        for k, leases in enumerate(answer_list[:-1]):
            owner, ttl = holders[k]
            assert len(leases) == (5 if k == 30 else 1 + k % 3)  # ASKED of 84
            for lease in leases:
                assert (lease.owner, lease.ttl_s, lease.attempt) == (owner, ttl, 1)
                assert lease.expires_at == NOW + timedelta(seconds=ttl)
                assert lease.lead.session == session
                assert lease.lead.id not in taken  # each lead to one caller
                taken[lease.lead.id] = owner, ttl
            order = [(-lease.lead.priority, lease.lead.id) for lease in leases]
            assert order == sorted(order)
        assert set(taken) <= set(pushed) and len(taken) == ASKED
        if session == "grouped":
            # One statement for the callers without a key: each caller's leads come after
            # those of the callers before it, by priority then id.
            rank = {row["id"]: n for n, row in enumerate(await _ranked(db, session))}
            ranks = [[rank[lease.lead.id] for lease in leases] for leases in answer_list[:30]]
            assert all(max(a) < min(b) for a, b in pairwise(ranks))
            # The due delayed leads (the best) were leased, by the group or the keyed lease.
            assert set(pushed[-4:]) <= set(taken)
        ledger = await fetch(
            db,
            "SELECT lead_id, owner, expires_at, attempt FROM lead_events"
            " WHERE session = %(session)s AND event = 'leased'",
            session=session,
        )
        assert {row["lead_id"]: (row["owner"], row["expires_at"]) for row in ledger} == {
            lead_id: (owner, NOW + timedelta(seconds=ttl))
            for lead_id, (owner, ttl) in taken.items()
        }
        assert len(ledger) == ASKED


async def _ranked(db: Database, session: str) -> list[dict[str, Any]]:
    """The session's leads, best first (priority, then id)."""
    return await fetch(
        db,
        "SELECT id FROM leads WHERE session = %(session)s ORDER BY priority DESC, id",
        session=session,
    )


async def test_grouped_leases_of_a_capped_session_hold_its_cap(db: Database) -> None:
    queue = Queue(db)
    await queue.push("capped", leads(40), now=T0)
    await queue.put_settings("capped", SessionSettings(max_leased=5))
    answers = await outcomes(
        [leasing_of(queue).lease_next("capped", f"w{k}", ttl_s=60, now=NOW) for k in range(CALLERS)]
    )
    assert sorted(len(leases) for leases in answers) == [0] * (CALLERS - 5) + [1] * 5
    assert (await queue.stats("capped")).leased == 5


# -- through HTTP --------------------------------------------------------------------


async def test_32_http_clients_lease_renew_and_complete_at_once(database_url: str) -> None:
    settings = Settings(
        **database_settings(database_url),
        allowed_hosts="leaseq.test",
        pool_size=10,
        statement_timeout_ms=30_000,
        sweep_interval_s=3600,
    )
    before = {kind: groups(kind) for kind in ("lease", "renew", "complete")}
    async with serving(settings) as first:
        transport = httpx.ASGITransport(app=first.app)  # type: ignore[attr-defined]
        clients = [httpx.AsyncClient(transport=transport, base_url=BASE_URL) for _ in range(32)]
        try:
            pushed = await first.post(
                "/sessions/h/leads", json={"leads": [{"payload": {"i": i}} for i in range(64)]}
            )
            assert pushed.status_code == 201

            async def lease(k: int, client: httpx.AsyncClient) -> list[dict[str, Any]]:
                body = {"session": "h", "owner": f"w{k}", "max": 2, "ttl_s": 60}
                answer = await client.post("/lease", json=body)
                assert answer.status_code == 200, answer.text
                leases: list[dict[str, Any]] = answer.json()["leases"]
                assert all(lease["owner"] == f"w{k}" for lease in leases)
                return leases

            held = await asyncio.gather(*(lease(k, c) for k, c in enumerate(clients)))
            assert sorted(len(leases) for leases in held) == [2] * 32
            assert len({lease["lead"]["id"] for leases in held for lease in leases}) == 64

            def lost(k: int) -> bool:  # these clients send a wrong token first
                return k % 8 == 3

            async def first_wave(k: int, client: httpx.AsyncClient) -> None:
                lease = held[k][0]
                token = mint("s") if lost(k) else lease["token"]
                body = {"lead_id": lease["lead"]["id"], "token": token}
                if k % 2 == 0:
                    answer = await client.post("/renew", json={**body, "ttl_s": 30 + k})
                    assert answer.status_code == 200, answer.text
                    assert answer.json()["ttl_s"] == 30 + k
                else:
                    answer = await client.post("/complete", json={**body, "result": {"k": k}})
                    if lost(k):
                        assert answer.status_code == 409, answer.text
                        assert answer.json()["code"] == "lease_lost"
                    else:
                        assert answer.status_code == 200, answer.text
                        lead = answer.json()["lead"]
                        assert (lead["status"], lead["result"]) == ("done", {"k": k})

            await asyncio.gather(*(first_wave(k, c) for k, c in enumerate(clients)))

            async def second_wave(k: int, client: httpx.AsyncClient) -> None:
                items = [{"lead_id": h["lead"]["id"], "token": h["token"]} for h in held[k]]
                if k % 2 == 0:
                    answer = await client.post("/complete/batch", json={"items": items})
                    assert answer.status_code == 200, answer.text
                    assert [r["ok"] for r in answer.json()["results"]] == [True, True]
                else:
                    answer = await client.post("/renew/batch", json={"items": items})
                    assert answer.status_code == 200, answer.text
                    # The first lead was completed (but by the client whose token was wrong).
                    assert [r["ok"] for r in answer.json()["results"]] == [lost(k), True]

            await asyncio.gather(*(second_wave(k, c) for k, c in enumerate(clients)))
            counts = await runtime_of(first).queue.stats("h")
            assert (counts.done, counts.leased) == (16 * 2 + 16 - 4, 16 + 4)
        finally:
            for client in clients:
                await client.aclose()
    for kind, was in before.items():
        sent, carried = since(kind, was)
        assert carried >= 32 and sent < carried, kind  # groups of more than one formed
