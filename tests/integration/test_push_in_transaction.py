"""A push inside the producer's own transaction: ``leaseq_push`` (revision 0007) and
``leaseq.push_in``, on psycopg and SQLAlchemy, against the queue the service runs."""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql as pgsql
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.orm import Session

from app.config import DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_PAYLOAD_BYTES
from app.domain import validation
from app.domain.queue import Queue
from app.store.pool import Database, libpq_url
from app.store.schema import sqlalchemy_url
from app.store.statements import NOTIFY_CHANNEL
from leaseq import InvalidInput, push_in
from leaseq.limits import INT32_MAX, MAX_ATTEMPTS, MAX_DELAY_S, MAX_JSON_DEPTH, MAX_KEY_CHARS
from leaseq.model import Counts
from tests.support import TICK, events, fetch, leasing_of, row
from tests.support.serving import Services, until

Conn = psycopg.Connection[tuple[Any, ...]]


@pytest.fixture
def producer(database_url: str) -> Iterator[Conn]:
    """The producer's own connection, a transaction open on it as psycopg opens one."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        yield conn


@pytest.fixture
def engine(database_url: str) -> Iterator[Engine]:
    engine = create_engine(sqlalchemy_url(database_url))
    yield engine
    engine.dispose()


@pytest.fixture
def listening(database_url: str) -> Iterator[Conn]:
    """A connection LISTENing where the service's listener does."""
    with psycopg.connect(libpq_url(database_url), autocommit=True) as conn:
        conn.execute(pgsql.SQL("LISTEN {}").format(pgsql.Identifier(NOTIFY_CHANNEL)))
        yield conn


def heard(conn: Conn, timeout_s: float = 0.5) -> list[str]:
    """The payloads of the notifications delivered within ``timeout_s``."""
    return [n.payload for n in conn.notifies(timeout=timeout_s) if n.channel == NOTIFY_CHANNEL]


async def nothing_written(db: Database, queue: Queue, session: str = "s") -> None:
    assert await fetch(db, "SELECT id FROM leads") == []
    assert await events(db) == []
    assert await queue.stats(session) == Counts()


def nested(levels: int) -> dict[str, Any]:
    """An object whose arrays and objects, in turns, nest ``levels`` deep (itself is 1)."""
    inner: Any = []
    for level in range(levels - 2):
        inner = {"a": inner} if level % 2 else [inner]
    return {"a": inner}


async def test_a_rolled_back_push_leaves_no_lead_and_no_ledger_row(
    producer: Conn, db: Database, queue: Queue, listening: Conn
) -> None:
    ids = [push_in(producer, "s", {"n": n}) for n in range(3)]
    assert ids == sorted(ids) and len(set(ids)) == 3
    producer.rollback()

    await nothing_written(db, queue)
    assert await leasing_of(queue).lease_next("s", "w", max=10) == []
    assert heard(listening) == []


async def test_a_committed_push_is_a_lead_in_the_ledger_and_the_counts(
    producer: Conn, db: Database, queue: Queue
) -> None:
    producer.execute("CREATE TABLE orders (id int PRIMARY KEY)")
    producer.execute("INSERT INTO orders VALUES (7)")
    lead_id = push_in(producer, "s", {"order": 7, "ü": "☃"}, priority=3, key="order:7")
    assert await fetch(db, "SELECT id FROM leads") == []  # not before the commit
    producer.commit()

    found = await row(db, lead_id)
    assert found["status"] == "queued" and found["attempts"] == 0
    assert found["payload"] == {"order": 7, "ü": "☃"}
    assert (found["priority"], found["key"]) == (3, "order:7")
    assert found["max_attempts"] == DEFAULT_MAX_ATTEMPTS
    assert not found["scheduled"] and found["available_at"] == found["created_at"]
    [pushed] = await events(db, lead_id)
    assert (pushed["event"], pushed["status"], pushed["attempt"]) == ("pushed", "queued", 0)
    assert pushed["session"] == "s" and pushed["at"] == found["created_at"]
    assert await queue.stats("s") == Counts(queued=1)

    [lease] = await leasing_of(queue).lease_next("s", "w")
    assert (lease.lead.id, lease.attempt) == (lead_id, 1)
    assert await queue.stats("s") == Counts(leased=1)


async def test_the_database_time_is_the_pushing_statements(producer: Conn, db: Database) -> None:
    """Not the transaction's start, which may lie long before the push."""
    producer.execute("SELECT pg_sleep(0.2)")
    lead_id = push_in(producer, "s", {})
    [[began]] = producer.execute("SELECT now()").fetchall()
    producer.commit()
    assert (await row(db, lead_id))["created_at"] >= began + timedelta(seconds=0.2)


async def test_sqlalchemy_connections_commit_and_roll_back_with_the_push(
    engine: Engine, db: Database, queue: Queue
) -> None:
    with engine.connect() as conn:
        push_in(conn, "s", {"dropped": True})
        conn.rollback()
    await nothing_written(db, queue)

    with engine.begin() as conn:
        kept = push_in(conn, "s", {"kept": True}, priority=-1, max_attempts=2)
    with Session(engine) as session, session.begin():
        session.execute(text("SELECT 1"))
        in_orm = push_in(session.connection(), "s", {"orm": True}, delay_s=0.5)

    leads = await fetch(db, "SELECT id, payload, priority, max_attempts FROM leads ORDER BY id")
    assert leads == [
        {"id": kept, "payload": {"kept": True}, "priority": -1, "max_attempts": 2},
        {
            "id": in_orm,
            "payload": {"orm": True},
            "priority": 0,
            "max_attempts": DEFAULT_MAX_ATTEMPTS,
        },
    ]
    assert [e["lead_id"] for e in await events(db)] == [kept, in_orm]
    assert await queue.stats("s") == Counts(queued=2)


async def test_a_cursor_is_taken_as_it_is(producer: Conn, db: Database) -> None:
    with producer.cursor() as cursor:
        lead_id = push_in(cursor, "s", {"by": "cursor"})
    producer.commit()
    assert (await row(db, lead_id))["payload"] == {"by": "cursor"}


async def test_a_key_in_the_session_answers_its_lead_and_writes_nothing(
    producer: Conn, db: Database, queue: Queue, listening: Conn
) -> None:
    first = push_in(producer, "s", {"v": 1}, key="k")
    assert push_in(producer, "s", {"v": 2}, key="k", priority=9) == first  # same transaction
    producer.commit()
    assert heard(listening) == ["s 1"]
    assert push_in(producer, "s", {"v": 3}, key="k", delay_s=60) == first
    elsewhere = push_in(producer, "t", {"v": 4}, key="k")
    producer.commit()

    assert elsewhere != first
    assert heard(listening) == ["t 1"]
    found = await row(db, first)
    assert (found["payload"], found["priority"], found["scheduled"]) == ({"v": 1}, 0, False)
    assert [e["lead_id"] for e in await events(db)] == [first, elsewhere]
    assert await queue.stats("s") == Counts(queued=1)


@pytest.mark.parametrize("outcome", ["commit", "rollback"])
async def test_a_key_another_transaction_pushes_waits_for_its_outcome(
    producer: Conn, database_url: str, db: Database, outcome: str
) -> None:
    """Two producers with one key: the second answers the first's lead once that commits,
    or pushes its own once it rolls back; never two leads of one key."""
    with psycopg.connect(libpq_url(database_url)) as other:
        theirs = push_in(other, "s", {"by": "other"}, key="k")
        answer: list[int] = []
        second = threading.Thread(target=lambda: answer.append(push_in(producer, "s", {}, key="k")))
        second.start()
        second.join(0.3)
        assert second.is_alive()  # waits on the other transaction's row
        getattr(other, outcome)()
        second.join(10)
    producer.commit()
    [kept] = await fetch(db, "SELECT id FROM leads")
    assert answer == [kept["id"]]
    assert (kept["id"] == theirs) == (outcome == "commit")
    assert [e["lead_id"] for e in await events(db)] == [kept["id"]]


BAD_ARGUMENTS = [
    ({"session": "two words"}, "session"),
    ({"session": ""}, "session"),
    ({"session": "s" * 129}, "session"),
    ({"session": "s\n"}, "session"),
    ({"payload": nested(MAX_JSON_DEPTH + 1)}, "payload"),
    ({"payload": {"big": "x" * DEFAULT_MAX_PAYLOAD_BYTES}}, "payload"),
    ({"key": ""}, "key"),
    ({"key": "k" * (MAX_KEY_CHARS + 1)}, "key"),
    ({"delay_s": -1}, "delay_s"),
    ({"delay_s": math.nan}, "delay_s"),
    ({"delay_s": math.inf}, "delay_s"),
    ({"delay_s": MAX_DELAY_S + 1}, "delay_s"),
    ({"max_attempts": 0}, "max_attempts"),
    ({"max_attempts": MAX_ATTEMPTS + 1}, "max_attempts"),
]


@pytest.mark.parametrize(("change", "field"), BAD_ARGUMENTS)
async def test_bad_arguments_raise_22023_naming_them_and_change_nothing(
    producer: Conn, db: Database, queue: Queue, change: dict[str, Any], field: str
) -> None:
    arguments: dict[str, Any] = {"session": "s", "payload": {}, **change}
    with pytest.raises(psycopg.errors.InvalidParameterValue) as raised:
        push_in(producer, arguments.pop("session"), arguments.pop("payload"), **arguments)
    assert raised.value.sqlstate == "22023"
    assert str(raised.value).startswith(f"{field}: must ")
    producer.rollback()
    await nothing_written(db, queue)


@pytest.mark.parametrize(
    ("call", "field"),
    [
        ("leaseq_push(NULL, '{}')", "session"),
        ("leaseq_push('s', NULL)", "payload"),
        ("leaseq_push('s', '[1]')", "payload"),
        ("leaseq_push('s', '{}', NULL)", "priority"),
        ("leaseq_push('s', '{}', delay_s => NULL)", "delay_s"),
    ],
)
async def test_sql_nulls_and_non_objects_are_refused(
    producer: Conn, db: Database, queue: Queue, call: str, field: str
) -> None:
    with pytest.raises(psycopg.errors.InvalidParameterValue, match=f"^{field}: must "):
        producer.execute(f"SELECT {call}")
    producer.rollback()
    await nothing_written(db, queue)


@pytest.mark.parametrize(
    ("arguments", "field"),
    [
        ({"payload": {"x": math.nan}}, "payload"),
        ({"payload": {"x": object()}}, "payload"),
        ({"payload": [1, 2]}, "payload"),
        ({"session": 7}, "session"),
        ({"priority": True}, "priority"),
        ({"priority": 1.5}, "priority"),
        ({"priority": INT32_MAX + 1}, "priority"),
        ({"key": 5}, "key"),
        ({"delay_s": "5"}, "delay_s"),
        ({"delay_s": 10**400}, "delay_s"),
        ({"max_attempts": 2.0}, "max_attempts"),
    ],
)
async def test_what_the_client_refuses_is_never_sent(
    producer: Conn, db: Database, queue: Queue, arguments: dict[str, Any], field: str
) -> None:
    """The producer's transaction stays usable: nothing reached the database."""
    session = arguments.pop("session", "s")
    payload = arguments.pop("payload", {})
    with pytest.raises(InvalidInput) as raised:
        push_in(producer, session, payload, **arguments)
    assert raised.value.field == field
    producer.execute("SELECT 1")
    producer.commit()
    await nothing_written(db, queue)


async def test_the_payload_depth_limit_is_the_services(producer: Conn, db: Database) -> None:
    deepest = nested(MAX_JSON_DEPTH)
    validation.payload(deepest)  # the service takes it…
    lead_id = push_in(producer, "s", deepest)  # …and so does the function
    producer.commit()
    assert (await row(db, lead_id))["payload"] == deepest
    with pytest.raises(InvalidInput):
        validation.payload(nested(MAX_JSON_DEPTH + 1))  # refused by both (BAD_ARGUMENTS)


async def test_a_delayed_push_is_scheduled_and_wakes_nobody(
    producer: Conn, db: Database, queue: Queue, listening: Conn
) -> None:
    lead_id = push_in(producer, "s", {}, delay_s=60)
    producer.commit()

    found = await row(db, lead_id)
    assert found["scheduled"]
    assert found["available_at"] - found["created_at"] == timedelta(seconds=60)
    assert heard(listening) == []
    assert await leasing_of(queue).lease_next("s", "w") == []
    assert await leasing_of(queue).lease_next("s", "w", now=found["available_at"] - TICK) == []
    [lease] = await leasing_of(queue).lease_next("s", "w", now=found["available_at"])
    assert lease.lead.id == lead_id


async def test_waiting_listeners_hear_every_push_at_commit_only(
    producer: Conn, listening: Conn
) -> None:
    """One notification a push, each payload its own (PostgreSQL delivers one of identical
    payloads of a transaction), whose counts wake at least as many waiters as leads."""
    push_in(producer, "s", {})
    push_in(producer, "t", {})
    push_in(producer, "s", {})
    assert heard(listening, 0.3) == []
    producer.commit()
    payloads = heard(listening)
    assert payloads == ["s 1", "t 2", "s 3"]
    assert sum(int(p.split(" ")[1]) for p in payloads if p.startswith("s ")) >= 2

    push_in(producer, "s", {})  # a new transaction counts from one again
    producer.commit()
    assert heard(listening) == ["s 1"]


@pytest.mark.service
def test_a_long_poll_on_a_served_queue_wakes_when_the_push_commits(
    services: Services, database_url: str, producer: Conn
) -> None:
    """The poll fallback is set beyond the wait, so only the commit's NOTIFY can wake it."""
    service = services.start(database_url=database_url, env={"LEASEQ_POLL_INTERVAL_S": "60"})
    outcome: dict[str, Any] = {}

    def long_poll() -> None:
        with service.client(timeout=60.0) as http:
            answer = http.post("/lease", json={"session": "s", "owner": "w", "wait_s": 20})
            outcome["answer"] = (answer.status_code, answer.json())

    poller = threading.Thread(target=long_poll)
    poller.start()
    try:
        with service.client() as http:
            until(
                lambda: "leaseq_long_poll_waiters 1" in http.get("/metrics").text,
                10,
                "the long poll to be waiting",
            )
        push_in(producer, "s", {"dropped": True})
        producer.rollback()
        lead_id = push_in(producer, "s", {"kept": True})
        poller.join(0.5)
        assert poller.is_alive(), outcome  # nothing committed yet: still waiting
        producer.commit()
        poller.join(15)
        assert not poller.is_alive(), "the commit did not wake the long poll"
    finally:
        poller.join(30)
    status, body = outcome["answer"]
    assert status == 200
    [lease] = body["leases"]
    assert lease["lead"]["id"] == lead_id and lease["lead"]["payload"] == {"kept": True}
