"""The worker: lease leads over REST, heartbeat them, run a handler on each, complete or release.

``Worker`` is the loop (``loop``), ``Held`` a lease in flight and its time
(``held``), ``Job`` what a handler gets (``job``), ``Command`` the handler of
``leaseq worker -- COMMAND`` (``command``), run through ``guard``,
``load_handler`` what ``--handler`` names (``handlers``), ``runner`` what
``leaseq worker`` runs, and ``metrics`` its optional Prometheus counters.
"""

from leaseq.worker.command import Command, CommandFailed, CommandNotStartable
from leaseq.worker.handlers import load_handler
from leaseq.worker.job import (
    Cached,
    CancelToken,
    Handler,
    HandlerCancelled,
    HandlerUnusable,
    Job,
    StopReason,
)
from leaseq.worker.loop import Outcome, Worker, WorkerStats, default_retry_delay, run_worker

__all__ = [
    "Cached",
    "CancelToken",
    "Command",
    "CommandFailed",
    "CommandNotStartable",
    "Handler",
    "HandlerCancelled",
    "HandlerUnusable",
    "Job",
    "Outcome",
    "StopReason",
    "Worker",
    "WorkerStats",
    "default_retry_delay",
    "load_handler",
    "run_worker",
]
