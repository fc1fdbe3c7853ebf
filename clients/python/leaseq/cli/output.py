"""What every ``leaseq`` command prints, and the one way a failure becomes one line.

Exit statuses, for every command: 0 success; 1 the command failed (the
service unreachable or refusing, a bad line of input, for ``report`` a broken
promise); 2 a usage error; 3 no leaseq database where the command looked
(``report``, ``prune``); 4 ``report`` found nothing to audit (the session has
no leads, or the ledger none of them).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

import typer
from rich.console import Console
from rich.markup import escape

from leaseq.errors import InvalidInput, LeaseqError

EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_NO_DATABASE = 3
EXIT_NOTHING_TO_AUDIT = 4

err = Console(stderr=True)
out = Console()


class CliError(Exception):
    """A command failed; the message is one line, ``exit_code`` the process's status."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(one_line(message))
        self.exit_code = exit_code


def one_line(text: str) -> str:
    """``text`` with every run of whitespace (newlines too) as one space."""
    return " ".join(text.split())


def plural(count: int, noun: str) -> str:
    """``1 lead``, ``2 leads``."""
    return f"{count} {noun}" if count == 1 else f"{count} {noun}s"


def fail(message: str, code: int = EXIT_FAILURE) -> NoReturn:
    """Print a one-line error and exit non-zero."""
    err.print(f"[red]error:[/red] {escape(one_line(message))}", highlight=False, soft_wrap=True)
    raise typer.Exit(code)


def say(line: str) -> None:
    """Print one line as it is (no markup, no highlighting, no wrapping)."""
    out.print(line, highlight=False, markup=False, soft_wrap=True)


@contextmanager
def one_line_errors() -> Iterator[None]:
    """The one error handler of the commands: a CliError or LeaseqError becomes one line.

    Input the service refuses (InvalidInput) is a usage error (2).
    """
    try:
        yield
    except CliError as exc:
        fail(str(exc), exc.exit_code)
    except InvalidInput as exc:
        fail(f"{exc.code}: {exc.detail}", EXIT_USAGE)
    except LeaseqError as exc:
        fail(f"{exc.code}: {exc.detail}")
