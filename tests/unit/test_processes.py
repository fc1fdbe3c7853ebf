"""The helpers that start processes fail a test without the ``service`` mark, so none slips
into the README's command unmarked (tests/support/processes.py)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tests.support import processes


class Marked:
    """What ``processes.running`` reads of a test: its closest marker of a name."""

    def __init__(self, marked: bool) -> None:
        self.marked = marked

    def get_closest_marker(self, name: str) -> Any:
        return pytest.mark.service if self.marked and name == processes.MARK else None


def test_a_test_without_the_mark_fails_when_it_starts_a_process() -> None:
    try:
        processes.running(Marked(marked=False))  # type: ignore[arg-type]
        with pytest.raises(AssertionError, match=re.escape("mark it pytest.mark.service")):
            processes.starting("leaseq serve")
        processes.running(Marked(marked=True))  # type: ignore[arg-type]
        processes.starting("leaseq serve")
        processes.running(None)  # between tests: a module's fixture may start one
        processes.starting("leaseq serve")
    finally:
        processes.running(None)


def test_this_test_runs_unmarked() -> None:
    """The autouse fixture of tests/conftest.py told the helpers so."""
    with pytest.raises(AssertionError, match="this test starts a leaseq process"):
        processes.starting("a leaseq process")
