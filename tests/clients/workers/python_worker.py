"""The Python conformance worker: ``leaseq.Worker`` at its defaults but for the harness's options.

    python -m tests.clients.workers.python_worker --url URL --session S --owner NAME
        --concurrency W --ttl-s T --handler-ms MS --events FILE [--token T] [--grace-s G]

The interface every language's program has (docs/clients/conformance.md): the handler
writes ``start``, then waits the payload's ``ms`` (or ``--handler-ms``) cancellably, then
``finished`` (or ``aborted`` when cancelled); events are JSON lines appended to FILE and
flushed at once. The worker runs until SIGTERM (``forever``: a fleet's worker does not stop
when the queue is empty), then gives back what it holds within the grace and exits 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from typing import IO, Any

from leaseq import AsyncClient
from leaseq.worker import Job, Worker


def arguments() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--url", required=True)
    parser.add_argument("--session", required=True)
    parser.add_argument("--owner", required=True)
    parser.add_argument("--concurrency", type=int, required=True)
    parser.add_argument("--ttl-s", type=float, required=True)
    parser.add_argument("--handler-ms", type=float, required=True)
    parser.add_argument("--events", required=True)
    parser.add_argument("--token")
    parser.add_argument("--grace-s", type=float, default=5.0)
    return parser.parse_args()


class Events:
    """The event file: one JSON line per event, written through at once."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, event: str, **fields: Any) -> None:
        line = json.dumps({"event": event, **fields, "t": int(time.time() * 1000)})
        self.stream.write(line + "\n")
        self.stream.flush()


async def work(args: argparse.Namespace, events: Events) -> None:
    async def handler(job: Job) -> dict[str, Any]:
        fields = {"lead": job.lead.id, "attempt": job.lease.attempt, "owner": args.owner}
        events.write("start", **fields)
        payload = job.lead.payload
        ms = payload.get("ms", args.handler_ms)
        try:
            await asyncio.sleep(float(ms) / 1000)
        except asyncio.CancelledError:
            events.write("aborted", **fields)
            raise
        events.write("finished", **fields)
        if payload.get("fail") is True:
            raise RuntimeError("the payload asked to fail")
        return {"lead": job.lead.id, "by": "python"}

    async with AsyncClient(args.url, token=args.token) as client:
        worker = Worker(
            client,
            args.session,
            handler,
            owner=args.owner,
            concurrency=args.concurrency,
            ttl_s=args.ttl_s,
            grace_s=args.grace_s,
            forever=True,
        )
        running = asyncio.create_task(worker.run(handle_signals=True))
        await asyncio.sleep(0)  # run() has installed its signal handlers
        events.write("ready")
        await running


def main() -> None:
    args = arguments()
    with open(args.events, "a", encoding="utf-8") as stream:
        events = Events(stream)
        asyncio.run(work(args, events))
        events.write("stopped")


if __name__ == "__main__":
    main()
