"""The npm tools some tests run (Redocly's linter, openapi-typescript, tsc), at the versions
of ``tests/support/npm/package-lock.json``.

``tool(name)`` installs them once (``npm ci`` into ``tests/support/npm/node_modules``,
git-ignored) and gives the path of one; a test on a machine without Node 20.19 or newer
and npm skips with one line saying how to get them (fails instead under CI's switch,
``tests.support.system``).
"""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from tests.support.system import Program, need, unavailable

FOLDER = Path(__file__).resolve().parent / "npm"
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


def tool(name: str) -> Path:
    """The path of the npm tool ``name``, installed first when it is not."""
    node = need(NODE)
    if node_version(node) < NODE_AT_LEAST:
        unavailable(
            f"Node {'.'.join(map(str, NODE_AT_LEAST))} or newer is needed, {node} is older: "
            "install Node 20 or 22 (nodejs.org, or a distribution's nodejs)"
        )
    found = FOLDER / "node_modules" / ".bin" / name
    lock = FOLDER / "package-lock.json"
    installed = FOLDER / "node_modules" / ".package-lock.json"  # npm writes it as it installs
    if not installed.exists() or installed.stat().st_mtime < lock.stat().st_mtime:
        npm = need(NPM)
        subprocess.run(
            [npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"],
            cwd=FOLDER,
            check=True,
            timeout=INSTALL_TIMEOUT_S,
        )
    assert found.exists(), f"npm ci put no {name} in {found.parent}"
    return found
