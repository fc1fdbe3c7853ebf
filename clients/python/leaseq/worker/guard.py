"""The guard between a worker and its commands: a command's whole tree dies with it.

``leaseq worker -- COMMAND`` keeps one guard per slot (``--concurrency``),
started once and reused for every lead the slot runs, so a lead costs a
fork and an exec, not an interpreter. It is this small program (standard
library only, started as ``python -I -S guard.py WORKER_PID SOCKET_FD --
COMMAND...``). The guard

* asks the kernel to signal it when the worker dies (``PR_SET_PDEATHSIG``),
  whatever killed the worker, SIGKILL included, and checks that the worker
  was still its parent once that was set; the worker's end of its socket
  closing says the same;
* is a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process of a
  command's tree whose parent exits is re-parented to the guard, not to init,
  so no descendant escapes it by daemonizing (``setsid`` included);
* starts each command in a process group of its own (the group's id is the
  command's pid, which the worker is told: should the guard itself be killed,
  the worker kills that group), on the stdin, stdout and stderr the worker
  passed with the request (``SCM_RIGHTS``). No Python runs between the fork and
  the exec, so the start is a ``vfork`` (about 0.8 ms of CPU with the command's
  exec, where a ``preexec_fn`` took 2.5 ms);
* ends every process of the tree (its descendants, found in /proc, and the
  command's process group) when asked to or when the worker dies.

The worker's requests, one JSON datagram each on the socket: ``{"run": {the
lead's variables}}`` with three descriptors (the guard answers ``{"pid": N}``
or ``{"cannot_start": why}``), ``{"stop": "term"}`` (SIGTERM to the tree,
SIGKILL to what is left ``{"grace": s}`` later) and ``{"stop": "now"}``
(SIGKILL at once: the lease is gone). When the command exits by itself, what
it left behind gets the same SIGTERM, then SIGKILL. Once nothing of the tree
is left the guard answers ``{"exit": code}`` (negative: killed by that
signal) and waits for the next lead.

Nothing escaped is the common case and costs no /proc scan: the guard is a
subreaper, so once the command is reaped, "no child left" (``waitpid`` says
so) means no process of its tree is left. /proc is read only to end a tree
that still runs.

Without ``prctl`` (not Linux), the guard notices the worker's death by
polling its parent, and ends the command's process group only.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import select
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from typing import Any

CANNOT_START = "leaseq-guard: cannot start"
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 1.0  # how often the parent is checked besides the signals (no prctl: the only way)
LEFTOVER_POLL_S = 0.05  # leftovers in other groups: no SIGCHLD tells us they ended
KILL_ROUNDS = 200  # SIGKILL the tree until nothing of it is left, 10 ms apart at most
MESSAGE_BYTES = 1 << 16
NOW = signal.SIGUSR1
_LIBC: Any = None


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where there is no such call."""
    global _LIBC
    try:
        if _LIBC is None:
            _LIBC = ctypes.CDLL(None, use_errno=True)
        return int(_LIBC.prctl(option, value, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> list[int]:
    """Every live process below ``root`` (children first), read from /proc; [] without it."""
    children: dict[int, list[int]] = {}
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:  # it ended meanwhile
            continue
        if fields[0] != b"Z":  # a zombie is dead already; its parent (or we) will reap it
            children.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [root]
    while todo:
        for pid in children.get(todo.pop(), []):
            found.append(pid)
            todo.append(pid)
    return found


class WorkerGone(Exception):
    """The worker died, or closed its end: end everything and exit."""


class Guard:
    """One slot's commands, one at a time, watched on behalf of one worker."""

    def __init__(self, worker_pid: int, sock: socket.socket, argv: Sequence[str]) -> None:
        self.worker_pid = worker_pid
        self.sock = sock
        self.argv = list(argv)
        self.pid = os.getpid()
        self.command: int | None = None  # the running command's pid (and process group)
        self.status: int | None = None  # its wait status, once it exited
        self.grace_s = 0.0
        self.kill_at: float | None = None  # SIGKILL the tree then (after a SIGTERM)
        self.signals: list[int] = []
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for signum in (signal.SIGCHLD, NOW, signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(signum, self._note)
        self.watching = _prctl(PR_SET_PDEATHSIG, NOW)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def _note(self, signum: int, frame: object) -> None:
        self.signals.append(signum)

    def worker_gone(self) -> bool:
        return os.getppid() != self.worker_pid

    # -- the worker's requests -------------------------------------------------

    def _send(self, message: dict[str, Any]) -> None:
        try:
            self.sock.send(json.dumps(message).encode())
        except OSError:
            raise WorkerGone from None

    def _receive(self) -> tuple[dict[str, Any], list[int]] | None:
        """The next request, if one is waiting. Raises WorkerGone at the end of the socket."""
        try:
            data, fds, _, _ = socket.recv_fds(self.sock, MESSAGE_BYTES, 3)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            raise WorkerGone from None
        if not data:
            raise WorkerGone
        request: dict[str, Any] = json.loads(data)
        return request, fds

    def serve(self) -> None:
        """Run each lead the worker sends until it goes; then end whatever still runs."""
        try:
            while True:
                self._check_signals()
                received = self._receive()
                if received is None:
                    self._sleep(POLL_S)
                    continue
                request, fds = received
                if "run" in request:
                    self._run(request, fds)
                else:  # a stop for a command already ended: nothing to do
                    for fd in fds:
                        os.close(fd)
        except WorkerGone:
            self._end_now()

    def _check_signals(self) -> None:
        if self.worker_gone() or NOW in self.signals:
            raise WorkerGone
        if self.command is None:
            self.signals.clear()

    # -- one lead ------------------------------------------------------------------

    def _run(self, request: dict[str, Any], fds: list[int]) -> None:
        self.grace_s = float(request.get("grace", 0.0))
        env = {**os.environ, **request["run"]}
        try:
            started = subprocess.Popen(
                self.argv,
                stdin=fds[0],
                stdout=fds[1],
                stderr=fds[2],
                env=env,
                process_group=0,
                close_fds=True,
            )
        except OSError as exc:
            self._send({"cannot_start": f"{self.argv[0]}: {exc.strerror or exc}"})
            return
        finally:
            for fd in fds:
                os.close(fd)
        self.command, self.status, self.kill_at = started.pid, None, None
        self._send({"pid": started.pid})
        self._watch()
        self._send({"exit": self._exit_code()})
        self.command = None

    def _watch(self) -> None:
        """Until the command and every process of its tree are gone."""
        while True:
            self._check_signals()
            for signum in self.signals:
                if signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
                    self._terminate()
            self.signals.clear()
            received = self._receive()
            if received is not None:
                request, fds = received
                for fd in fds:
                    os.close(fd)
                if request.get("stop") == "now":
                    self._end_now()
                    return
                if request.get("stop") == "term" and self.kill_at is None:
                    self._terminate()
            left = self._reap()
            if self.status is not None and not left:
                return  # the common case: it exited, and nothing of its tree is left
            if self.status is not None and self.kill_at is None:
                self._terminate()  # what the command left behind
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                self._end_now()
                return
            self._sleep(self._timeout())

    def _timeout(self) -> float:
        timeout = POLL_S
        if self.kill_at is not None:
            timeout = min(timeout, max(0.0, self.kill_at - time.monotonic()))
        if self.status is not None:
            timeout = min(timeout, LEFTOVER_POLL_S)
        return timeout

    def _sleep(self, timeout: float) -> None:
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r, self.sock.fileno()], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass

    def _reap(self) -> bool:
        """Collect every child that ended (the command, and orphans re-parented to us);
        whether any child is left."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return False
            if pid == 0:
                return True
            if pid == self.command:
                self.status = status

    def _signal_tree(self, signum: int) -> None:
        """``signum`` to the command's group, and to each process of the tree outside it."""
        group = self.command
        if group is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signum)
        for pid in descendants(self.pid):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if signum == signal.SIGKILL or os.getpgid(pid) != group:
                    os.kill(pid, signum)

    def _terminate(self) -> None:
        """SIGTERM to the tree; SIGKILL to what is left ``grace_s`` later."""
        self._signal_tree(signal.SIGTERM)
        self.kill_at = time.monotonic() + self.grace_s

    def _end_now(self) -> None:
        """SIGKILL the tree until none of it is left, reaping as it goes."""
        for _ in range(KILL_ROUNDS):
            self._signal_tree(signal.SIGKILL)
            if not self._reap():
                return
            time.sleep(0.01)

    def _exit_code(self) -> int:
        if self.status is None:
            return -signal.SIGKILL
        return os.waitstatus_to_exitcode(self.status)


def main(args: Sequence[str]) -> int:
    """``WORKER_PID SOCKET_FD -- COMMAND...``."""
    if len(args) < 4 or args[2] != "--":
        print(f"usage: {sys.argv[0]} WORKER_PID SOCKET_FD -- COMMAND...", file=sys.stderr)
        return 2
    sock = socket.socket(fileno=int(args[1]))
    sock.setblocking(False)  # every receive looks, never waits: select() waits
    guard = Guard(int(args[0]), sock, args[3:])
    if guard.worker_gone():  # the worker died before we could watch it
        return 1
    guard.serve()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
