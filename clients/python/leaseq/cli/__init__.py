"""The ``leaseq`` command line: the client's verbs here, the server's through entry points.

``root`` holds the command group and the loading of other distributions'
commands; ``verbs`` the calls to a running service (push, stats, sweep);
``sessions`` a session's settings (weight, cap, rate); ``leads`` a session's leads
listed by filter, retried or cancelled many at once; ``schedules`` leads
pushed on a schedule; ``tokens`` scoped API tokens;
``worker`` the work loop; ``docs`` where the docs site is; ``output`` the printing
and the one error handler.
"""

from leaseq.cli import docs, leads, schedules, sessions, tokens, verbs, worker
from leaseq.cli.root import app

__all__ = [
    "app",
    "docs",
    "leads",
    "main",
    "schedules",
    "sessions",
    "tokens",
    "verbs",
    "worker",
]


def main() -> None:
    """The ``leaseq`` console script."""
    app()
