"""Profiles behind the tuning in docs/design.md (needs the ``bench`` extra).

``python -m bench.profile core``: one worker leases and completes N leads at
batch 1 through ``app.queue.Queue`` (ledger on) under pyinstrument, on a fresh
database; prints the CPU time per lead and writes the profile as text.

``python -m bench.profile rest``: ``leaseq serve`` (one process) drained at
batch 1 by 4 HTTP workers while py-spy samples the service process; writes the
collapsed stacks and a summary of the frames that took the most samples.
"""

from __future__ import annotations

import asyncio
import collections
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from bench import common, contenders

OUT = Path(__file__).resolve().parent / "results" / "profiles"


async def _core(url: str, n: int) -> None:
    from app.queue import Queue
    from leaseq.model import NewLead

    db = contenders.database(url, 1)
    try:
        queue = Queue(db, ledger=True)
        for lo in range(0, n, 1000):
            await queue.push(
                common.SESSION, [NewLead({"n": i}) for i in range(lo, min(n, lo + 1000))]
            )
        from pyinstrument import Profiler

        profiler = Profiler()
        started, cpu = time.perf_counter(), time.process_time()
        with profiler:
            for _ in range(n):
                [lease] = await queue.lease_next(common.SESSION, "w", max=1)
                await queue.complete(lease.lead.id, lease.token)
        wall, cpu = time.perf_counter() - started, time.process_time() - cpu
        print(
            f"core batch 1: {wall / n * 1000:.3f} ms per lead, "
            f"{cpu / n * 1000:.3f} ms CPU (profiled)"
        )
        OUT.mkdir(parents=True, exist_ok=True)
        (OUT / "core-pyinstrument.txt").write_text(profiler.output_text(unicode=True))
    finally:
        await db.close()


def summarize(collapsed: str, top: int = 60) -> str:
    """Share of samples per frame (inclusive) and per innermost frame (self)."""
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    total = 0
    for line in collapsed.splitlines():
        stack, _, count = line.rpartition(" ")
        n = int(count)
        total += n
        frames = stack.split(";")
        for frame in {re.sub(r":\d+\)", ")", f) for f in frames}:
            inclusive[frame] += n
        own[frames[-1]] += n
    lines = [f"samples: {total}", "== inclusive"]
    lines += [f"{v / total * 100:5.1f}% {k}" for k, v in inclusive.most_common(top)]
    lines += ["== self"]
    lines += [f"{v / total * 100:5.1f}% {k}" for k, v in own.most_common(25)]
    return "\n".join(lines) + "\n"


def _cpu_s(pid: int) -> float:
    """CPU seconds process ``pid`` has used (utime + stime, from /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rest(server_url: str, template: str, n: int) -> None:
    with common.fresh_copy(server_url, template) as url:
        service = contenders.Service(url, 1)
        try:
            service.wait_ready()
            asyncio.run(contenders.rest_push(service.base_url, n))
            pid = service.children[0] if service.children else service.process.pid
            OUT.mkdir(parents=True, exist_ok=True)
            raw = OUT / "rest-pyspy.collapsed"
            py_spy = str(Path(sys.executable).with_name("py-spy"))
            spy = subprocess.Popen(
                [
                    py_spy,
                    "record",
                    "-p",
                    str(pid),
                    "-o",
                    str(raw),
                    "-f",
                    "raw",
                    "-r",
                    "200",
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
            spec = {"url": url, "batch": 1, "port": service.port}
            cpu = _cpu_s(pid)
            reports, started = common.run_workers(contenders.rest_worker, spec, 4)
            cpu = _cpu_s(pid) - cpu
            merged = contenders.merge(reports)
            print(
                f"rest batch 1, W=4: {n / (merged.finished_at - started):.0f} leads/s; "
                f"service CPU {cpu / (2 * n) * 1000:.2f} ms per request (profiled)"
            )
            spy.send_signal(2)
            spy.wait(30)
            (OUT / "rest-pyspy-summary.txt").write_text(summarize(raw.read_text()))
        finally:
            service.stop()


def main() -> None:
    what = sys.argv[1] if len(sys.argv) > 1 else "core"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 3000
    templates = common.Templates(common.DEFAULT_SERVER_URL)
    try:
        template = templates.get("leaseq", lambda url: contenders.install("leaseq", url))
        if what == "core":
            with common.fresh_copy(common.DEFAULT_SERVER_URL, template) as url:
                asyncio.run(_core(url, n))
        else:
            _rest(common.DEFAULT_SERVER_URL, template, n)
    finally:
        templates.close()


if __name__ == "__main__":
    main()
