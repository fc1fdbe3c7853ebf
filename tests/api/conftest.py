"""The REST API on each test's fresh database, served in-process with its lifespan running.

``client`` talks to an app built from ``api_settings``; ``serve`` builds more
(other settings, other databases) inside one test.

With ``LEASEQ_TEST_POOLER_URL`` set (a PgBouncer in transaction mode in front
of the test server; tests/deploy/test_pgbouncer.py sets it), ``api_settings``
reach each test's database through that pooler (``database_pooled``) and
LISTEN on the direct URL; with ``LEASEQ_TEST_POOLER_FLAG=0`` too, only the
direct URL is given and ``database_pooled`` is left unset, as a user who
forgot it would.

Every answer those clients receive is checked against the OpenAPI document their app
serves (``tests.support.openapi_check``): its status, media type, body and headers; so
is every answer of a ``services`` process's ``client()``. So the whole suite proves the
document describes what the service sends.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from functools import cache
from pathlib import Path
from typing import Any

import httpx
import pytest

from app.api.app import create_app
from app.config import Settings
from tests.support.in_process import Serve, database_settings, serving
from tests.support.openapi_check import Conformance, conformance
from tests.support.serving import Services


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
        return checked_serving(api_settings.model_copy(update=overrides))

    return build


@pytest.fixture
async def client(api_settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with checked_serving(api_settings) as client:
        yield client


@asynccontextmanager
async def checked_serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """``serving(settings)``, each answer its client receives checked against the document
    (built once: it is the same whatever the settings, and building it took 0.2 s a test)."""
    async with serving(settings) as client:
        check = served_document().check

        async def checked(response: httpx.Response) -> None:
            await response.aread()
            check(response)

        client.event_hooks["response"].append(checked)
        yield client


@cache
def served_document() -> Conformance:
    """The check of the document every app serves, in-process or as ``leaseq serve``: it is
    the same whatever the settings (``app.api.openapi.install``)."""
    return conformance(create_app(Settings(database_url="postgresql://unused")).openapi())


@pytest.fixture
def services(tmp_path: Path) -> Iterator[Services]:
    """``leaseq serve`` processes of this test, each answer of their clients checked."""
    running = Services(tmp_path, check=served_document().check)
    yield running
    running.close()
