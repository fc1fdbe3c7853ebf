"""Go for the tests that build or run the Go client: the toolchain, or a skip saying how to
get it, and the environment every ``go`` command of the tests runs in.

That environment keeps Go's build cache and module folder in a folder the tests own (not
the user's home, which may be another user's or read-only), forbids the network
(``GOPROXY=off``: the client needs the standard library alone, so nothing is downloaded)
and needs no C compiler (``CGO_ENABLED=0``): the tests run offline, as root or not.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from tests.support import system
from tests.support.serving import ROOT

GO_TOOL = system.Program("go", "golang-go", "LEASEQ_TEST_GO")
CLIENT = ROOT / "clients" / "go"


def go_env(folder: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a ``go`` command whose caches live in ``folder`` adds to the tests' environment
    (``child_env``), with ``extra``."""
    folder.mkdir(parents=True, exist_ok=True)
    return {
        "GOCACHE": str(folder / "cache"),
        "GOPATH": str(folder / "path"),
        "GOFLAGS": "-modcacherw",
        "GOPROXY": "off",
        "GOTOOLCHAIN": "local",
        "GOTELEMETRY": "off",
        "CGO_ENABLED": "0",
        **(extra or {}),
    }
