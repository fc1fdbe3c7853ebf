"""The handler of ``leaseq worker -- COMMAND``: a program run once per lead, through a guard.

Each run goes through a guard (``leaseq.worker.guard``), a small process
between the worker and the command, so the command's whole process tree dies
when the worker asks, when the lease is gone, and when the worker itself
dies, even of SIGKILL. A guard is started once per slot and runs that slot's
leads one after another (``Guards``): a lead costs a fork and an exec of the
command, and three pipes, never an interpreter's start.

Checkpoints go through a file (``CheckpointFile``): ``LEASEQ_CHECKPOINT_FILE``
names it, holding the lead's checkpoint as JSON when it has one; the command
writes its own there (best by writing another file and renaming it over), and
each renewal of the lead reads the newest version and carries it, as does the
renewal before a release, once the command has exited.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from leaseq.model import JSON
from leaseq.worker import guard
from leaseq.worker.job import HandlerUnusable, Job, StopReason, Throttled

log = logging.getLogger("leaseq.worker")

STDERR_TAIL_CHARS = 2000  # of a failed command's stderr, kept as the attempt's error
GUARD = Path(guard.__file__).resolve()
SECRET_PREFIX = "LEASEQ_"  # the worker's own settings: its token, the service's URL ...
GUARD_SETTLE_S = 1.0  # beyond the kill grace, for the guard to reap the tree and answer
CHECKPOINT_ENV = "LEASEQ_CHECKPOINT_FILE"
TRACEPARENT_ENV = "TRACEPARENT"  # the lead's W3C traceparent (the name OpenTelemetry reads)
READ_BYTES = 1 << 16


class CommandFailed(Exception):
    """The command exited with a non-zero status."""


class CommandNotStartable(HandlerUnusable):
    """The command cannot be started (not found, not executable): no lead can run."""


def without_secrets(base: Mapping[str, str]) -> dict[str, str]:
    """``base`` without any ``LEASEQ_*`` variable: what a guard, and so a command, inherits."""
    return {k: v for k, v in base.items() if not k.startswith(SECRET_PREFIX)}


def lead_variables(job: Job, checkpoint_file: Path | None = None) -> dict[str, str]:
    """The variables of one lead, the only ``LEASEQ_*`` ones a command sees."""
    env = {"LEASEQ_LEAD_ID": str(job.id), "LEASEQ_ATTEMPT": str(job.attempt)}
    env["LEASEQ_SESSION"] = job.session
    if job.lead.traceparent is not None:
        env[TRACEPARENT_ENV] = job.lead.traceparent
    if checkpoint_file is not None:
        env[CHECKPOINT_ENV] = str(checkpoint_file)
    return env


class CheckpointFile:
    """The file of one run through which a command reads its lead's checkpoint and leaves its
    own, in its slot's folder (owner only; ``GuardProcess.folder``), emptied after the run.
    Read when a renewal is about to go (``Checkpoints.source``) and once the command has
    exited: no polling. A folder per slot, not per lead: making and removing a folder
    cost a command's worker a fifth of its CPU per lead."""

    def __init__(self, job: Job, folder: Path) -> None:
        self.folder = folder
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

    def close(self) -> None:
        """Empty the folder for the slot's next lead: one call when it holds the checkpoint
        alone; anything else the command left there is removed too."""
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with os.scandir(self.folder) as left:
            for entry in left:
                if entry.is_dir(follow_symlinks=False):
                    shutil.rmtree(entry.path, ignore_errors=True)
                else:
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)


class GuardGone(Exception):
    """A guard ended (killed, or it failed) while it ran a command: the worker ends the
    command's process group itself (``GuardProcess.kill``)."""


class GuardProcess:
    """One slot's guard: started once, then sent one lead after another over a socket.

    Started from the event loop's thread: the guard's parent-death signal fires
    when the thread that forked it ends, and that thread lives as long as the run.
    """

    def __init__(self, argv: Sequence[str], env: Mapping[str, str]) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.sock = mine
        self.command: int | None = None  # the running command's pid, and its process group
        self.reusable = False  # its last command's tree is gone: it may take the next lead
        # Where its commands find and leave their checkpoints (CheckpointFile), owner only.
        self.folder = Path(tempfile.mkdtemp(prefix="leaseq-checkpoint-"))
        with theirs:
            self.process = subprocess.Popen(
                [
                    sys.executable,
                    "-I",  # the guard reads no PYTHON* variable and imports nothing of the user's
                    "-S",
                    str(GUARD),
                    str(os.getpid()),
                    str(theirs.fileno()),
                    "--",
                    *argv,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                env=dict(env),
                pass_fds=(theirs.fileno(),),
                start_new_session=True,  # no terminal's Ctrl-C: the worker decides
            )
        mine.setblocking(False)

    def send(self, message: dict[str, Any], fds: Sequence[int] = ()) -> None:
        try:
            socket.send_fds(self.sock, [json.dumps(message).encode()], list(fds))
        except OSError as exc:
            raise GuardGone(str(exc)) from None

    async def answer(self) -> dict[str, Any]:
        """The guard's next answer. Raises GuardGone when it ended."""
        try:
            data = await asyncio.get_running_loop().sock_recv(self.sock, READ_BYTES)
        except OSError as exc:
            raise GuardGone(str(exc)) from None
        if not data:
            raise GuardGone("the guard ended")
        answer: dict[str, Any] = json.loads(data)
        return answer

    async def until_exit(self) -> int:
        """The exit code of the command (negative: the signal that killed it)."""
        while True:
            answer = await self.answer()
            if "exit" in answer:
                code: int = answer["exit"]
                return code

    def kill(self) -> None:
        """SIGKILL to the guard, and to the process group of the command it ran, if any: a
        guard that is gone can no longer end it."""
        with contextlib.suppress(ProcessLookupError):
            self.process.kill()
        if self.command is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.command, signal.SIGKILL)
            self.command = None
        self.close()

    def close(self) -> None:
        """Closing its socket ends an idle guard (and, were one running, its command's tree);
        its checkpoint folder goes."""
        self.sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)

    async def wait(self) -> None:
        """Until the guard has exited (and is reaped): a thread, once per guard's end."""
        if self.process.poll() is None:
            await asyncio.to_thread(self.process.wait)


class Pipes:
    """A command's stdin (the payload, written as it drains) and its stdout and stderr, read
    on the event loop until every process holding them has closed them."""

    def __init__(self, payload: bytes) -> None:
        self._loop = asyncio.get_running_loop()
        stdin_r, self._stdin = os.pipe()
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        self.theirs: tuple[int, ...] = (stdin_r, out_w, err_w)  # for the guard, then closed
        self._pending = memoryview(payload)
        self._parts: dict[int, list[bytes]] = {out_r: [], err_r: []}  # stdout, stderr
        self._open = {out_r, err_r}
        self._ended = self._loop.create_future()
        for fd in (self._stdin, out_r, err_r):
            os.set_blocking(fd, False)
        for fd in self._open:
            self._loop.add_reader(fd, self._readable, fd)
        self._write()

    def close_theirs(self) -> None:
        for fd in self.theirs:
            os.close(fd)
        self.theirs = ()

    def _write(self) -> None:
        try:
            while self._pending:
                self._pending = self._pending[os.write(self._stdin, self._pending) :]
        except BlockingIOError:
            self._loop.add_writer(self._stdin, self._more)
            return
        except OSError:  # the command does not read it all: what it did not read is dropped
            pass
        self._close_stdin()

    def _more(self) -> None:
        self._loop.remove_writer(self._stdin)
        self._write()

    def _close_stdin(self) -> None:
        if self._stdin >= 0:
            self._loop.remove_writer(self._stdin)
            os.close(self._stdin)
            self._stdin = -1

    def _readable(self, fd: int) -> None:
        try:
            data = os.read(fd, READ_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:
            self._parts[fd].append(data)
            return
        self._stop_reading(fd)
        if not self._open and not self._ended.done():
            self._ended.set_result(None)

    def _stop_reading(self, fd: int) -> None:
        self._loop.remove_reader(fd)
        os.close(fd)
        self._open.discard(fd)

    async def read(self) -> tuple[bytes, bytes]:
        """stdout and stderr, once both are closed at the other end."""
        await asyncio.shield(self._ended)
        out, err = (b"".join(parts) for parts in self._parts.values())
        return out, err

    def close(self) -> None:
        """Stop reading and writing; every descriptor of ours closed."""
        if self.theirs:
            self.close_theirs()
        self._close_stdin()
        for fd in list(self._open):
            self._stop_reading(fd)


class Command:
    """A handler that runs ``argv`` once per lead.

    The payload goes as JSON on stdin; ``LEASEQ_LEAD_ID``, ``LEASEQ_ATTEMPT``,
    ``LEASEQ_SESSION`` and ``LEASEQ_CHECKPOINT_FILE`` (``CheckpointFile``) are
    in its environment, and no other ``LEASEQ_*`` variable; ``TRACEPARENT`` too when the
    lead carries one. Exit 0 → done,
    with stdout parsed as JSON (or ``{"output": text}``; nothing → null).
    Non-zero → the failure path, with the tail of stderr as the error.
    Stopped (lease lost, not renewed in time, max runtime, shutdown) → its
    whole process tree gets SIGTERM, then SIGKILL
    ``kill_grace_s`` later (the job's, unless given here); a renewal refused
    (the lease is someone else's already) gets SIGKILL at once. What the
    command leaves running when it exits is ended the same way.

    Its guards (one per lead running at once) stay for the next lead;
    ``aclose()`` (the worker awaits it when its run ends) ends them.
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        kill_grace_s: float | None = None,
        env: Mapping[str, str] | None = None,
        throttle_exit: int | None = None,
        throttle_s: float = 60.0,
    ) -> None:
        if not argv:
            raise ValueError("a command is needed")
        self.argv = list(argv)
        self.kill_grace_s = kill_grace_s
        # The exit code by which the command says "throttled" (a 429 upstream), and for how
        # long its session then pauses: the lead goes back without using up an attempt.
        self.throttle_exit = throttle_exit
        self.throttle_s = throttle_s
        self.env = dict(os.environ if env is None else env)
        self._idle: list[GuardProcess] = []  # guards between leads

    async def __call__(self, job: Job) -> JSON:
        slot = self._guard()
        checkpoints = CheckpointFile(job, slot.folder)
        job.checkpoints.source = lambda: checkpoints.collect(job)
        try:
            return await self._run(job, slot, checkpoints.path)
        finally:
            job.checkpoints.source = None
            checkpoints.collect(job)  # its last word, for a release that may follow
            if slot.reusable:  # nothing of the command is left: the slot takes the next lead
                checkpoints.close()
                self._idle.append(slot)
            elif slot.sock.fileno() >= 0:  # left mid-way (nothing else ended it): end it all
                slot.kill()
                await slot.wait()

    async def aclose(self) -> None:
        """End the idle guards (each exits once its socket closes)."""
        idle, self._idle = self._idle, []
        for each in idle:
            each.close()
        for each in idle:
            try:
                async with asyncio.timeout(GUARD_SETTLE_S):
                    await each.wait()
            except TimeoutError:
                each.kill()
                await each.wait()

    def _guard(self) -> GuardProcess:
        if self._idle:
            slot = self._idle.pop()
            slot.reusable = False
            return slot
        return GuardProcess(self.argv, without_secrets(self.env))

    async def _run(self, job: Job, slot: GuardProcess, checkpoint_file: Path) -> JSON:
        grace = job.kill_grace_s if self.kill_grace_s is None else self.kill_grace_s
        pipes = Pipes(json.dumps(job.payload).encode())
        status: int | None = None  # the command's exit code, once its tree is gone
        started: dict[str, Any] = {}
        stdout = stderr = b""
        try:
            try:
                run = {"run": lead_variables(job, checkpoint_file), "grace": grace}
                slot.send(run, pipes.theirs)
            finally:
                pipes.close_theirs()
            started = await slot.answer()
            if "cannot_start" not in started:
                slot.command = started["pid"]
                status = await slot.until_exit()
                slot.command = None
                stdout, stderr = await pipes.read()
        except GuardGone as exc:
            slot.kill()
            await slot.wait()
            raise CommandFailed(f"its guard ended ({exc}): the command was killed") from None
        except BaseException:
            if status is None and "cannot_start" not in started:
                await self._stop(slot, job, grace)
            else:  # nothing of the command is left: the guard waits for the next lead
                slot.reusable = True
            raise
        finally:
            pipes.close()
        slot.reusable = True
        if "cannot_start" in started:
            raise CommandNotStartable(f"cannot start {started['cannot_start']}")
        text = stderr.decode(errors="replace")
        if status is not None and status == self.throttle_exit:
            raise Throttled(self.throttle_s)
        if status is not None and status != 0:
            how = f"killed by signal {-status}" if status < 0 else f"exit status {status}"
            tail = text.strip()[-STDERR_TAIL_CHARS:]
            raise CommandFailed(f"{how}: {tail}" if tail else how)
        if text:
            log.debug("lead %d stderr: %s", job.id, text[-STDERR_TAIL_CHARS:])
        return parse_output(stdout)

    async def _stop(self, slot: GuardProcess, job: Job, grace: float) -> None:
        """End the command's tree: at once for a lease refused, else SIGTERM then SIGKILL.

        The guard does it, then stays for the next lead; if it does not answer in
        time, it gets SIGKILL, and the command's process group with it.
        """
        how = "now" if job.cancel_token.reason is StopReason.LOST else "term"
        try:
            slot.send({"stop": how})
            async with asyncio.timeout(grace + GUARD_SETTLE_S):
                await slot.until_exit()
            slot.command = None
            slot.reusable = True
            return
        except TimeoutError:
            log.error("lead %d: the guard of its command did not end it; killing it", job.id)
        except GuardGone:
            pass
        slot.kill()
        await slot.wait()


def parse_output(stdout: bytes) -> JSON:
    """A command's stdout as a result: JSON if it parses, else ``{"output": text}``; empty: None."""
    text = stdout.decode(errors="replace").strip()
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return {"output": text}
