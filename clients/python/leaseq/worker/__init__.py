"""The worker: lease leads over REST, heartbeat them, run a handler on each, complete or release.

``Worker`` is the loop (``loop``), made of one part per concept: ``leasing``,
``heartbeat``, ``execution`` (running the handler) and ``settling``, over the
state they share (``core``). ``Held`` is a lease in flight and its time
(``held``), ``Job`` what a handler gets (``job``), ``Command`` the handler of
``leaseq worker -- COMMAND`` (``command``), run through ``guard``,
``load_handler`` what ``--handler`` names (``handlers``), ``runner`` what
``leaseq worker`` runs, ``stats`` and ``metrics`` what it counts. The names
below are the worker's public API; the modules' other names are its machinery.
"""

from leaseq.worker.command import Command, CommandFailed, CommandNotStartable
from leaseq.worker.core import default_retry_delay
from leaseq.worker.handlers import load_handler
from leaseq.worker.job import (
    Cached,
    CancelToken,
    Handler,
    HandlerCancelled,
    HandlerUnusable,
    Job,
    StopReason,
    Throttled,
)
from leaseq.worker.loop import Worker, run_worker
from leaseq.worker.stats import WorkerStats

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
    "StopReason",
    "Throttled",
    "Worker",
    "WorkerStats",
    "default_retry_delay",
    "load_handler",
    "run_worker",
]
