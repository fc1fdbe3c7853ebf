"""The guard between a worker and a command's processes: the command's whole tree dies with it.

``leaseq worker`` starts each command through this small program (standard
library only, started as ``python -I -S guard.py GRACE WORKER_PID -- COMMAND...``
so it costs a few tens of milliseconds). The guard

* asks the kernel to signal it when the worker dies (``PR_SET_PDEATHSIG``),
  whatever killed the worker, SIGKILL included, and checks that the worker
  was still its parent once that was set;
* becomes a child subreaper (``PR_SET_CHILD_SUBREAPER``): a process of the
  command's tree whose parent exits is re-parented to the guard, not to init,
  so no descendant escapes it by daemonizing;
* starts the command in a process group of its own, with the parent-death
  signal SIGKILL (should the guard itself be killed), and its own stdin,
  stdout and stderr: what the worker gave the guard;
* ends every process of the tree (the guard's descendants, found in /proc,
  and the command's process group) when asked to or when the worker dies.

Signals it takes from the worker: SIGTERM (also SIGINT, SIGHUP): SIGTERM to
the tree, then SIGKILL to whatever is left GRACE seconds later; SIGUSR1: SIGKILL
to the tree at once (the lease is gone; also the parent-death signal). When
the command exits by itself, what it left behind gets the same SIGTERM, then
SIGKILL. The guard exits as the command did (the same status, or the same
signal), once no process of the tree is left. A command that cannot be
started gets one line on stderr starting with ``CANNOT_START`` and status 127.

Without ``prctl`` (not Linux), the guard notices the worker's death by
polling its parent, and ends the command's process group only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence

CANNOT_START = "leaseq-guard: cannot start"
CANNOT_START_STATUS = 127
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_S = 1.0  # how often the parent is checked besides the signals (no prctl: the only way)
KILL_ROUNDS = 200  # SIGKILL the tree until nothing of it is left, 10 ms apart at most
POLITE = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
NOW = signal.SIGUSR1


def _prctl(option: int, value: int) -> bool:
    """``prctl(option, value)``; False where there is no such call."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(option, value, 0, 0, 0)) == 0
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


class Guard:
    """One command's tree, watched on behalf of one worker."""

    def __init__(self, grace_s: float, worker_pid: int) -> None:
        self.grace_s = grace_s
        self.worker_pid = worker_pid
        self.pid = os.getpid()
        self.command: subprocess.Popen[bytes] | None = None
        self.status: int | None = None  # the command's wait status, once it exited
        self.kill_at: float | None = None  # SIGKILL the tree then (after a SIGTERM)
        self.signals: list[int] = []
        self._wake_r, wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(wake_w, False)
        signal.set_wakeup_fd(wake_w)
        for signum in (signal.SIGCHLD, NOW, *POLITE):
            signal.signal(signum, self._note)
        self.watching = _prctl(PR_SET_PDEATHSIG, NOW)
        _prctl(PR_SET_CHILD_SUBREAPER, 1)

    def _note(self, signum: int, frame: object) -> None:
        self.signals.append(signum)

    def _child_setup(self) -> None:
        """In the command's process, before exec: die with the guard."""
        _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != self.pid:
            os._exit(1)

    def start(self, argv: Sequence[str]) -> None:
        """Start the command. Raises OSError when it cannot be started."""
        self.command = subprocess.Popen(
            list(argv), process_group=0, preexec_fn=self._child_setup, close_fds=True
        )

    def worker_gone(self) -> bool:
        return os.getppid() != self.worker_pid

    def run(self) -> int:
        """Watch until the command and every process of its tree are gone; the exit status."""
        assert self.command is not None
        while True:
            if self.worker_gone():
                self.signals.append(NOW)
            self._reap()
            for signum in self.signals:
                if signum == NOW:
                    return self._end_now()
                if signum in POLITE and self.kill_at is None:
                    self._terminate()
            self.signals.clear()
            if self.status is not None and self.kill_at is None:
                self._terminate()  # what the command left behind
            if self.kill_at is not None and time.monotonic() >= self.kill_at:
                return self._end_now()
            if self.status is not None and not self._tree():
                return self._exit_status()
            self._sleep()

    def _sleep(self) -> None:
        timeout = POLL_S
        if self.kill_at is not None:
            timeout = min(timeout, max(0.0, self.kill_at - time.monotonic()))
        if self.status is not None:
            timeout = min(timeout, 0.05)  # leftovers in other groups: no SIGCHLD tells us
        with contextlib.suppress(InterruptedError):
            select.select([self._wake_r], [], [], timeout)
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_r, 512):
                pass

    def _reap(self) -> None:
        """Collect every child that ended (the command, and orphans re-parented to us)."""
        assert self.command is not None
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if pid == self.command.pid:
                self.status = status

    def _tree(self) -> list[int]:
        return descendants(self.pid)

    def _signal_tree(self, signum: int) -> None:
        """``signum`` to the command's group, and to each process of the tree outside it."""
        assert self.command is not None
        group = self.command.pid
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signum)
        for pid in self._tree():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if signum == signal.SIGKILL or os.getpgid(pid) != group:
                    os.kill(pid, signum)

    def _terminate(self) -> None:
        """SIGTERM to the tree; SIGKILL to what is left ``grace_s`` later."""
        self._signal_tree(signal.SIGTERM)
        self.kill_at = time.monotonic() + self.grace_s

    def _end_now(self) -> int:
        """SIGKILL the tree until none of it is left, reaping as it goes."""
        for _ in range(KILL_ROUNDS):
            self._signal_tree(signal.SIGKILL)
            self._reap()
            if self.status is not None and not self._tree():
                break
            time.sleep(0.01)
        return self._exit_status()

    def _exit_status(self) -> int:
        if self.status is None:
            return 128 + signal.SIGKILL
        code = os.waitstatus_to_exitcode(self.status)
        return code if code >= 0 else 128 - code


def main(args: Sequence[str]) -> int:
    """``GRACE WORKER_PID -- COMMAND...``."""
    if len(args) < 4 or args[2] != "--":
        print(f"usage: {sys.argv[0]} GRACE WORKER_PID -- COMMAND...", file=sys.stderr)
        return 2
    guard = Guard(float(args[0]), int(args[1]))
    if guard.worker_gone():  # the worker died before we could watch it
        return 128 + signal.SIGKILL
    try:
        guard.start(args[3:])
    except OSError as exc:
        print(f"{CANNOT_START} {args[3]}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return CANNOT_START_STATUS
    status = guard.run()
    if status > 128 and status - 128 in (signal.SIGKILL, signal.SIGTERM, signal.SIGINT):
        # Die of the same signal, so the worker sees how the command ended.
        if status - 128 != signal.SIGKILL:
            signal.signal(status - 128, signal.SIG_DFL)
        os.kill(os.getpid(), status - 128)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
