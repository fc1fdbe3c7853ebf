"""One chaos worker process: ``python -m tests.chaos.chaos_worker URL SESSION LOG OWNER``.

Runs ``leaseq.worker.Worker`` forever over REST (leases in batches, renews,
completes, most completions leasing the next lead too) and appends ``lead_id
attempt owner`` to LOG for each completion the service accepted. The line is
written with one ``write`` on an O_APPEND file, so a kill -9 never leaves half
a line, and a completion the service accepted just before the kill may be
missing from the log but is never logged twice.
"""

from __future__ import annotations

import asyncio
import os
import random
import sys
from typing import Any

from leaseq import AsyncClient
from leaseq.model import FinalStatus, Lead, Lease, NextLease
from leaseq.worker import Job, Worker

CONCURRENCY = 4
TTL_S = 2.5
WAIT_S = 1.0


class LoggingClient(AsyncClient):
    """An AsyncClient that records each accepted completion."""

    def __init__(self, url: str, log_fd: int, owner: str) -> None:
        super().__init__(url, timeout_s=5.0)
        self.log_fd = log_fd
        self.owner = owner

    async def complete(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
    ) -> Lead:
        lead = await super().complete(lead_id, token, status, result, error)
        self._accepted(lead, status)
        return lead

    async def complete_and_lease(
        self,
        lead_id: int,
        token: str,
        status: FinalStatus = "done",
        result: Any = None,
        error: str | None = None,
        *,
        next: NextLease,
        idempotency_key: str | None = None,
    ) -> tuple[Lead, list[Lease]]:
        lead, leases = await super().complete_and_lease(
            lead_id, token, status, result, error, next=next, idempotency_key=idempotency_key
        )
        self._accepted(lead, status)
        return lead, leases

    def _accepted(self, lead: Lead, status: FinalStatus) -> None:
        os.write(self.log_fd, f"{lead.id} {lead.attempts} {self.owner} {status}\n".encode())


async def handle(job: Job) -> dict[str, Any]:
    await asyncio.sleep(random.uniform(0.1, 0.5))
    return {"i": job.payload.get("i")}


async def main(url: str, session: str, log_path: str, owner: str) -> None:
    fd = os.open(log_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    async with LoggingClient(url, fd, owner) as client:
        worker = Worker(
            client,
            session,
            handle,
            owner=owner,
            concurrency=CONCURRENCY,
            ttl_s=TTL_S,
            wait_s=WAIT_S,
            forever=True,
        )
        await worker.run()


if __name__ == "__main__":
    asyncio.run(main(*sys.argv[1:5]))
