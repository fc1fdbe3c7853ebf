"""The npm tools some tests run (Redocly's linter, openapi-typescript, tsc), at the versions
of ``tests/support/npm/package-lock.json``.

``tool(name)`` installs them once, outside the repository (``npm ci`` into a folder of the
user's cache named after the lock file's digest, so a changed lock installs anew), and
gives the path of one. A test on a machine without Node 20.19 or newer and npm skips with
one line saying how to get them (fails instead under CI's switch, ``tests.support.system``).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.system import Program, need, unavailable

PINS = Path(__file__).resolve().parent / "npm"  # package.json and package-lock.json
NODE = Program("node", "nodejs", "LEASEQ_TEST_NODE")
NPM = Program("npm", "npm", "LEASEQ_TEST_NPM")
# @redocly/cli 2 wants Node 20.19 or newer (22.12 or newer on Node 22).
NODE_AT_LEAST = (20, 19)
INSTALL_TIMEOUT_S = 600


def node_version(node: str) -> tuple[int, int]:
    """``node --version`` as (major, minor)."""
    shown = subprocess.run([node, "--version"], capture_output=True, text=True, check=True)
    found = re.match(r"v(\d+)\.(\d+)", shown.stdout.strip())
    assert found, shown.stdout
    return int(found[1]), int(found[2])


def folder() -> Path:
    """Where the pinned tools are installed: the user's cache, by the lock's digest."""
    digest = hashlib.sha256((PINS / "package-lock.json").read_bytes()).hexdigest()[:16]
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "leaseq-tests" / f"npm-{digest}"


def tool(name: str) -> Path:
    """The path of the npm tool ``name``, installed first when it is not."""
    node = need(NODE)
    if node_version(node) < NODE_AT_LEAST:
        unavailable(
            f"Node {'.'.join(map(str, NODE_AT_LEAST))} or newer is needed, {node} is older: "
            "install Node 20 or 22 (nodejs.org, or a distribution's nodejs)"
        )
    installed = folder()
    if not installed.exists():
        npm = need(NPM)
        installed.parent.mkdir(parents=True, exist_ok=True)
        # Installed beside, then renamed: a folder that exists holds a whole install.
        with tempfile.TemporaryDirectory(dir=installed.parent) as staging:
            for pin in ("package.json", "package-lock.json"):
                shutil.copy(PINS / pin, staging)
            subprocess.run(
                [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
                cwd=staging,
                check=True,
                timeout=INSTALL_TIMEOUT_S,
            )
            try:
                os.rename(staging, installed)
            except OSError:
                if not installed.exists():  # not another run's install, done meanwhile
                    raise
            else:
                os.mkdir(staging)  # for the context manager to remove
    found = installed / "node_modules" / ".bin" / name
    assert found.exists(), f"npm ci put no {name} in {found.parent}"
    return found


def types_folder() -> Path:
    """The installed ``@types`` (Node's, for tsc)."""
    return folder() / "node_modules" / "@types"
