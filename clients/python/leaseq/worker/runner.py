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
from collections.abc import Sequence
from dataclasses import dataclass

from rich.console import Console
from rich.live import Live
from rich.logging import RichHandler
from rich.text import Text

from leaseq.client import AsyncClient
from leaseq.worker import metrics
from leaseq.worker.command import Command
from leaseq.worker.handlers import load_handler
from leaseq.worker.job import Handler
from leaseq.worker.loop import (
    DEFAULT_GRACE_S,
    DEFAULT_TTL_S,
    DEFAULT_WAIT_S,
    RETRY_BASE_S,
    Worker,
    WorkerStats,
    default_retry_delay,
)

log = logging.getLogger("leaseq.worker")
PROGRESS_REFRESH_PER_S = 4


@dataclass(frozen=True, slots=True)
class Options:
    """``leaseq worker``'s options, with the defaults its flags show."""

    url: str
    session: str
    command: Sequence[str] = ()
    handler: str | None = None
    token: str | None = None
    owner: str | None = None
    concurrency: int = 1
    ttl_s: float = DEFAULT_TTL_S
    wait_s: float = DEFAULT_WAIT_S
    max_runtime_s: float | None = None
    grace_s: float = DEFAULT_GRACE_S
    retry_delay_s: float = RETRY_BASE_S
    forever: bool = False
    quiet: bool = False


def handler_of(options: Options) -> Handler:
    """The program or the callable to run per lead. Raises ValueError."""
    if bool(options.command) == (options.handler is not None):
        raise ValueError("give a command after -- or --handler MODULE:FUNCTION (one of them)")
    if options.handler is None:
        return Command(options.command)
    try:
        return load_handler(options.handler)
    except (ImportError, AttributeError, ValueError) as exc:
        raise ValueError(f"--handler {options.handler}: {exc}") from None


def _logging(quiet: bool, console: Console) -> None:
    if quiet:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    else:
        handler = RichHandler(console=console, show_path=False, markup=False)
        logging.basicConfig(level=logging.WARNING, format="%(message)s", handlers=[handler])


def progress(session: str, stats: WorkerStats) -> Text:
    """The progress line: what the worker did so far."""
    s = stats
    return Text(
        f"{session}: leased {s.leased} · done {s.done + s.cached} · failed {s.failed} · "
        f"lost {s.lost} · in flight {s.in_flight} · {s.rate():.1f}/s"
    )


def build(options: Options) -> Worker:
    """The worker ``options`` describe, with a client of its own. Raises ValueError."""
    handle = handler_of(options)
    return Worker(
        AsyncClient(options.url, token=options.token),
        options.session,
        handle,
        owner=options.owner,
        concurrency=options.concurrency,
        ttl_s=options.ttl_s,
        wait_s=options.wait_s,
        max_runtime_s=options.max_runtime_s,
        grace_s=options.grace_s,
        forever=options.forever,
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
        line = functools.partial(progress, options.session, worker.stats)
        with Live(get_renderable=line, console=console, refresh_per_second=PROGRESS_REFRESH_PER_S):
            asyncio.run(work())
    s = worker.stats
    log.info(
        "finished: leased %d, done %d, cached %d, failed %d, released %d, lost %d",
        s.leased,
        s.done,
        s.cached,
        s.failed,
        s.released,
        s.lost,
    )
    return s
