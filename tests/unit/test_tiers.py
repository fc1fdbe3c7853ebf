"""Every test lives in its tier's folder, and the shared helpers in tests/support.

A tier is what a test needs (README, "Development"): ``python -m pytest tests/unit`` runs
in seconds with nothing started, and .ci/run takes that tier first. A ``test_*.py`` left
loose in tests/, or a folder no tier names, would fall outside every such selection.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"
# Each tier and what it needs; tests/support holds what more than one tier uses.
TIERS = {
    "unit": "nothing: no PostgreSQL, no service, no network",
    "integration": "PostgreSQL, and `leaseq serve` where the client, CLI or worker need it",
    "api": "the HTTP surface, in-process or through `leaseq serve`",
    "deploy": "how leaseq runs: processes, settings, PgBouncer, the deployment files",
    "chaos": "kills and restarts of everything at once",
    "citus": "a Citus cluster",
    "clients": "each client's own tests and the conformance set: `leaseq serve`, and Node or Go",
}
SUPPORT = "support"
# What may sit at the top of tests/ besides the folders.
TOP_FILES = {"__init__.py", "conftest.py"}


def folders() -> set[str]:
    return {path.name for path in TESTS.iterdir() if path.is_dir() and path.name != "__pycache__"}


def test_no_test_sits_loose_in_tests() -> None:
    loose = sorted(path.name for path in TESTS.glob("*.py") if path.name not in TOP_FILES)
    assert loose == [], f"move these into a tier folder ({', '.join(TIERS)}) or tests/support"


def test_every_folder_is_a_tier_or_the_support() -> None:
    unknown = folders() - set(TIERS) - {SUPPORT}
    assert unknown == set(), f"not a tier: {sorted(unknown)}; the tiers are {sorted(TIERS)}"
    assert set(TIERS) <= folders()


def test_each_tier_is_a_package_with_tests() -> None:
    for tier in TIERS:
        folder = TESTS / tier
        assert (folder / "__init__.py").is_file(), tier
        assert any(folder.glob("test_*.py")), f"tests/{tier} has no tests"


def test_the_support_holds_no_tests() -> None:
    support = TESTS / SUPPORT
    assert (support / "__init__.py").is_file()
    assert sorted(path.name for path in support.rglob("test_*.py")) == []


def test_pytest_and_ci_find_every_tier() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]
    assert config["ini_options"]["testpaths"] == ["tests"]
    assert "pytest tests/unit" in (ROOT / ".ci" / "run").read_text()
