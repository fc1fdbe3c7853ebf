"""What ``leaseq worker`` runs: the worker built from its options, logging, the progress line.

``build(options)`` makes the handler (a program per lead, or a Python
callable), the client and the ``Worker``, and raises ``ValueError`` for a bad
option. ``serve_metrics`` serves its Prometheus metrics. ``run`` shows a
progress line on stderr (or logs only, ``quiet``) and works until the queue is empty, or until
SIGTERM/SIGINT; an answer of the service that ends the run raises its
``LeaseqError``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.text import Text

from leaseq import AsyncClient
from leaseq.worker import metrics
from leaseq.worker.command import Command
from leaseq.worker.core import (
    DEFAULT_GIVE_UP_S,
    DEFAULT_GRACE_S,
    DEFAULT_WAIT_S,
    MAX_SECONDS,
    RETRY_BASE_S,
    check_seconds,
    default_retry_delay,
)
from leaseq.worker.handlers import load_handler
from leaseq.worker.job import Handler
from leaseq.worker.loop import Worker
from leaseq.worker.stats import WorkerStats

log = logging.getLogger("leaseq.worker")
PROGRESS_REFRESH_PER_S = 4
CHATTY_LOGGERS = ("httpx", "httpcore")
# Worker's options by the flag of ``leaseq worker`` that sets each.
FLAGS = {
    "ttl_s": "--ttl",
    "wait_s": "--wait",
    "max_runtime_s": "--max-runtime",
    "grace_s": "--grace",
    "kill_grace_s": "--kill-grace",
    "give_up_s": "--give-up-after",
    "concurrency": "--concurrency",
    "prefetch": "--prefetch",
}


@dataclass(frozen=True, slots=True)
class Options:
    """``leaseq worker``'s options, with the defaults its flags show."""

    url: str
    sessions: Sequence[str] = ()  # one or more; none with any_session
    any_session: bool = False
    command: Sequence[str] = ()
    handler: str | None = None
    token: str | None = None
    owner: str | None = None
    concurrency: int = 1
    prefetch: int | None = None  # 1, a quarter of the concurrency above 4
    ttl_s: float | None = None  # 30 s (DEFAULT_WORKER_TTL_S)
    wait_s: float = DEFAULT_WAIT_S
    max_runtime_s: float | None = None
    grace_s: float = DEFAULT_GRACE_S
    kill_grace_s: float | None = None  # 2 s, less for a short ttl
    retry_delay_s: float = RETRY_BASE_S
    give_up_s: float = DEFAULT_GIVE_UP_S
    forever: bool = False
    quiet: bool = False
    throttle_exit: int | None = None  # a command's exit code that means "throttled"
    throttle_s: float = 60.0  # how long its session then pauses

    @property
    def scope(self) -> str | tuple[str, ...] | None:
        """What the worker leases from: a session, several (fair by weight), or any (None)."""
        if len(self.sessions) == 1:
            return self.sessions[0]
        return None if self.any_session else tuple(self.sessions)

    def describe(self) -> str:
        """The sessions as the progress line names them."""
        return "any session" if self.any_session else ", ".join(self.sessions)


def handler_of(options: Options) -> Handler:
    """The program or the callable to run per lead. Raises ValueError."""
    if bool(options.command) == (options.handler is not None):
        raise ValueError("give a command after -- or --handler MODULE:FUNCTION (one of them)")
    if options.throttle_exit is not None and options.handler is not None:
        raise ValueError("--throttle-exit is for a command: a handler raises Throttled")
    if options.handler is None:
        program = options.command[0]
        if shutil.which(program) is None:
            raise ValueError(f"cannot run {program}: not found, or not executable")
        return Command(
            options.command, throttle_exit=options.throttle_exit, throttle_s=options.throttle_s
        )
    try:
        return load_handler(options.handler)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"--handler {options.handler}: {exc}") from None


def _logging(quiet: bool, console: Console) -> None:
    if quiet:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        for chatty in CHATTY_LOGGERS:  # a line per HTTP request would drown the worker's own
            logging.getLogger(chatty).setLevel(logging.WARNING)
    else:
        handler = RichHandler(console=console, show_path=False, markup=False)
        logging.basicConfig(level=logging.WARNING, format="%(message)s", handlers=[handler])


def progress(session: str, stats: WorkerStats) -> Text:
    """The progress line: what the worker did so far; the rate counts busy time only."""
    s = stats
    return Text(
        f"{session}: leased {s.leased} · done {s.done + s.cached} · failed {s.failed} · "
        f"lost {s.lost} · in flight {s.in_flight} · {s.rate():.1f}/s"
    )


def build(options: Options) -> Worker:
    """The worker ``options`` describe, with a client of its own. Raises ValueError.

    Every option is checked before anything is sent: nothing is leased for a bad one.
    """
    check_seconds("--retry-delay", options.retry_delay_s, low=0, high=MAX_SECONDS)
    if bool(options.sessions) == options.any_session:
        raise ValueError("give --session NAME (once or more) or --any-session")
    handle = handler_of(options)
    try:
        return _worker(options, handle)
    except ValueError as exc:  # named as the flag the person typed
        name, _, rest = str(exc).partition(" ")
        raise ValueError(f"{FLAGS.get(name, name)} {rest}") from None


def _worker(options: Options, handle: Handler) -> Worker:
    return Worker(
        AsyncClient(options.url, token=options.token),
        options.scope,
        handle,
        owner=options.owner,
        concurrency=options.concurrency,
        prefetch=options.prefetch,
        ttl_s=options.ttl_s,
        wait_s=options.wait_s,
        max_runtime_s=options.max_runtime_s,
        grace_s=options.grace_s,
        kill_grace_s=options.kill_grace_s,
        forever=options.forever,
        give_up_s=options.give_up_s,
        retry_delay=functools.partial(default_retry_delay, base_s=options.retry_delay_s),
    )


def serve_metrics(worker: Worker, port: int) -> None:
    """Count into Prometheus and serve it on 127.0.0.1:``port``.

    Raises MetricsUnavailable without prometheus-client, OSError when the port is taken.
    """
    worker.metrics = metrics.serve(port)


def run(worker: Worker, options: Options, console: Console) -> WorkerStats:
    """Work until the queue is empty, or a signal; closes the worker's client.

    Raises LeaseqError when the service refuses the worker.
    """
    _logging(options.quiet, console)

    async def work() -> None:
        async with worker.client:
            await worker.run(handle_signals=True)

    if options.quiet:
        asyncio.run(work())
    else:
        line = functools.partial(progress, options.describe(), worker.stats)
        live = Live(
            get_renderable=line,
            console=console,
            refresh_per_second=PROGRESS_REFRESH_PER_S,
            transient=True,  # erased at the end: the last state is printed as a line of its own
        )
        try:
            with live:
                asyncio.run(work())
        finally:
            console.print(line())  # ends with a newline: an error after it starts a line
    s = worker.stats
    log.info(
        "finished: leased %d, done %d, cached %d, failed %d, released %d, lost %d, abandoned %d",
        s.leased,
        s.done,
        s.cached,
        s.failed,
        s.released,
        s.lost,
        s.abandoned,
    )
    return s
