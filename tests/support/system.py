"""The system programs some tests drive (Chromium, PgBouncer, Citus, curl and jq): found, or the
test skips.

A test that needs a program the machine lacks skips with one line saying what
to install. With ``LEASEQ_TEST_REQUIRE_SYSTEM_PACKAGES=1`` (``.ci/run`` sets
it) the same line fails the test instead, so CI proves those tests ran.

A program is looked for on ``LEASEQ_TEST_PATH`` when it is set, else on
``PATH`` and then the sbin folders a root shell has (Debian installs
``pgbouncer`` in /usr/sbin, which a user's PATH often lacks). A variable of
its own (``LEASEQ_TEST_CHROMIUM``, ``LEASEQ_TEST_PGBOUNCER``) names the binary
outright.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from typing import NoReturn

import pytest

REQUIRE_ENV = "LEASEQ_TEST_REQUIRE_SYSTEM_PACKAGES"
PATH_ENV = "LEASEQ_TEST_PATH"
SBIN = ("/usr/local/sbin", "/usr/sbin", "/sbin")


@dataclass(frozen=True)
class Program:
    """A program some tests need, and the Debian package that installs it."""

    name: str
    package: str
    env: str  # names the binary outright

    def find(self) -> str | None:
        """The program's path, or None when this machine lacks it."""
        named = os.environ.get(self.env)
        if named:
            return shutil.which(named)
        return shutil.which(self.name, path=search_path())

    def missing(self) -> str:
        """The one line a test that needs it says when it is missing."""
        named = os.environ.get(self.env)
        if named:
            return f"{self.env}={named} is not an executable program"
        return f"{self.name} is not installed: apt-get install -y {self.package}"


CHROMIUM = Program("chromium", "chromium", "LEASEQ_TEST_CHROMIUM")
PGBOUNCER = Program("pgbouncer", "pgbouncer", "LEASEQ_TEST_PGBOUNCER")
# The bash worker of docs/any-language.md speaks HTTP with curl and JSON with jq.
CURL = Program("curl", "curl", "LEASEQ_TEST_CURL")
JQ = Program("jq", "jq", "LEASEQ_TEST_JQ")


def search_path() -> str:
    """Where programs are looked for."""
    given = os.environ.get(PATH_ENV)
    if given is not None:
        return given
    return os.pathsep.join([os.environ.get("PATH", os.defpath), *SBIN])


def required() -> bool:
    """True when a missing program fails the test instead of skipping it (CI)."""
    return os.environ.get(REQUIRE_ENV) == "1"


def need(program: Program) -> str:
    """The program's path; skips the test (fails it, under CI's switch) when it is missing."""
    found = program.find()
    if found is not None:
        return found
    unavailable(program.missing())


def unavailable(missing: str) -> NoReturn:
    """Skip the test, saying in one line what is missing; fail it instead under CI's switch."""
    if required():
        pytest.fail(f"{missing} ({REQUIRE_ENV}=1)", pytrace=False)
    pytest.skip(missing)
