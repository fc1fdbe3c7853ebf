"""Group commit: calls of one kind that arrive while one of theirs runs go next, together.

A ``Grouper`` runs one statement of its kind at a time per key (for a lease,
the session). A call that finds nothing of its kind running starts at once, so
an idle service adds no latency: no timer, no batching window. A call that
arrives while a statement of its key runs waits for it; when that statement
ends, every call waiting for the key goes together as the next one, and so on
until none waits.

What each caller sees is its own: ``run`` gets the arguments of the group in
arrival order and answers one result per argument, in the same order; each
caller gets its result and raises its own refusals from it. A failure of the
shared statement (``Unavailable``, a database error) is raised to every caller
of that group, and to none of the next.

Cancellation: a caller cancelled while it waits for a group to form leaves the
queue and is never sent; one cancelled while its group runs only stops
waiting. The group runs in a task of its own, so the others get their answers
(and each statement is shielded by ``app.store.pool`` anyway).

A group is bounded: by ``max_size`` (the sum of its calls' ``size``; a call
larger than that still goes, alone) and by ``conflicts``: a call that names a
key a call already in the group names waits for the next group, so two calls
on one lead are ordered as if sent one after the other.

Knows nothing of HTTP, of SQL and of the queue.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Collection, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
A = TypeVar("A")
R = TypeVar("R")

Run = Callable[[K, Sequence[A]], Awaitable[Sequence[R]]]
NO_CONFLICTS: frozenset[Hashable] = frozenset()


@dataclass(eq=False, slots=True)
class _Call(Generic[A, R]):
    arg: A
    future: asyncio.Future[R]
    size: int
    conflicts: Collection[Hashable]


@dataclass(eq=False, slots=True)
class _Lane(Generic[A, R]):
    """The calls of one key: whether a statement of theirs runs, and who waits for it."""

    waiting: deque[_Call[A, R]] = field(default_factory=deque)
    running: bool = False


class Grouper(Generic[K, A, R]):
    """Calls of one kind, grouped per key; see the module docstring.

    ``on_group(n)`` hears the number of calls of each group as it is sent (the metric).
    Not ``enabled``, every call runs at once as a group of its own.
    """

    def __init__(
        self,
        run: Run[K, A, R],
        *,
        max_size: int,
        size: Callable[[A], int] = lambda arg: 1,
        conflicts: Callable[[A], Collection[Hashable]] = lambda arg: NO_CONFLICTS,
        on_group: Callable[[int], None] | None = None,
        enabled: bool = True,
    ) -> None:
        self._run = run
        self._enabled = enabled
        self._max_size = max_size
        self._size = size
        self._conflicts = conflicts
        self._on_group = on_group
        self._lanes: dict[K, _Lane[A, R]] = {}
        self._tasks: set[asyncio.Task[None]] = set()  # held: the loop keeps weak references
        self.groups = 0  # statements sent so far
        self.grouped = 0  # calls that went in a group of more than one

    async def submit(self, key: K, arg: A) -> R:
        """``arg``'s own result, from the statement of the group it went in (alone, when the
        grouper is not ``enabled``)."""
        if not self._enabled:
            [result] = await self._run(key, [arg])
            return result
        lane = self._lanes.get(key)
        if lane is None:
            lane = self._lanes[key] = _Lane()
        call: _Call[A, R] = _Call(
            arg, asyncio.get_running_loop().create_future(), self._size(arg), self._conflicts(arg)
        )
        lane.waiting.append(call)
        if not lane.running:
            lane.running = True
            task = asyncio.create_task(self._drive(key, lane), name="leaseq-group-commit")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        try:
            return await call.future
        except asyncio.CancelledError:
            if call in lane.waiting:  # not sent yet: leave without a trace
                lane.waiting.remove(call)
            raise

    async def _drive(self, key: K, lane: _Lane[A, R]) -> None:
        """Send the groups of ``key`` one after the other while calls wait."""
        try:
            while lane.waiting:
                group = self._take(lane)
                if group:
                    await self._send(key, group)
        finally:
            lane.running = False
            for call in lane.waiting:  # only when this task itself was cancelled (shutdown)
                call.future.cancel()
            lane.waiting.clear()
            if self._lanes.get(key) is lane:
                del self._lanes[key]

    def _take(self, lane: _Lane[A, R]) -> list[_Call[A, R]]:
        """The next group, in arrival order: what fits beside the first; the rest stays."""
        group: list[_Call[A, R]] = []
        left: deque[_Call[A, R]] = deque()
        total = 0
        named: set[Hashable] = set()
        for call in lane.waiting:
            if call.future.done():  # cancelled while it waited
                continue
            fits = not group or (
                total + call.size <= self._max_size and named.isdisjoint(call.conflicts)
            )
            if fits:
                group.append(call)
                total += call.size
                named.update(call.conflicts)
            else:
                left.append(call)
        lane.waiting = left
        return group

    async def _send(self, key: K, group: list[_Call[A, R]]) -> None:
        """One statement for the whole group; each call its own result, or the shared error."""
        self.groups += 1
        if len(group) > 1:
            self.grouped += len(group)
        if self._on_group is not None:
            self._on_group(len(group))
        try:
            results = await self._run(key, [call.arg for call in group])
            if len(results) != len(group):
                raise RuntimeError(f"a group of {len(group)} got {len(results)} results")
        except asyncio.CancelledError:
            for call in group:
                call.future.cancel()
            raise
        except Exception as exc:
            for call in group:
                _fail(call.future, exc)
        else:
            for call, result in zip(group, results, strict=True):
                if not call.future.done():
                    call.future.set_result(result)


def _fail(future: asyncio.Future[Any], exc: Exception) -> None:
    if not future.done():
        future.set_exception(exc)
