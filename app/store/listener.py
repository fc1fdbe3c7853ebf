"""The LISTEN/NOTIFY fan-out: one connection LISTENing, waking the requests that wait.

One ``Listener`` per process keeps one dedicated psycopg connection
LISTENing on ``app.store.statements.NOTIFY_CHANNEL`` (push, release, retry and sweep
NOTIFY it with the session and how many leads became available) and wakes
that many of the requests waiting on that session (a request waiting on several
sessions, or on any, counts as waiting on each): one push of one lead runs one
lease statement, not one per waiter. A waiting request holds no database
connection: it sleeps on an ``asyncio.Event`` of its own and only takes a
pooled connection to lease again (the long poll: ``app.leasing.long_poll``).
Each notification is also handed to ``on_work`` (the fleet's view of which
sessions have work) before anyone is woken.

The same connection LISTENs on ``app.store.statements.TOKENS_CHANNEL`` too: a
revoked token's hash goes to ``on_token_revoked`` (the process's token cache),
and each (re)connect calls ``on_token_revoked(None)``: forget every token, one
revocation may have been missed while away.

Notifications are a hint, never needed for correctness: a waiter also wakes
every ``poll_interval_s`` (NOTIFY is lost behind a transaction-mode pooler,
and a delayed push sends none when it becomes available), and the listener
reconnects by itself with backoff, waking everyone after each (re)connect.

On a Citus cluster a statement's ``pg_notify`` runs on the node that runs the
statement: a release, a retry or a sweep notifies on the worker node holding
its session's shard. So the listener LISTENs on every other primary
node too (``pg_dist_node``, read at each connect and at every idle check),
over the same URL with that node's host and port; a node it cannot reach is
retried with backoff like the first connection, and waiters poll meanwhile.
On one PostgreSQL there are no other nodes.

LISTEN is session state: behind a pooler in transaction mode it would stay on
whichever server connection ran it, and its notifications would reach other
clients. So the listener only ever connects to a direct URL
(``Settings.listen_url``); with none (a pooled ``database_url`` and no
``listen_database_url``) it does not listen at all, and waiters fall back to
the slow poll.

The same connection LISTENs on ``app.store.statements.ENDED_CHANNEL`` too,
whose payload lists the ids of leads that ended (``*``: many): it wakes the
requests waiting for those leads' outcomes (``waiting_for``;
``app.domain.outcome``), capped at ``max_outcome_waiters``.

Knows nothing of HTTP, of the queue and of leasing: it only wakes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from contextlib import asynccontextmanager

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from app import metrics
from app.store.pool import libpq_url
from app.store.statements import ENDED_CHANNEL, NOTIFY_CHANNEL, TOKENS_CHANNEL, WAKE_ALL
from leaseq.errors import Unavailable, first_line

log = logging.getLogger("leaseq.listener")

BACKOFF_FIRST_S = 0.2
BACKOFF_MAX_S = 5.0
IDLE_CHECK_S = 30.0  # with no notification for this long, prove the connection alive
# The other primary nodes of a Citus cluster, where statements run and notify (none on one
# PostgreSQL: the catalog is Citus's).
CITUS_CATALOG = "SELECT to_regclass('pg_catalog.pg_dist_node') IS NOT NULL"
OTHER_NODES = """SELECT nodename, nodeport FROM pg_catalog.pg_dist_node
WHERE isactive AND noderole = 'primary'
  AND groupid <> (SELECT groupid FROM pg_catalog.pg_dist_local_group)
ORDER BY nodeid"""
CHANNELS = (NOTIFY_CHANNEL, TOKENS_CHANNEL, ENDED_CHANNEL)
# TCP keepalives, so a peer that vanished without a word is noticed within a minute.
KEEPALIVES: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 30,
    "keepalives_interval": 10,
    "keepalives_count": 3,
}


class Waiter:
    """One request waiting for work in a session; ``wait`` returns at its next wake-up."""

    def __init__(self) -> None:
        self._event = asyncio.Event()
        self.asleep = False  # in ``wait`` now, rather than running its lease query

    @property
    def woken(self) -> bool:
        return self._event.is_set()

    def wake(self) -> None:
        self._event.set()

    async def wait(self, at_most_s: float) -> None:
        """Sleep until woken, shutdown, or ``at_most_s`` seconds.

        A wake-up that came while the caller's last lease ran is kept
        (the event is cleared only here, after it), so it is never missed.
        """
        self.asleep = True
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._event.wait(), at_most_s)
        finally:
            self.asleep = False
        self._event.clear()  # armed for the next round, before the next query


def wake_order(waiters: Iterable[Waiter]) -> list[Waiter]:
    """Who to wake first: those not woken yet, asleep before busy, oldest first."""
    return sorted((w for w in waiters if not w.woken), key=lambda w: not w.asleep)


class Listener:
    """One LISTEN connection per process, fanned out to per-session waiters."""

    def __init__(
        self,
        database_url: str | None,
        *,
        max_waiters: int,
        max_outcome_waiters: int,
        poll_interval_s: float,
        connect_timeout_s: int,
        on_work: Callable[[str], None] | None = None,
    ) -> None:
        """``database_url``: a direct connection to LISTEN on; None: never listen (slow poll).
        ``on_work(session)`` hears every session a notification names."""
        self._conninfo = (
            None if database_url is None else make_conninfo(libpq_url(database_url), **KEEPALIVES)
        )
        self.max_waiters = max_waiters
        self.max_outcome_waiters = max_outcome_waiters
        self._outcomes: dict[int, list[Waiter]] = {}  # by the lead waited for
        self._outcome_waiters = 0
        self.poll_interval_s = poll_interval_s
        self.connect_timeout_s = connect_timeout_s
        self.on_work = on_work
        self.on_token_revoked: Callable[[str | None], None] | None = None
        self._slots: dict[str, list[Waiter]] = {}
        self._anywhere: list[Waiter] = []  # waiting on any session
        self._waiters = 0
        self.closed = False
        self.connected = False
        self._nodes: dict[str, asyncio.Task[None]] = {}  # the other nodes', by conninfo
        self._nodes_connected: set[str] = set()

    @property
    def waiters(self) -> int:
        """Requests waiting right now."""
        return self._waiters

    # -- waiting -------------------------------------------------------------

    @asynccontextmanager
    async def waiting(self, sessions: str | Collection[str] | None) -> AsyncIterator[Waiter]:
        """Register a waiter on a session, on several, or on any (None). Raises Unavailable
        beyond ``max_waiters``."""
        if self._waiters >= self.max_waiters:
            raise Unavailable("too many lease requests waiting; try again shortly")
        waiter = Waiter()
        names = (sessions,) if isinstance(sessions, str) else sessions
        slots = (
            [self._anywhere] if names is None else [self._slots.setdefault(n, []) for n in names]
        )
        for slot in slots:
            slot.append(waiter)
        self._waiters += 1
        metrics.WAITERS.inc()
        try:
            yield waiter
        finally:
            for slot in slots:
                slot.remove(waiter)
            self._waiters -= 1
            metrics.WAITERS.dec()
            for name in names or ():
                if not self._slots.get(name, True):
                    del self._slots[name]

    @property
    def outcome_waiters(self) -> int:
        """Requests waiting for a lead's outcome right now."""
        return self._outcome_waiters

    @asynccontextmanager
    async def waiting_for(self, lead_id: int) -> AsyncIterator[Waiter]:
        """Register a waiter for a lead's outcome. Raises Unavailable beyond
        ``max_outcome_waiters``."""
        if self._outcome_waiters >= self.max_outcome_waiters:
            raise Unavailable("too many requests waiting for outcomes; try again shortly")
        waiter = Waiter()
        slot = self._outcomes.setdefault(lead_id, [])
        slot.append(waiter)
        self._outcome_waiters += 1
        metrics.OUTCOME_WAITERS.inc()
        try:
            yield waiter
        finally:
            slot.remove(waiter)
            if not slot:
                del self._outcomes[lead_id]
            self._outcome_waiters -= 1
            metrics.OUTCOME_WAITERS.dec()

    def ended(self, payload: str) -> None:
        """A notification of ``ENDED_CHANNEL``: ids of leads that ended, or ``*`` (wake all)."""
        if payload.strip() == WAKE_ALL:
            ended: Iterable[int] = list(self._outcomes)
        else:
            ended = (int(word) for word in payload.split() if word.isdigit())
        for lead_id in ended:
            for waiter in self._outcomes.get(lead_id, ()):
                waiter.wake()

    def wake(self, session: str, leads: int | None = None) -> None:
        """Wake as many requests waiting on ``session`` (or on any) as ``leads`` became
        available (those asleep first, oldest first); every one when None."""
        slot = self._slots.get(session, [])
        chosen = wake_order([*slot, *self._anywhere])
        for waiter in chosen if leads is None else chosen[:leads]:
            waiter.wake()

    def notified(self, payload: str) -> None:
        """A NOTIFY's payload (``session n``, or a bare session: wake all)."""
        session, _, count = payload.partition(" ")
        if self.on_work is not None:
            self.on_work(session)
        self.wake(session, int(count) if count.isdigit() else None)

    def wake_all(self) -> None:
        for waiter in {*self._anywhere, *(w for slot in self._slots.values() for w in slot)}:
            waiter.wake()
        self.ended(WAKE_ALL)

    def close(self) -> None:
        """Stop waiting: every waiter returns what it has (shutdown). Call on the event loop."""
        self.closed = True
        self.wake_all()

    # -- listening -----------------------------------------------------------

    @property
    def listens(self) -> bool:
        """False when there is no direct connection to LISTEN on: waiters only poll."""
        return self._conninfo is not None

    @property
    def nodes(self) -> list[str]:
        """The other nodes followed (``host:port``; a Citus cluster's), LISTENing or trying."""
        return sorted(_node_name(conninfo) for conninfo in self._nodes)

    @property
    def everywhere(self) -> bool:
        """LISTENing on the database and on every other node known of it."""
        return self.connected and self._nodes_connected == set(self._nodes)

    async def run(self) -> None:
        """LISTEN until cancelled, reconnecting with backoff; never raises but CancelledError.

        Without a direct URL, returns at once: waiters wake every ``poll_interval_s``.
        """
        conninfo = self._conninfo
        if conninfo is None:
            log.info(
                "no direct connection for LISTEN (the database URL goes through a pooler and "
                "no listen URL is set): waiting leases poll every %.1fs",
                self.poll_interval_s,
            )
            return
        try:
            await self._follow(conninfo, main=True)
        finally:
            nodes = list(self._nodes.values())
            self._follow_nodes([])
            await asyncio.gather(*nodes, return_exceptions=True)

    async def _follow(self, conninfo: str, *, main: bool) -> None:
        """LISTEN on one node until closed, reconnecting with backoff; on the ``main`` one
        (the database URL's), also follow the cluster's other nodes."""
        backoff = BACKOFF_FIRST_S
        while not self.closed:
            try:
                conn = await psycopg.AsyncConnection.connect(
                    conninfo, autocommit=True, connect_timeout=self.connect_timeout_s
                )
                try:
                    async with asyncio.timeout(self.connect_timeout_s):
                        for channel in CHANNELS:
                            await conn.execute(f"LISTEN {channel}")
                        if main:
                            await self._find_nodes(conn)
                    if main:
                        self.connected = True
                        if self.on_token_revoked is not None:
                            self.on_token_revoked(None)
                    else:
                        self._nodes_connected.add(conninfo)
                    backoff = BACKOFF_FIRST_S
                    log.info(
                        "listening on %s, %s and %s%s",
                        *CHANNELS,
                        "" if main else f" on node {_node_name(conninfo)}",
                    )
                    self.wake_all()  # whatever was pushed while we were away
                    await self._listen(conn, main=main)
                finally:
                    if main:
                        self.connected = False
                    self._nodes_connected.discard(conninfo)
                    await conn.close()
            except Exception as exc:  # any failure: log, back off, reconnect
                log.warning(
                    "listener connection%s failed: %s; retrying in %.1fs",
                    "" if main else f" to node {_node_name(conninfo)}",
                    first_line(exc),
                    backoff,
                )
            if self.closed:
                return
            await asyncio.sleep(backoff * random.uniform(0.8, 1.2))
            backoff = min(backoff * 2, BACKOFF_MAX_S)

    async def _find_nodes(self, conn: psycopg.AsyncConnection[tuple[object, ...]]) -> None:
        """Follow the other nodes ``conn``'s catalog names (a Citus cluster's), and only those.

        A catalog it may not read (a role without the right) leaves the nodes as they were,
        with a warning: waiters on the others' shards then wake at their poll. A connection
        that fails raises (the caller reconnects)."""
        try:
            [citus] = await (await conn.execute(CITUS_CATALOG)).fetchall()
            nodes = await (await conn.execute(OTHER_NODES)).fetchall() if citus[0] else []
        except psycopg.OperationalError:
            raise
        except psycopg.DatabaseError as exc:
            log.warning("cannot read the cluster's nodes to LISTEN there: %s", first_line(exc))
            return
        assert self._conninfo is not None
        self._follow_nodes([_on_node(self._conninfo, str(h), int(str(p))) for h, p in nodes])

    def _follow_nodes(self, conninfos: list[str]) -> None:
        """LISTEN on exactly ``conninfos`` besides the database: start the new, stop the gone."""
        for gone in set(self._nodes) - set(conninfos):
            self._nodes.pop(gone).cancel()
            self._nodes_connected.discard(gone)
        for conninfo in conninfos:
            if conninfo not in self._nodes:
                self._nodes[conninfo] = asyncio.create_task(
                    self._follow(conninfo, main=False), name="leaseq-listener-node"
                )

    async def _listen(
        self, conn: psycopg.AsyncConnection[tuple[object, ...]], *, main: bool
    ) -> None:
        while not self.closed:
            async with contextlib.aclosing(conn.notifies(timeout=IDLE_CHECK_S)) as notifies:
                async for notify in notifies:
                    if notify.channel == TOKENS_CHANNEL:
                        if self.on_token_revoked is not None:
                            self.on_token_revoked(notify.payload)
                    elif notify.channel == ENDED_CHANNEL:
                        self.ended(notify.payload)
                    else:
                        self.notified(notify.payload)
            async with asyncio.timeout(self.connect_timeout_s):
                if main:  # the nodes, read again: a silently dead connection fails here
                    await self._find_nodes(conn)
                else:
                    await conn.execute("SELECT 1")


def _on_node(conninfo: str, host: str, port: int) -> str:
    """``conninfo`` with another node's host and port (and no ``hostaddr`` of the first)."""
    params = conninfo_to_dict(conninfo)
    params.pop("hostaddr", None)
    params.update(host=host, port=str(port))
    return make_conninfo("", **params)


def _node_name(conninfo: str) -> str:
    params = conninfo_to_dict(conninfo)
    return f"{params.get('host')}:{params.get('port')}"
