"""Helpers of the client and worker tests (the service itself runs through ``tests.serving``).

A recording HTTP transport that can also cut a worker off from chosen paths,
a fresh database for a module, readers of the ledger, and a process check.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import psycopg
from sqlalchemy.engine import make_url

from app.pg import libpq_url


class RecordingTransport(httpx.AsyncBaseTransport):
    """Real HTTP, each request recorded with its status; a path in ``blocked`` cannot connect."""

    def __init__(self, blocked: set[str] | None = None) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.calls: list[tuple[str, int | None]] = []  # status None: no answer
        self.requests: list[httpx.Request] = []
        self.blocked = blocked if blocked is not None else set()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        self.requests.append(request)
        if path in self.blocked:
            self.calls.append((path, None))
            raise httpx.ConnectError("blocked by the test", request=request)
        try:
            response = await self.inner.handle_async_request(request)
        except httpx.TransportError:
            self.calls.append((path, None))
            raise
        self.calls.append((path, response.status_code))
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()

    def count(self, path: str) -> int:
        return sum(1 for called, _ in self.calls if called == path)


@contextmanager
def fresh_database(server_url: str, template: str) -> Iterator[str]:
    """A database copied from the migrated ``template``, dropped afterwards."""
    name = f"leaseq_w_{uuid.uuid4().hex[:12]}"
    admin_url = libpq_url(server_url)
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}"')
    try:
        yield make_url(server_url).set(database=name).render_as_string(hide_password=False)
    finally:
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def completions(database_url: str, lead_id: int) -> list[str | None]:
    """The owners of the ledger's ``completed`` events of one lead, in order."""
    return [owner for event, owner, _ in ledger(database_url, lead_id) if event == "completed"]


def ledger(database_url: str, lead_id: int) -> list[tuple[str, str | None, int]]:
    """(event, owner, attempt) of each lead_events row of one lead, in order."""
    with psycopg.connect(libpq_url(database_url)) as conn:
        rows = conn.execute(
            "SELECT event, owner, attempt FROM lead_events WHERE lead_id = %s ORDER BY id",
            (lead_id,),
        ).fetchall()
    return [(event, owner, attempt) for event, owner, attempt in rows]


def alive(pid: int) -> bool:
    """Whether a process runs (a zombie, killed but not yet reaped, does not)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
