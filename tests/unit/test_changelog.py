"""CHANGELOG.md is in releases, as Keep a Changelog has it, and its newest release is the
version the packages carry.

An "Unreleased" section stays at the top for the changes since; below it each release is
``## [X.Y.Z] - YYYY-MM-DD``, newest first, with its changes under Added, Changed,
Deprecated, Removed, Fixed or Security. The newest is the version of ``leaseq-server``
(pyproject.toml), of ``leaseq`` (clients/python) and of the TypeScript package, so a
release is cut by moving "Unreleased" under a new heading and raising the three together.
"""

from __future__ import annotations

import json
import re
import tomllib
from datetime import date
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RELEASE = re.compile(r"^## \[(\d+)\.(\d+)\.(\d+)\] - (\d{4}-\d{2}-\d{2})$")
KINDS = {"Added", "Changed", "Deprecated", "Removed", "Fixed", "Security"}


def sections() -> list[str]:
    return re.findall(r"^## .*$", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)


def test_unreleased_on_top_then_releases_newest_first() -> None:
    [top, *releases] = sections()
    assert top == "## [Unreleased]"
    assert releases, "no release yet"
    found = []
    for heading in releases:
        match = RELEASE.match(heading)
        assert match, f"not a release heading: {heading!r}"
        date.fromisoformat(match[4])
        found.append((tuple(int(part) for part in match.groups()[:3]), match[4]))
    assert found == sorted(found, reverse=True)


def test_every_change_is_under_its_kind() -> None:
    kinds = re.findall(r"^### (.*)$", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE)
    assert set(kinds) <= KINDS


def test_the_newest_release_is_the_packages_version() -> None:
    newest = RELEASE.match(sections()[1])
    assert newest
    version = ".".join(newest.groups()[:3])
    server = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
    client = tomllib.loads((ROOT / "clients" / "python" / "pyproject.toml").read_text())
    typescript = json.loads((ROOT / "clients" / "typescript" / "package.json").read_text())
    assert {server, client["project"]["version"], typescript["version"]} == {version}


def test_no_change_is_recorded_twice() -> None:
    """A merge that keeps both sides of a conflict records a change twice (once in a
    release it was not part of): every entry is one of a kind."""
    entries = re.findall(
        r"^- .*?(?=^- |^#|\Z)", (ROOT / "CHANGELOG.md").read_text(), re.MULTILINE | re.DOTALL
    )
    seen: set[str] = set()
    twice = []
    for entry in entries:
        text = " ".join(entry.split())
        if text in seen:
            twice.append(text[:100])
        seen.add(text)
    assert twice == []
