"""The handler of ``leaseq worker -- COMMAND``: a program run once per lead."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
from collections.abc import Mapping, Sequence

from leaseq.model import JSON
from leaseq.worker.job import Job

log = logging.getLogger("leaseq.worker")

STDERR_TAIL_CHARS = 2000  # of a failed command's stderr, kept as the attempt's error


class CommandFailed(Exception):
    """The command exited with a non-zero status."""


class Command:
    """A handler that runs ``argv`` once per lead.

    The payload goes as JSON on stdin; ``LEASEQ_LEAD_ID``, ``LEASEQ_ATTEMPT``
    and ``LEASEQ_SESSION`` are in its environment. Exit 0 → done, with stdout
    parsed as JSON (or ``{"output": text}``; nothing → null). Non-zero → the
    failure path, with the tail of stderr as the error. Cancelled (lease lost,
    max runtime, shutdown) → its process group gets SIGTERM, then SIGKILL
    after ``kill_timeout_s``.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        kill_timeout_s: float = 2.0,
        env: Mapping[str, str] | None = None,
    ) -> None:
        if not argv:
            raise ValueError("a command is needed")
        self.argv = list(argv)
        self.kill_timeout_s = kill_timeout_s
        self.env = dict(os.environ if env is None else env)

    async def __call__(self, job: Job) -> JSON:
        env = {
            **self.env,
            "LEASEQ_LEAD_ID": str(job.id),
            "LEASEQ_ATTEMPT": str(job.attempt),
            "LEASEQ_SESSION": job.session,
        }
        process = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=env,
            start_new_session=True,  # its own process group, killed as one
        )
        try:
            stdout, stderr = await process.communicate(json.dumps(job.payload).encode())
        except BaseException:
            await self._kill(process)
            raise
        if process.returncode != 0:
            status = process.returncode
            how = (
                f"killed by signal {-status}"
                if status is not None and status < 0
                else f"exit status {status}"
            )
            tail = stderr.decode(errors="replace").strip()[-STDERR_TAIL_CHARS:]
            raise CommandFailed(f"{how}: {tail}" if tail else how)
        if stderr:
            tail = stderr.decode(errors="replace")[-STDERR_TAIL_CHARS:]
            log.debug("lead %d stderr: %s", job.id, tail)
        return parse_output(stdout)

    async def _kill(self, process: asyncio.subprocess.Process) -> None:
        """SIGTERM to the process group, SIGKILL if it is still there after ``kill_timeout_s``."""
        for signum, patience in ((signal.SIGTERM, self.kill_timeout_s), (signal.SIGKILL, None)):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signum)
            try:
                async with asyncio.timeout(patience):
                    await process.wait()
            except TimeoutError:
                continue
            if signum == signal.SIGTERM:  # the leader is gone; make sure its group is too
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(process.pid, signal.SIGKILL)
            return


def parse_output(stdout: bytes) -> JSON:
    """A command's stdout as a result: JSON if it parses, else ``{"output": text}``; empty: None."""
    text = stdout.decode(errors="replace").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"output": text}
