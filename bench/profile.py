"""Profiles behind the tuning in docs/design.md (needs the ``bench`` extra).

``python -m bench.profile core``: one worker leases and completes N leads at
batch 1 through ``app.domain.queue.Queue`` (ledger on) under pyinstrument, on a fresh
database; prints the CPU time per lead and writes the profile as text.

``python -m bench.profile rest``: ``leaseq serve`` (one process) drained at
batch 1 by 4 HTTP workers (``POST /lease``, then ``/complete``) while py-spy
samples the service process; writes the collapsed stacks and a summary of the
frames that took the most samples. ``rest-next``: the same with ``next`` on
``/complete`` (one request per lead; stops at once if the service has no
``next``); ``rawrest`` and ``rawrest-next``: the raw REST contender
(bench/raw_rest.py) under the same load, the yardstick's own profile.

    python -m bench.profile rest-next 3000     # kind, then N (default 3,000)

``--before CHECKOUT`` (rest and rest-next): the service of that older checkout
instead, on a database migrated by its own migrations (as ``python -m bench
--before``); its files are named ``<kind>-before-pyspy…``. ``--rate N``: py-spy's
samples per second (default 200; 1,000 for a finer profile of a short run).
"""

from __future__ import annotations

import asyncio
import collections
import gzip
import re
import subprocess
import sys
import time
from pathlib import Path

from app.store.pool import libpq_url
from bench import common, contenders
from bench.service import process_cpu_s

OUT = Path(__file__).resolve().parent / "results" / "profiles"


async def _core(url: str, n: int) -> None:
    from app.domain.queue import Queue
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
                [lease] = await common.leasing_of(queue).lease_next(common.SESSION, "w", max=1)
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


PROFILED_WORKERS = 4
DEFAULT_RATE = 200  # py-spy's samples per second (--rate)


def _rest(
    server_url: str, template: str, n: int, kind: str, source: Path | None, rate: int
) -> None:
    """Profile the server of ``kind`` (rest, rest-next, rawrest, rawrest-next) at batch 1;
    ``source``: leaseq's service from that checkout."""
    next_ = kind.endswith("-next")
    if kind.startswith("rest") and next_ and not contenders.leaseq_takes_next(source):
        raise SystemExit("leaseq serve here does not take `next` on /complete: nothing to profile")
    with common.fresh_copy(server_url, template) as url:
        service: contenders.Service
        if kind.startswith("rawrest"):
            service = contenders.RawRestService(libpq_url(url))
        else:
            service = contenders.Service(url, 1, source=source)
        if source is not None:
            kind += "-before"
        try:
            service.wait_ready()
            asyncio.run(contenders.rest_push(service.base_url, n))
            pid = service.children[0] if service.children else service.process.pid
            OUT.mkdir(parents=True, exist_ok=True)
            raw = OUT / f"{kind}-pyspy.collapsed"
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
                    str(rate),
                    "--nonblocking",
                ],
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            time.sleep(1.0)
            spec = {"url": url, "batch": 1, "port": service.port, "next": next_}
            cpu = process_cpu_s(pid)
            reports, started = common.run_workers(contenders.rest_worker, spec, PROFILED_WORKERS)
            cpu = process_cpu_s(pid) - cpu
            merged = contenders.merge(reports)
            # Two requests a lead; with next one, and each worker's first lease.
            requests = n + PROFILED_WORKERS if next_ else 2 * n
            print(
                f"{kind} batch 1, W={PROFILED_WORKERS}: "
                f"{n / (merged.finished_at - started):.0f} leads/s; "
                f"service CPU {cpu / requests * 1000:.2f} ms per request (profiled)"
            )
            spy.send_signal(2)
            if spy.wait(30) != 0 or not raw.exists():
                raise RuntimeError(f"py-spy failed ({spy.returncode}): it needs root or ptrace")
            summary = OUT / f"{kind}-pyspy-summary.txt"
            collapsed = raw.read_text()
            summary.write_text(summarize(collapsed))
            kept = raw.with_suffix(".collapsed.gz")
            kept.write_bytes(gzip.compress(collapsed.encode()))
            raw.unlink()
            print(f"profile: {summary} and {kept}")
        finally:
            service.stop()


def main() -> None:
    args, source, rate = sys.argv[1:], None, DEFAULT_RATE
    if "--before" in args:
        at = args.index("--before")
        source = Path(args[at + 1]).resolve()
        del args[at : at + 2]
    if "--rate" in args:
        at = args.index("--rate")
        rate = int(args[at + 1])
        del args[at : at + 2]
    what = args[0] if args else "core"
    n = int(args[1]) if len(args) > 1 else 3000
    if source is not None and not what.startswith("rest"):
        raise SystemExit("--before profiles leaseq's service: rest or rest-next")
    schema = "leaseq" if source is None else contenders.BEFORE_SCHEMA
    templates = common.Templates(common.DEFAULT_SERVER_URL)
    try:
        template = templates.get(schema, lambda url: contenders.install(schema, url, source))
        if what == "core":
            with common.fresh_copy(common.DEFAULT_SERVER_URL, template) as url:
                asyncio.run(_core(url, n))
        elif what in ("rest", "rest-next", "rawrest", "rawrest-next"):
            _rest(common.DEFAULT_SERVER_URL, template, n, what, source, rate)
        else:
            raise SystemExit(
                f"unknown profile {what!r}: core, rest, rest-next, rawrest, rawrest-next"
            )
    finally:
        templates.close()


if __name__ == "__main__":
    main()
