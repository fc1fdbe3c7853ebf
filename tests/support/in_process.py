"""The REST API served in-process: an app with its lifespan running and an HTTP client to it.

The fixtures of tests/api build on these; tests of other tiers (the group commit under
requests, the payload round trip, PgBouncer) serve an app of their own settings with them.
With ``LEASEQ_TEST_POOLER_URL`` set, ``database_settings`` reach a database through that
pooler (tests/api/conftest.py says how).
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from app.api.app import create_app
from app.config import Settings
from app.service.runtime import Runtime

BASE_URL = "http://leaseq.test"
POOLER_URL_ENV = "LEASEQ_TEST_POOLER_URL"

Serve = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def runtime_of(client: httpx.AsyncClient) -> Runtime:
    """The runtime (database, queue, listener) behind an in-process client."""
    app: FastAPI = client.app  # type: ignore[attr-defined]
    runtime: Runtime = app.state.runtime
    return runtime


POLL_S = 0.01


async def until(check: Callable[[], bool | Awaitable[bool]], within_s: float = 5.0) -> None:
    """Wait until ``check()`` holds; fail after ``within_s`` seconds of polling.

    The time is counted in polls of ``POLL_S``, never read off the clock: a test process
    paused by a loaded machine would otherwise wake with its time used up, and fail before
    the tasks it waits for have run once after the pause.
    """
    for _ in range(max(1, round(within_s / POLL_S))):
        held = check()
        if await held if inspect.isawaitable(held) else held:
            return
        await asyncio.sleep(POLL_S)
    raise TimeoutError(f"not within {within_s}s of polling")


async def listening(client: httpx.AsyncClient) -> None:
    """Wait until the app's LISTEN connections are up (on a Citus cluster, one per node)."""
    listener = runtime_of(client).listener
    await until(lambda: listener.everywhere)


async def waiters(client: httpx.AsyncClient, n: int) -> None:
    """Wait until ``n`` lease requests are waiting in the app."""
    listener = runtime_of(client).listener
    await until(lambda: listener.waiters >= n, within_s=10)


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """An app with its lifespan running, and an HTTP client to it."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url=BASE_URL) as client:
            client.app = app  # type: ignore[attr-defined]
            yield client


def serve_database(database_url: str) -> tuple[str, dict[str, str]]:
    """The ``--database-url`` and environment a ``leaseq serve`` process is given to reach
    ``database_url`` as ``database_settings`` has an app reach it: through
    ``LEASEQ_TEST_POOLER_URL`` when set (so a service test runs through PgBouncer too)."""
    settings = database_settings(database_url)
    env: dict[str, str] = {}
    if "listen_database_url" in settings:
        env["LEASEQ_LISTEN_DATABASE_URL"] = settings["listen_database_url"]
    if settings.get("database_pooled"):
        env["LEASEQ_DATABASE_POOLED"] = "true"
    return settings["database_url"], env


def database_settings(database_url: str) -> dict[str, Any]:
    """How the app reaches ``database_url``: directly, or through ``LEASEQ_TEST_POOLER_URL``."""
    pooler = os.environ.get(POOLER_URL_ENV)
    if not pooler:
        return {"database_url": database_url}
    name = make_url(database_url).database
    through = make_url(pooler).set(database=name).render_as_string(hide_password=False)
    return {"database_url": through, "listen_database_url": database_url, "database_pooled": True}
