"""The REST API on each test's fresh database, served in-process with its lifespan running.

``client`` talks to an app built from ``api_settings``; ``serve`` builds more
(other settings, other databases) inside one test.

With ``LEASEQ_TEST_POOLER_URL`` set (a PgBouncer in transaction mode in front
of the test server; tests/deploy/test_pgbouncer.py sets it), ``api_settings``
reach each test's database through that pooler (``database_pooled``) and
LISTEN on the direct URL; with ``LEASEQ_TEST_POOLER_FLAG=0`` too, only the
direct URL is given and ``database_pooled`` is left unset, as a user who
forgot it would.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from sqlalchemy.engine import make_url

from app.api.app import create_app
from app.config import Settings
from app.service.runtime import Runtime

BASE_URL = "http://leaseq.test"
POOLER_URL_ENV = "LEASEQ_TEST_POOLER_URL"
POOLER_FLAG_ENV = "LEASEQ_TEST_POOLER_FLAG"

Serve = Callable[..., AbstractAsyncContextManager[httpx.AsyncClient]]


def runtime_of(client: httpx.AsyncClient) -> Runtime:
    """The runtime (database, queue, listener) behind an in-process client."""
    app: FastAPI = client.app  # type: ignore[attr-defined]
    runtime: Runtime = app.state.runtime
    return runtime


async def until(check: Callable[[], bool | Awaitable[bool]], within_s: float = 5.0) -> None:
    """Wait until ``check()`` holds; fail after ``within_s`` seconds."""
    async with asyncio.timeout(within_s):
        while True:
            held = check()
            if await held if inspect.isawaitable(held) else held:
                return
            await asyncio.sleep(0.01)


async def listening(client: httpx.AsyncClient) -> None:
    """Wait until the app's LISTEN connection is up."""
    listener = runtime_of(client).listener
    await until(lambda: listener.connected)


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


def database_settings(database_url: str) -> dict[str, Any]:
    """How the app reaches ``database_url``: directly, or through ``LEASEQ_TEST_POOLER_URL``."""
    pooler = os.environ.get(POOLER_URL_ENV)
    if not pooler:
        return {"database_url": database_url}
    name = make_url(database_url).database
    through = make_url(pooler).set(database=name).render_as_string(hide_password=False)
    settings: dict[str, Any] = {"database_url": through, "listen_database_url": database_url}
    if os.environ.get(POOLER_FLAG_ENV, "1") != "0":
        settings["database_pooled"] = True
    return settings


@pytest.fixture
def api_settings(database_url: str) -> Settings:
    return Settings(
        **database_settings(database_url),
        api_tokens="",
        allowed_hosts="leaseq.test",  # BASE_URL's name; loopback names need no listing
        pool_size=10,
        statement_timeout_ms=30_000,
        sweep_interval_s=3600,  # tests sweep by hand
    )


@pytest.fixture
def serve(api_settings: Settings) -> Serve:
    """``async with serve(**overrides) as client``: another app, ``api_settings`` changed."""

    def build(**overrides: Any) -> AbstractAsyncContextManager[httpx.AsyncClient]:
        return serving(api_settings.model_copy(update=overrides))

    return build


@pytest.fixture
async def client(api_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(api_settings) as client:
        yield client
