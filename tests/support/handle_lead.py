"""Handlers for the worker tests: a program for ``leaseq worker -- cmd``, and ``--handler``s.

As a program (``python tests/support/handle_lead.py``) it reads the payload from
stdin; its ``mode`` says what to do:

- ``ok``: print the lead id, attempt, session and payload as JSON, exit 0
- ``text``: print a line that is not JSON, exit 0
- ``fail``: write to stderr, exit 3
- ``fail_first``: ``fail`` on attempt 1, ``ok`` after
- ``hang``: start a grandchild (``sleep``), write both pids to ``pid_dir``, wait
- ``hang_first``: ``hang`` on attempt 1, ``ok`` after
- ``escape``: start a grandchild in a session of its own (``setsid``: outside the
  command's process group), write both pids to ``pid_dir``; then wait, or with
  ``"leave": true`` exit at once, leaving it behind
- ``deaf_first``: on attempt 1, ignore SIGTERM and append the time to
  ``stamps`` (a file) every 20 ms until killed; after, append it once, ``ok``
- ``env``: print the names of the ``LEASEQ_*`` variables it sees
- ``checkpoint``: on attempt 1, leave the checkpoint ``{"step": 1}`` in
  ``LEASEQ_CHECKPOINT_FILE`` and fail; after, print what that file held
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the program itself imports nothing of leaseq: it starts fast
    from leaseq.worker import Job


def _hang(payload: dict[str, Any], lead_id: str) -> int:
    child = subprocess.Popen(["sleep", "60"])
    pid_file = Path(payload["pid_dir"]) / f"{lead_id}.pids"
    partial = pid_file.with_suffix(".tmp")
    partial.write_text(f"{os.getpid()} {child.pid}")
    partial.rename(pid_file)
    return child.wait()


def _escape(payload: dict[str, Any], lead_id: str) -> int:
    child = subprocess.Popen(["sleep", "60"], start_new_session=True)
    pid_file = Path(payload["pid_dir"]) / f"{lead_id}.pids"
    partial = pid_file.with_suffix(".tmp")
    partial.write_text(f"{os.getpid()} {child.pid}")
    partial.rename(pid_file)
    return 0 if payload.get("leave") else child.wait()


def _deaf(stamps: Path) -> int:
    """Ignore SIGTERM; write down that it still runs, every 20 ms, until SIGKILL."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with stamps.open("a") as out:
        while True:
            out.write(f"{time.time()} {os.getpid()}\n")
            out.flush()
            time.sleep(0.02)


def _checkpoint(path: Path, attempt: int) -> int:
    """Attempt 1 saves its progress and fails; the next says where it resumed from."""
    found = json.loads(path.read_text()) if path.exists() else None
    if attempt == 1:
        partial = path.with_suffix(".tmp")
        partial.write_text(json.dumps({"step": 1}))
        partial.rename(path)  # whole, never half-written
        print("failed half way", file=sys.stderr)
        return 3
    print(json.dumps({"resumed": found, "attempt": attempt}))
    return 0


def main() -> int:
    payload = json.load(sys.stdin)
    lead_id = os.environ["LEASEQ_LEAD_ID"]
    attempt = int(os.environ["LEASEQ_ATTEMPT"])
    mode = payload.get("mode", "ok")
    if mode == "deaf_first":
        if attempt == 1:
            return _deaf(Path(payload["stamps"]))
        with Path(payload["stamps"]).open("a") as out:
            out.write(f"{time.time()} {os.getpid()} next\n")
        mode = "ok"
    if mode in ("fail_first", "hang_first"):
        mode = mode.removesuffix("_first") if attempt == 1 else "ok"
    if mode == "checkpoint":
        return _checkpoint(Path(os.environ["LEASEQ_CHECKPOINT_FILE"]), attempt)
    if mode == "traceparent":
        print(json.dumps({"traceparent": os.environ.get("TRACEPARENT")}))
        return 0
    if mode == "env":
        print(json.dumps(sorted(name for name in os.environ if name.startswith("LEASEQ_"))))
        return 0
    if mode == "text":
        print("hello, not json")
        return 0
    if mode == "fail":
        print("something broke", file=sys.stderr)
        return 3
    if mode == "hang":
        return _hang(payload, lead_id)
    if mode == "escape":
        return _escape(payload, lead_id)
    answer = {
        "lead": int(lead_id),
        "attempt": attempt,
        "session": os.environ["LEASEQ_SESSION"],
        "payload": payload,
    }
    print(json.dumps(answer))
    return 0


def quick(job: Job) -> dict[str, Any]:
    """A ``--handler``: done at once."""
    return {"by": "quick", "attempt": job.attempt}


def stall_first(job: Job) -> dict[str, Any]:
    """A ``--handler``: on attempt 1 wait (up to a minute) until cancelled; done after."""
    if job.attempt == 1:
        deadline = time.monotonic() + 60
        while not job.cancel_token.wait(0.05) and time.monotonic() < deadline:
            pass
        job.cancel_token.raise_if_cancelled()
    return {"by": "stall_first", "attempt": job.attempt}


if __name__ == "__main__":
    sys.exit(main())
