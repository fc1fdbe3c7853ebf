"""Which tests start processes: the README's command leaves them out (docs/testing.md).

A test that starts a ``leaseq`` process (the CLI, ``leaseq serve``, ``leaseq worker``),
another pytest or mkdocs is marked ``service``: each such process costs about a second of a
CPU before it does anything, and those tests took 40% of the README's command (621 s to
374 s). CI and ``--run-slow`` run them, as does a run naming their paths. The helpers that
start such a process call ``starting``, which fails a test without the mark, so none slips
back into the README's command unmarked; ``tests/conftest.py`` says which test is running.
"""

from __future__ import annotations

import pytest

MARK = "service"
_marked: bool | None = None  # whether the running test has the mark; None: between tests


def running(item: pytest.Item | None) -> None:
    """The test now running (None once it ended)."""
    global _marked
    _marked = None if item is None else item.get_closest_marker(MARK) is not None


def starting(what: str) -> None:
    """Before a helper starts ``what``: fails a running test that lacks the mark."""
    if _marked is False:
        raise AssertionError(
            f"this test starts {what}: mark it pytest.mark.{MARK} (docs/testing.md, "
            "'What each command runs'), so the README's command leaves it to CI"
        )
