"""A stateful property test of the lease state machine against a tiny in-memory model.

Hypothesis drives random pushes, leases, renewals, completions, releases,
sweeps, cancels, retries and clock moves (the ``now=`` of every call) against
the real queue, and after every step checks the database against the model
and the contract's invariants (docs/contract.md#invariants):

1. at most one valid lease per lead;
2. only a valid lease renews, completes or releases (the model knows which are),
   but the same completion sent again is answered as the first;
7. a release on the last attempt fails the lead;
4. a terminal lead never changes, except by retry of a failed one;
   attempts only grow; the counts match; the ledger agrees.

The queue is async; the machine is sync and keeps an asyncio.Runner.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, ClassVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
    run_state_machine_as_test,
)

from app.config import Settings
from app.domain.queue import Queue
from app.store.pool import Database
from leaseq.errors import Conflict, LeaseLost
from leaseq.model import FINAL_STATUSES, CompleteItem, Counts, NewLead, RenewItem, SweepResult
from tests.support import T0, TICK, leasing_of

SESSIONS = ("a", "b")
TTLS = (5, 10, 60)
STEPS = (TICK, timedelta(seconds=1), timedelta(seconds=5) - TICK, timedelta(seconds=5))
STEPS += (timedelta(seconds=10), timedelta(seconds=61))


@dataclass
class Model:
    """What the queue should hold for one lead."""

    id: int
    session: str
    priority: int
    key: str | None
    status: str = "queued"
    attempts: int = 0
    max_attempts: int = 5
    owner: str | None = None
    token: str | None = None
    expires_at: datetime | None = None
    available_at: datetime = T0

    def valid(self, token: str, now: datetime) -> bool:
        """A valid lease (docs/contract.md#invariant-2): leased, this token, before its expiry."""
        assert self.expires_at is not None or self.status != "leased"
        return (
            self.status == "leased"
            and self.token == token
            and self.expires_at is not None
            and now < self.expires_at
        )

    def row(self) -> tuple[Any, ...]:
        return (
            self.session,
            self.priority,
            self.key,
            self.status,
            self.attempts,
            self.max_attempts,
            self.owner,
            self.token,
            self.expires_at,
            self.available_at,
        )


class LeaseMachine(RuleBasedStateMachine):
    database_url: ClassVar[str]

    leases = Bundle("leases")
    lead_ids = Bundle("lead_ids")

    def __init__(self) -> None:
        super().__init__()
        self.runner = asyncio.Runner()
        self.queue = self.runner.run(self._start())
        self.now = T0
        self.leads: dict[int, Model] = {}
        self.issued: list[tuple[int, str]] = []  # every lease handed out, stale ones too
        self.last_retry: int | None = None  # the lead the last step retried, if any
        self.seen_attempts: dict[int, int] = {}
        self.seen_status: dict[int, str] = {}
        self.owners = 0

    async def _start(self) -> Queue:
        db = Database.from_settings(
            Settings(statement_timeout_ms=30_000), self.database_url, pool_size=2
        )
        await db.rows("TRUNCATE leads, lead_events RESTART IDENTITY")
        return Queue(db)

    def teardown(self) -> None:
        try:
            self.runner.run(self.queue.db.close())
        finally:
            self.runner.close()

    def run(self, coro: Any) -> Any:
        self.last_retry = None
        return self.runner.run(coro)

    # -- rules -----------------------------------------------------------------

    @initialize(target=lead_ids)
    def start_with_work(self) -> Any:
        ids = [
            lead_id
            for s in SESSIONS
            for lead_id in self._push(s, [(0, None, 1, 0), (1, None, 2, 0)])
        ]
        return multiple(*ids)

    @rule(
        target=lead_ids,
        session=st.sampled_from(SESSIONS),
        batch=st.lists(
            st.tuples(
                st.integers(0, 2),
                st.none() | st.sampled_from(["k1", "k2", "k3"]),
                st.sampled_from([None, 1, 2]),
                st.sampled_from([0, 5]),
            ),
            min_size=1,
            max_size=4,
        ),
    )
    def push(self, session: str, batch: list[tuple[int, str | None, int | None, int]]) -> Any:
        return multiple(*self._push(session, batch))

    def _push(
        self, session: str, batch: list[tuple[int, str | None, int | None, int]]
    ) -> list[int]:
        new = [
            NewLead({"n": i}, priority=p, key=k, max_attempts=m, delay_s=d)
            for i, (p, k, m, d) in enumerate(batch)
        ]
        result = self.run(self.queue.push(session, new, now=self.now))
        assert len(result.ids) == len(new)
        by_key = {m.key: m.id for m in self.leads.values() if m.session == session and m.key}
        created = []
        for lead_id, lead in zip(result.ids, new, strict=True):
            if lead.key is not None and lead.key in by_key:
                assert lead_id == by_key[lead.key]  # the existing id stands in its place
                continue
            assert lead_id not in self.leads
            created.append(lead_id)
            self.leads[lead_id] = Model(
                lead_id,
                session,
                lead.priority,
                lead.key,
                max_attempts=lead.max_attempts or self.queue.default_max_attempts,
                available_at=self.now + timedelta(seconds=lead.delay_s),
            )
            if lead.key is not None:
                by_key[lead.key] = lead_id
        assert created == sorted(created)
        assert (result.created, result.duplicates) == (len(created), len(new) - len(created))
        return created

    @rule(
        target=leases,
        session=st.sampled_from(SESSIONS),
        max_=st.integers(1, 3),
        ttl=st.sampled_from(TTLS),
    )
    def lease(self, session: str, max_: int, ttl: int) -> Any:
        self.owners += 1
        owner = f"w{self.owners}"
        got = self.run(
            leasing_of(self.queue).lease_next(session, owner, max=max_, ttl_s=ttl, now=self.now)
        )
        available = [
            m
            for m in self.leads.values()
            if m.session == session and m.status == "queued" and m.available_at <= self.now
        ]
        expected = sorted(available, key=lambda m: (-m.priority, m.id))[:max_]
        assert [lease.lead.id for lease in got] == [m.id for m in expected]
        for lease, m in zip(got, expected, strict=True):
            m.status, m.attempts, m.owner = "leased", m.attempts + 1, owner
            m.token, m.expires_at = lease.token, self.now + timedelta(seconds=ttl)
            assert lease.ttl_s == ttl
            assert (lease.attempt, lease.owner, lease.expires_at) == (
                m.attempts,
                owner,
                m.expires_at,
            )
            self.issued.append((m.id, lease.token))
        return multiple(*[(lease.lead.id, lease.token) for lease in got])

    @rule(lease=leases, ttl=st.sampled_from(TTLS), batch=st.booleans())
    def renew(self, lease: tuple[int, str], ttl: int, batch: bool) -> None:
        lead_id, token = lease
        m = self.leads[lead_id]
        valid = m.valid(token, self.now)
        if batch:
            [answer] = self.run(
                self.queue.renew_many([RenewItem(lead_id, token, ttl)], now=self.now)
            )
            ok, expires_at = answer.ok, answer.expires_at
            assert answer.code == (None if ok else "lease_lost")
        else:
            try:
                renewal = self.run(self.queue.renew(lead_id, token, ttl, now=self.now))
                ok, expires_at = True, renewal.expires_at
                assert renewal.ttl_s == ttl
            except LeaseLost:
                ok, expires_at = False, None
        assert ok == valid
        if valid:
            m.expires_at = self.now + timedelta(seconds=ttl)
            assert expires_at == m.expires_at

    @rule(lease=leases, status=st.sampled_from(["done", "failed", "cached"]), batch=st.booleans())
    def complete(self, lease: tuple[int, str], status: str, batch: bool) -> None:
        lead_id, token = lease
        m = self.leads[lead_id]
        valid = m.valid(token, self.now)
        # The same completion again (same lease, same status) is answered as the first was.
        again = m.status == status and m.token == token
        if batch:
            item = CompleteItem(lead_id, token, status)  # type: ignore[arg-type]
            [answer] = self.run(self.queue.complete_many([item], now=self.now))
            ok = answer.ok
        else:
            try:
                lead = self.run(self.queue.complete(lead_id, token, status, now=self.now))
                ok = True
                assert lead.status == status
            except LeaseLost:
                ok = False
        assert ok == (valid or again)
        if valid:  # the finished lead keeps the token that completed it
            m.status, m.expires_at = status, None

    @rule(lease=leases, delay=st.sampled_from([0, 5]))
    def release(self, lease: tuple[int, str], delay: int) -> None:
        lead_id, token = lease
        m = self.leads[lead_id]
        valid = m.valid(token, self.now)
        try:
            self.run(self.queue.release(lead_id, token, delay, now=self.now))
            ok = True
        except LeaseLost:
            ok = False
        assert ok == valid
        if valid and m.attempts >= m.max_attempts:  # its last attempt: failed (invariant 7)
            m.status, m.token, m.expires_at = "failed", None, None
        elif valid:
            m.status, m.token, m.expires_at = "queued", None, None
            m.available_at = self.now + timedelta(seconds=delay)

    @rule(session=st.none() | st.sampled_from(SESSIONS))
    def sweep(self, session: str | None) -> None:
        if session is None:
            result = self.run(self.queue.sweep_all(now=self.now))
        else:
            result = self.run(self.queue.sweep(session, now=self.now))
        requeued = failed = 0
        for m in self.leads.values():
            if session not in (None, m.session) or m.status != "leased":
                continue
            assert m.expires_at is not None
            if m.expires_at <= self.now:
                m.status = "failed" if m.attempts >= m.max_attempts else "queued"
                requeued += m.status == "queued"
                failed += m.status == "failed"
                m.token, m.expires_at, m.available_at = None, None, self.now
        assert result == SweepResult(requeued=requeued, failed=failed)

    @rule(
        # Leads that were leased once are the likelier to be terminal by now.
        lead_id=lead_ids | leases.map(lambda lease: lease[0]),
        verb=st.sampled_from(["cancel", "retry"]),
    )
    def operate(self, lead_id: int, verb: str) -> None:
        """An operator cancels or retries a lead."""
        m = self.leads[lead_id]
        call = self.queue.cancel if verb == "cancel" else self.queue.retry
        allowed = ("queued", "leased") if verb == "cancel" else ("failed",)
        try:
            lead = self.run(call(lead_id, now=self.now))
        except Conflict:
            assert m.status not in allowed
            return
        assert m.status in allowed
        if verb == "cancel":
            assert (lead.status, lead.error) == ("failed", "cancelled")
            m.status, m.token, m.expires_at = "failed", None, None
        else:
            assert (lead.status, lead.error) == ("queued", None)
            m.status, m.token, m.available_at = "queued", None, self.now
            m.max_attempts = max(m.max_attempts, m.attempts + 1)
            self.last_retry = lead_id

    @rule(step=st.sampled_from(STEPS))
    def tick(self, step: timedelta) -> None:
        self.last_retry = None
        self.now += step

    # -- invariants ------------------------------------------------------------

    @invariant()
    def database_matches_model(self) -> None:
        rows = self.runner.run(self._rows())
        assert rows == {lead_id: m.row() for lead_id, m in self.leads.items()}

    @invariant()
    def at_most_one_valid_lease_per_lead(self) -> None:
        valid = Counter(
            lead_id for lead_id, token in self.issued if self.leads[lead_id].valid(token, self.now)
        )
        assert all(n == 1 for n in valid.values())
        tokens = [token for _, token in self.issued]
        assert len(tokens) == len(set(tokens))

    @invariant()
    def attempts_grow_and_terminal_stays(self) -> None:
        for lead_id, m in self.leads.items():
            assert m.attempts >= self.seen_attempts.get(lead_id, 0)
            before = self.seen_status.get(lead_id)
            if before in FINAL_STATUSES and m.status != before:
                assert before == "failed" and self.last_retry == lead_id
            self.seen_attempts[lead_id] = m.attempts
            self.seen_status[lead_id] = m.status

    @invariant()
    def counts_match(self) -> None:
        stats = self.runner.run(self.queue.stats_all())
        expected: dict[str, Counts] = {}
        for m in self.leads.values():
            counts = Counter({m.status: 1})
            expected[m.session] = expected.get(m.session, Counts()) + Counts(**counts)
        assert stats.sessions == expected
        assert stats.total == sum(expected.values(), Counts())
        for session in SESSIONS:
            assert self.runner.run(self.queue.stats(session)) == expected.get(session, Counts())

    @invariant()
    def ledger_agrees(self) -> None:
        rows = self.runner.run(self._ledger())
        assert set(rows) == set(self.leads)
        for lead_id, (leased, last_status) in rows.items():
            m = self.leads[lead_id]
            assert leased == m.attempts  # one leased event per attempt
            assert last_status == m.status  # every status change wrote its event

    async def _rows(self) -> dict[int, tuple[Any, ...]]:
        query = (
            "SELECT id, session, priority, key, status, attempts, max_attempts, owner, "
            "lease_token, lease_expires_at, available_at FROM leads"
        )
        return {r["id"]: tuple(r.values())[1:] for r in await self.queue.db.rows(query)}

    async def _ledger(self) -> dict[int, tuple[int, str]]:
        query = (
            "SELECT lead_id, count(*) FILTER (WHERE event = 'leased') AS leased, "
            "(array_agg(status ORDER BY id DESC))[1] AS status FROM lead_events GROUP BY lead_id"
        )
        return {r["lead_id"]: (r["leased"], r["status"]) for r in await self.queue.db.rows(query)}


@pytest.mark.slow
@pytest.mark.timeout(600)  # room to shrink a failure; a pass takes well under a minute
def test_lease_state_machine(database_url: str) -> None:
    machine = type("Machine", (LeaseMachine,), {"database_url": database_url})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=50,
            stateful_step_count=30,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow],
        ),
    )
