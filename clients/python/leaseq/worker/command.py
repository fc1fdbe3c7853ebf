"""The handler of ``leaseq worker -- COMMAND``: a program run once per lead, through a guard.

Each run goes through ``leaseq.worker.guard``, a small process between the
worker and the command, so the command's whole process tree dies when the
worker asks, when the lease is gone, and when the worker itself dies, even
of SIGKILL.

Checkpoints go through a file (``CheckpointFile``): ``LEASEQ_CHECKPOINT_FILE``
names it, holding the lead's checkpoint as JSON when it has one; the command
writes its own there (best by writing another file and renaming it over), and
the worker reads each new version and sends it with the next heartbeat.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from leaseq.model import JSON
from leaseq.worker import guard
from leaseq.worker.job import HandlerUnusable, Job, StopReason

log = logging.getLogger("leaseq.worker")

STDERR_TAIL_CHARS = 2000  # of a failed command's stderr, kept as the attempt's error
GUARD = Path(guard.__file__).resolve()
SECRET_PREFIX = "LEASEQ_"  # the worker's own settings: its token, the service's URL ...
GUARD_SETTLE_S = 1.0  # beyond the kill grace, for the guard to reap the tree and exit
CHECKPOINT_ENV = "LEASEQ_CHECKPOINT_FILE"
CHECKPOINT_POLL_S = 0.2  # how often the worker looks for a new checkpoint of a command


class CommandFailed(Exception):
    """The command exited with a non-zero status."""


class CommandNotStartable(HandlerUnusable):
    """The command cannot be started (not found, not executable): no lead can run."""


def command_environment(
    base: Mapping[str, str], job: Job, checkpoint_file: Path | None = None
) -> dict[str, str]:
    """What a command sees: ``base`` without any ``LEASEQ_*`` variable, plus the lead's own.

    The worker's token (``LEASEQ_TOKEN``) and every other setting of leaseq
    stay with the worker.
    """
    env = {k: v for k, v in base.items() if not k.startswith(SECRET_PREFIX)}
    env.update(
        LEASEQ_LEAD_ID=str(job.id), LEASEQ_ATTEMPT=str(job.attempt), LEASEQ_SESSION=job.session
    )
    if checkpoint_file is not None:
        env[CHECKPOINT_ENV] = str(checkpoint_file)
    return env


class CheckpointFile:
    """The file of one run through which a command reads its lead's checkpoint and leaves its
    own: in a folder of its own (owner only), removed after the run."""

    def __init__(self, job: Job) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="leaseq-checkpoint-"))
        self.path = self.folder / "checkpoint.json"
        if job.saved_checkpoint is not None:
            self.path.write_text(json.dumps(job.saved_checkpoint))
        self._seen = self._stamp()

    def _stamp(self) -> tuple[int, int, int] | None:
        try:
            found = self.path.stat()
        except OSError:
            return None
        return (found.st_mtime_ns, found.st_size, found.st_ino)

    def collect(self, job: Job) -> None:
        """A new version of the file becomes the job's checkpoint (one not JSON yet: skipped;
        its completed write is another version)."""
        stamp = self._stamp()
        if stamp is None or stamp == self._seen:
            return
        self._seen = stamp
        try:
            value = json.loads(self.path.read_text())
            job.checkpoint(value)
        except (OSError, ValueError) as exc:
            log.warning("lead %d: the checkpoint file holds no JSON checkpoint: %s", job.id, exc)

    async def watch(self, job: Job) -> None:
        """Collect new versions until cancelled."""
        while True:
            await asyncio.sleep(CHECKPOINT_POLL_S)
            self.collect(job)

    def close(self) -> None:
        shutil.rmtree(self.folder, ignore_errors=True)


class Command:
    """A handler that runs ``argv`` once per lead.

    The payload goes as JSON on stdin; ``LEASEQ_LEAD_ID``, ``LEASEQ_ATTEMPT``,
    ``LEASEQ_SESSION`` and ``LEASEQ_CHECKPOINT_FILE`` (``CheckpointFile``) are
    in its environment, and no other ``LEASEQ_*`` variable. Exit 0 → done,
    with stdout parsed as JSON (or ``{"output": text}``; nothing → null).
    Non-zero → the failure path, with the tail of stderr as the error.
    Stopped (lease lost, not renewed in time, max runtime, shutdown) → its
    whole process tree gets SIGTERM, then SIGKILL
    ``kill_grace_s`` later (the job's, unless given here); a renewal refused
    (the lease is someone else's already) gets SIGKILL at once. What the
    command leaves running when it exits is ended the same way.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        kill_grace_s: float | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not argv:
            raise ValueError("a command is needed")
        self.argv = list(argv)
        self.kill_grace_s = kill_grace_s
        self.env = dict(os.environ if env is None else env)

    async def __call__(self, job: Job) -> JSON:
        checkpoints = CheckpointFile(job)
        watching = asyncio.ensure_future(checkpoints.watch(job))
        try:
            return await self._run(job, checkpoints.path)
        finally:
            watching.cancel()
            await asyncio.gather(watching, return_exceptions=True)
            checkpoints.collect(job)  # its last word, for a release that may follow
            checkpoints.close()

    async def _run(self, job: Job, checkpoint_file: Path) -> JSON:
        grace = job.kill_grace_s if self.kill_grace_s is None else self.kill_grace_s
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",  # the guard reads no PYTHON* variable and imports nothing of the user's
            "-S",
            str(GUARD),
            f"{grace:g}",
            str(os.getpid()),
            "--",
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=command_environment(self.env, job, checkpoint_file),
            start_new_session=True,  # no terminal's Ctrl-C: the worker decides
        )
        try:
            stdout, stderr = await process.communicate(json.dumps(job.payload).encode())
        except BaseException:
            await self._stop(process, job, grace)
            raise
        text = stderr.decode(errors="replace")
        if process.returncode == guard.CANNOT_START_STATUS and text.startswith(guard.CANNOT_START):
            raise CommandNotStartable(text.strip().removeprefix("leaseq-guard: "))
        if process.returncode != 0:
            status = process.returncode
            how = (
                f"killed by signal {-status}"
                if status is not None and status < 0
                else f"exit status {status}"
            )
            tail = text.strip()[-STDERR_TAIL_CHARS:]
            raise CommandFailed(f"{how}: {tail}" if tail else how)
        if text:
            log.debug("lead %d stderr: %s", job.id, text[-STDERR_TAIL_CHARS:])
        return parse_output(stdout)

    async def _stop(self, process: asyncio.subprocess.Process, job: Job, grace: float) -> None:
        """End the command's tree: at once for a lease refused, else SIGTERM then SIGKILL.

        The guard does it; if the guard itself does not end in time, it gets
        SIGKILL, and the command with it (its parent-death signal).
        """
        how = guard.NOW if job.cancel_token.reason is StopReason.LOST else signal.SIGTERM
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, how)
        try:
            async with asyncio.timeout(grace + GUARD_SETTLE_S):
                await process.wait()
            return
        except TimeoutError:
            log.error("lead %d: the guard of its command did not end; killing it", job.id)
        with contextlib.suppress(ProcessLookupError):
            os.kill(process.pid, signal.SIGKILL)
        await process.wait()


def parse_output(stdout: bytes) -> JSON:
    """A command's stdout as a result: JSON if it parses, else ``{"output": text}``; empty: None."""
    text = stdout.decode(errors="replace").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"output": text}
