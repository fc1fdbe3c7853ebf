"""``leaseq push``'s work: leads read from lines (``lines``), pushed in atomic calls.

Checked first (the default): every line is read and checked before the first
call, so a bad line anywhere pushes nothing. Streamed: lines are pushed as
they come, in calls of what has arrived (up to a full call), so endless input
flows. Each call is one ``AsyncClient.push`` of one request, atomic, so when a
push stops — a bad line, or the service refusing or not answering — the
error says exactly which lines were pushed and that nothing after them was.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from leaseq import AsyncClient
from leaseq.cli.lines import BadLine, Line, Packer, batches, read, read_all
from leaseq.cli.output import CliError
from leaseq.errors import LeaseqError
from leaseq.limits import MAX_PUSH_BATCH
from leaseq.model import FINAL_STATUSES, Lead, PushResult

# Lines read ahead of the pushes in a stream: the reader waits beyond this.
READ_AHEAD = 4 * MAX_PUSH_BATCH
# ``--wait``: leads waited for at once (each a request the service holds, up to 30 s).
WAITING_AT_ONCE = 100


@dataclass(slots=True)
class Progress:
    """What the calls so far pushed: the ids in line order, and the last line they covered."""

    ids: list[int] = field(default_factory=list)
    created: int = 0
    duplicates: int = 0
    through: int = 0  # every line up to this one is pushed (a blank line pushes nothing)

    def result(self) -> PushResult:
        return PushResult(ids=self.ids, created=self.created, duplicates=self.duplicates)

    def pushed(self) -> str:
        """``lines 1-1000 were pushed (ids 1-1000)``, or ``nothing was pushed``."""
        if not self.through:
            return "nothing was pushed"
        return f"lines 1-{self.through} were pushed"


def numbered(lines: Iterable[str]) -> Iterator[tuple[int, str]]:
    """``(line number, text)``; text that is not UTF-8 is a BadLine at its line."""
    number = 0
    iterator = iter(lines)
    while True:
        try:
            text = next(iterator)
        except StopIteration:
            return
        except UnicodeDecodeError as exc:
            raise BadLine(number + 1, f"not UTF-8 text ({exc.reason})") from None
        number += 1
        yield number, text


async def push(
    client: AsyncClient,
    session: str,
    lines: Iterable[str],
    *,
    describe: Callable[[LeaseqError], str],
    payloads: bool = False,
    stream: bool = False,
    wait_for_room_s: float = 0.0,
) -> PushResult:
    """Push the leads of ``lines``, checked first or streamed. Raises CliError saying what
    was pushed; ``describe`` words a failed call. A call refused for the session's
    max_queued waits for room up to ``wait_for_room_s`` (0: fails at once)."""
    progress = Progress()
    try:
        if stream:
            calls = _streamed(lines, payloads, client.max_body_bytes)
        else:
            checked = read_all((text for _, text in numbered(lines)), payloads=payloads)
            calls = _checked(batches(checked, client.max_body_bytes))
        async for call in calls:
            await _push_call(client, session, call, progress, describe, wait_for_room_s)
    except BadLine as exc:
        raise CliError(f"{exc}; {_after(progress, progress.through + 1)}") from None
    return progress.result()


async def _checked(calls: Iterator[list[Line]]) -> AsyncIterator[list[Line]]:
    for call in calls:
        yield call


async def _push_call(
    client: AsyncClient,
    session: str,
    call: list[Line],
    progress: Progress,
    describe: Callable[[LeaseqError], str],
    wait_for_room_s: float = 0.0,
) -> None:
    """One call (atomic); on failure, a CliError naming its lines and what came before."""
    try:
        leads = [line.lead for line in call]
        answer = await client.push(session, leads, wait_for_room_s=wait_for_room_s)
    except LeaseqError as exc:
        raise CliError(_refused(describe(exc), exc, call, progress)) from None
    progress.ids.extend(answer.ids)
    progress.created += answer.created
    progress.duplicates += answer.duplicates
    progress.through = call[-1].number


def _refused(why: str, exc: LeaseqError, call: list[Line], progress: Progress) -> str:
    """Why ``call`` failed, at the line the service named when it did, and what was pushed."""
    if exc.status is not None and exc.status < 500:  # refused: the call changed nothing
        index = _lead_index(exc.problem)
        where = f"line {call[index].number}" if index is not None and index < len(call) else ""
        return f"{where or _lines(call)}: {why}; {_after(progress, call[0].number)}"
    # No answer, or a 5xx: the call may have been written. Its keyed leads dedupe on a re-push.
    return (
        f"{_lines(call)}: {why}; {progress.pushed()}, {_lines(call)} may have been "
        f"(no answer), nothing after line {call[-1].number}; pushing them again is safe "
        "for leads with a key"
    )


def _after(progress: Progress, first_not_pushed: int) -> str:
    if not progress.through:
        return "nothing was pushed"
    return f"{progress.pushed()}, nothing from line {first_not_pushed} on"


def _lines(call: list[Line]) -> str:
    first, last = call[0].number, call[-1].number
    return f"line {first}" if first == last else f"lines {first}-{last}"


def _lead_index(problem: dict[str, Any] | None) -> int | None:
    """The lead a validation problem names: ``loc`` ``[body, leads, 3, …]`` is the fourth."""
    for error in (problem or {}).get("errors") or ():
        loc = [str(part) for part in error.get("loc") or ()]
        if "leads" in loc[:-1]:
            after = loc[loc.index("leads") + 1]
            if after.isdigit():
                return int(after)
    return None


async def _streamed(
    lines: Iterable[str], payloads: bool, max_bytes: int
) -> AsyncIterator[list[Line]]:
    """Calls of the lines that have arrived, read on a thread of their own: a call waits for
    its first line only, then takes what is there (up to a full call). Raises BadLine."""
    loop = asyncio.get_running_loop()
    arrived: asyncio.Queue[tuple[int, str] | BaseException | None] = asyncio.Queue()
    room = threading.Semaphore(READ_AHEAD)

    def give(item: tuple[int, str] | BaseException | None) -> None:
        room.acquire()
        loop.call_soon_threadsafe(arrived.put_nowait, item)

    def reader() -> None:
        try:
            for item in numbered(lines):
                give(item)
        except BaseException as exc:  # handed over: the stream raises it in its place
            give(exc)
            return
        give(None)

    # A daemon: a push that stops leaves it blocked on its input, and the process exits.
    threading.Thread(target=reader, name="leaseq-push-reader", daemon=True).start()
    packer = Packer(max_bytes)
    ended = False
    while not ended:
        if packer.call and arrived.empty():  # nothing more has arrived: send what has
            yield packer.take()
        item = await arrived.get()
        room.release()
        if item is None:
            ended = True
        elif isinstance(item, BaseException):
            raise item
        elif (line := read(item[1], item[0], payloads=payloads)) is not None:
            if not packer.fits(line):
                yield packer.take()
            packer.add(line)
    if packer.call:
        yield packer.take()


async def outcomes(client: AsyncClient, ids: Iterable[int], ended: Callable[[Lead], None]) -> None:
    """Wait for each lead of ``ids`` (each once) to end; ``ended(lead)`` as each does, in the
    order they end. Up to ``WAITING_AT_ONCE`` waits are held at once."""
    room = asyncio.Semaphore(WAITING_AT_ONCE)

    async def one(lead_id: int) -> None:
        async with room:
            lead = await client.wait_for(lead_id)
            while lead.status not in FINAL_STATUSES:
                lead = await client.wait_for(lead_id)
        ended(lead)

    async with asyncio.TaskGroup() as group:
        for lead_id in dict.fromkeys(ids):
            group.create_task(one(lead_id))
