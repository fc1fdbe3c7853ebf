"""No client can hold the service by waiting: uvicorn's httptools protocol with every wait bounded.

uvicorn counts every open connection against ``limit_concurrency`` and answers
503 past it, yet it closes no connection that never sent a request, bounds
neither the time a request head or body may take to arrive, nor (under
httptools) a head's size. 2,000 silent sockets, or 2,100 that sent a head and
then trickled a body a byte at a time, made every live request a 503. So each
stretch in which a connection waits on its client is bounded (``app.config``):

* connecting to the first byte: ``FIRST_REQUEST_S``, closed silently; between
  requests, uvicorn's keep-alive timeout;
* a head, from its first byte (or from the end of the answer before it, when
  it came pipelined behind one) to its end: ``head_timeout_s``, and at most
  ``MAX_HEAD_BYTES`` (431 ``payload_too_large``);
* a body, from the end of its head to its end: ``body_timeout_s``.

A head or body that takes too long gets 408 with the code ``unavailable``: the
request was not served, and sending it again is safe (nothing was done), which
is what the client and the worker do with ``unavailable``. Then the connection
is closed: after a 408 or 431 the service shuts its sending side and reads and
drops what the client still sends for up to ``LINGER_S``, so the client reads
the answer rather than a reset. A body cut short, by its timeout or by being
dropped, reaches the app as ``http.disconnect`` before the body's end, never
as a shorter body, and the app's answer to it goes nowhere.

When a new connection brings the process to its connection limit, others are
closed to make room, in this order:

1. connections already answered and closing (lingering);
2. stalled reads: a head or body that has been arriving for ``STALLED_READ_S``
   or more, the oldest first. A trickling body is the prime suspect: a live
   client sends its request in milliseconds;
3. idle connections (no request yet, or awaiting the next one), the longest
   idle first: a pooling client reconnects, but closing it costs that client
   a connect and, should it send at that moment, a failed request, so these
   go after the stalled reads;
4. reads younger than ``STALLED_READ_S``, the oldest first: live requests
   arriving.

A read dropped gets 503 ``unavailable`` (Retry-After) when no answer has
begun; an idle connection is closed silently. A connection whose request the
app holds (its body complete: a long poll waiting for work included), or
whose answer is being written, is never dropped.

Knows nothing of leaseq's API beyond its problem+json answers; used by
``app.api.serve``.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import heapq
import itertools
from typing import TYPE_CHECKING, Any, Literal

from starlette.responses import Response
from uvicorn.config import Config
from uvicorn.protocols.http.httptools_impl import (
    STATUS_LINE,
    HttpToolsProtocol,
    RequestResponseCycle,
)
from uvicorn.server import ServerState

from app.api.problems import problem, unavailable
from app.config import FIRST_REQUEST_S, LINGER_S, MAX_HEAD_BYTES, Settings

if TYPE_CHECKING:
    from uvicorn._types import ASGI3Application

# A head or body still arriving after this long is stalled: the first to go when room is needed.
STALLED_READ_S = 1.0
HEAD_TOO_LARGE = f"the request head (request line and headers) is over {MAX_HEAD_BYTES} bytes"

_order = itertools.count()  # connections in the order made: ties of the event loop's clock


@functools.cache
def read_bounds() -> tuple[float, float]:
    """This process's head and body timeouts, from the ``LEASEQ_*`` environment ``app.api.serve``
    wrote for it (uvicorn's worker processes build their protocols from it too)."""
    settings = Settings()
    return settings.head_timeout_s, settings.body_timeout_s


def last_answer(response: Response, default_headers: list[tuple[bytes, bytes]]) -> bytes:
    """``response`` as the HTTP/1.1 bytes of a connection's last answer."""
    parts = [STATUS_LINE[response.status_code]]
    for name, value in [*default_headers, *response.raw_headers]:
        parts += [name, b": ", value, b"\r\n"]
    parts += [b"connection: close\r\n\r\n", bytes(response.body)]
    return b"".join(parts)


class HttpConnection(HttpToolsProtocol):
    """One HTTP connection: uvicorn's, its waits on the client bounded, giving way when full."""

    def __init__(
        self,
        config: Config,
        server_state: ServerState,
        app_state: dict[str, Any],
        _loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        super().__init__(config, server_state, app_state, _loop)
        self.head_timeout_s, self.body_timeout_s = read_bounds()
        # What arrives now: a head (None counts as one, since the next byte begins one) or a body.
        self.reading: Literal["head", "body"] | None = None
        self.since = 0.0  # when the current read began, or the connection last fell idle
        self.head_bytes = 0  # of the head being read, counted as they arrive
        self.heads = 0  # heads read whole on this connection
        self.deadline: asyncio.TimerHandle | None = None  # of the read in progress, or lingering
        self.refusal: Response | None = None  # the last answer, once the one in progress is sent
        self.lingering = False
        self.task: asyncio.Task[None] | None = None  # running the app on the latest request
        self.made = 0  # this connection's place in the order made (connection_made)

    # -- the connection's life ------------------------------------------------

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.made = next(_order)
        self.since = self.loop.time()
        self.timeout_keep_alive_task = self.loop.call_later(
            FIRST_REQUEST_S, self.timeout_keep_alive_handler
        )
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) >= limit:
            self._make_room(len(self.connections) - limit + 1)

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_deadline()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self.lingering or self.refusal is not None or self.transport.is_closing():
            return  # answered for the last time: what follows is dropped
        if self.reading != "body":
            room = MAX_HEAD_BYTES - self.head_bytes
            if len(data) > room:
                # Feed what fits: a head still incomplete then is over the limit.
                heads = self.heads
                self.data_received(data[:room])
                if self.heads == heads:
                    self._refuse(problem(431, "payload_too_large", HEAD_TOO_LARGE))
                else:
                    self.data_received(data[room:])
                return
            self.head_bytes += len(data)
            if self.reading is None:
                self._begin("head")
        super().data_received(data)
        self._arm_deadline()

    def _start_asgi_task(self, cycle: RequestResponseCycle, app: ASGI3Application) -> None:
        # uvicorn's, keeping the task: a dropped connection's no longer counts (``drop``).
        context = contextvars.Context() if self.config.reset_contextvars else None
        self.task = self.loop.create_task(cycle.run_asgi(app), context=context)
        self.task.add_done_callback(self.tasks.discard)
        self.tasks.add(self.task)

    # -- httptools' callbacks -------------------------------------------------

    def on_message_begin(self) -> None:
        super().on_message_begin()
        if self.reading is None:  # pipelined behind the request just read, in the same bytes
            self._begin("head")

    def on_headers_complete(self) -> None:
        self._cancel_deadline()
        self.heads += 1
        super().on_headers_complete()
        self._begin("body")

    def on_message_complete(self) -> None:
        self._cancel_deadline()
        self.reading = None
        # The next head's bytes are counted from the next arrival: bytes of it that came with
        # this body's end (pipelining) go uncounted, at most one read (uvicorn reads 256 KiB).
        self.head_bytes = 0
        super().on_message_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self.refusal is not None:
            self._answer_last(self.refusal)
        elif self.reading != "body":  # idle from now, or a pipelined head's clock starts
            self.since = self.loop.time()
            self._arm_deadline()

    # -- bounds ---------------------------------------------------------------

    def _begin(self, reading: Literal["head", "body"]) -> None:
        self.reading = reading
        self.since = self.loop.time()

    def _answering(self) -> bool:
        """The request before the head being read is not answered yet."""
        return self.cycle is not None and not self.cycle.response_complete

    def _arm_deadline(self) -> None:
        """When a head or body is left incomplete: its deadline, unless set already."""
        if self.deadline is not None or self.reading is None or self.transport.is_closing():
            return
        if self.reading == "head":
            if self._answering():
                return  # its clock starts when the answer before it is sent
            timeout = self.head_timeout_s
        else:
            timeout = self.body_timeout_s
        self.deadline = self.loop.call_at(self.since + timeout, self._timed_out)

    def _cancel_deadline(self) -> None:
        if self.deadline is not None:
            self.deadline.cancel()
            self.deadline = None

    def _timed_out(self) -> None:
        self.deadline = None
        if self.reading == "head":
            detail = f"the request head did not arrive within {self.head_timeout_s:g} s"
        elif self.pipeline:
            # Queued behind an answer in progress, this body is not being read: not the
            # client's delay, so its clock starts again.
            self._begin("body")
            self._arm_deadline()
            return
        else:
            detail = f"the request body did not arrive within {self.body_timeout_s:g} s"
        self._refuse(problem(408, "unavailable", detail))

    # -- last answers -----------------------------------------------------------

    def _can_answer(self) -> bool:
        """An answer written now would be the one the client waits for."""
        if self.reading == "body":
            return not self.cycle.response_started
        return not self._answering()

    def _cut_short(self) -> None:
        """The app sees the body being read end in ``http.disconnect``; its answer goes nowhere."""
        if self.reading == "body" and not self.cycle.response_complete:
            self.cycle.disconnected = True
            self.cycle.message_event.set()

    def _refuse(self, response: Response) -> None:
        """Answer the read in progress with ``response``, the connection's last, and close."""
        if self.transport.is_closing():
            return
        if self.reading == "head" and self._answering():
            self.refusal = response  # sent after the answer before it (on_response_complete)
            self.flow.pause_reading()
            return
        self._answer_last(response)

    def _answer_last(self, response: Response) -> None:
        if self._can_answer():
            self.transport.write(last_answer(response, self.server_state.default_headers))
        self._cut_short()
        self._linger()

    def _linger(self) -> None:
        """Stop sending and drop what the client still sends, up to ``LINGER_S``, then close.

        Closing at once with the client's bytes unread would send a reset, which
        may reach the client before it reads the answer.
        """
        self._cancel_deadline()
        self._unset_keepalive_if_required()
        self.lingering = True
        self.flow.resume_reading()
        if self.transport.can_write_eof():
            self.transport.write_eof()
        self.deadline = self.loop.call_later(LINGER_S, self.transport.close)

    # -- making room ----------------------------------------------------------

    def eviction_rank(self, now: float) -> tuple[int, float, int] | None:
        """Where this connection stands when room is needed, lowest first; None: never dropped."""
        if self.lingering:
            return (0, self.since, self.made)
        if self.pipeline:
            return None  # a request waits behind an answer in progress
        if self.reading == "body" or (self.reading == "head" and not self._answering()):
            return (1 if now - self.since >= STALLED_READ_S else 3, self.since, self.made)
        if self._answering():
            return None  # the app holds its request: a long poll, say
        return (2, self.since, self.made)

    def drop(self) -> None:
        """Close to make room: a read in progress is answered 503 and cut short."""
        self.connections.discard(self)
        if self.transport.is_closing():
            return
        if not self.lingering and self.reading is not None and self._can_answer():
            answer = unavailable("the service is full and this request was still arriving")
            self.transport.write(last_answer(answer, self.server_state.default_headers))
        self._cut_short()
        if self.task is not None:
            # Ending at the disconnect, it must not count against the limit uvicorn checks
            # (tasks as well as connections) for the request that takes this one's place.
            self.tasks.discard(self.task)
        self._cancel_deadline()
        self.transport.close()

    def _make_room(self, wanted: int) -> None:
        """Drop up to ``wanted`` other connections, in the order of ``eviction_rank``."""
        now = self.loop.time()
        ranked = [
            (rank, connection)
            for connection in self.connections
            if connection is not self
            and isinstance(connection, HttpConnection)
            and (rank := connection.eviction_rank(now)) is not None
        ]
        for _, connection in heapq.nsmallest(wanted, ranked, key=lambda pair: pair[0]):
            connection.drop()
