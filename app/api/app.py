"""The FastAPI application: ``create_app(settings)`` and its lifespan.

``create_app`` is also the factory for ``uvicorn --factory app.api.app:create_app``
(settings then come from ``LEASEQ_*``). It needs ``Settings.database_url``; the
embedded PostgreSQL is ``leaseq serve``'s business.

``/docs`` (Swagger UI) and ``/redoc`` load their scripts and styles from the
service itself, under ``DOCS_ASSETS`` (the files ship in fastapi-offline), so
they work offline and name no other host. With tokens on, they and their
assets need a token like everything else. The document at ``/openapi.json`` is
FastAPI's, completed by ``app.api.openapi`` (operation ids, the bearer scheme, every
refusal of every operation): the same whether the service has tokens or not.

Requests pass, outermost first: latency metrics → bearer auth (when tokens are
configured: a bootstrap token, or a scoped one of ``app.domain.tokens``) or the
Host check (when not) → body limit → JSON bodies only →
FastAPI, whose router finds a route without path parameters in its index
(``app.api.route_index``) and whose routes read every body through the front door
(``app.api.front_door``: read whole, parsed once by ``app.api.body``). The
lifespan starts a ``Runtime`` (pool, queue, LISTEN fan-out, and the
maintenance services: boot recovery, sweeper, pruner) and stops it on
shutdown; see ``app.service.runtime`` for how SIGTERM ends long polls at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi_offline import FastAPIOffline

from app import __version__
from app.api import (
    access,
    lead_list_routes,
    openapi,
    problems,
    route_index,
    routes,
    token_routes,
    tracing,
)
from app.api.auth import BearerAuth
from app.api.hosts import AllowedHosts
from app.api.middleware import BodyLimit, JsonBodies, RequestMetrics
from app.config import Settings
from app.service.runtime import Runtime

DESCRIPTION = """A lease queue on PostgreSQL: producers push leads into sessions; workers
lease them, renew their leases, and complete or release them. Every error is
`application/problem+json` with a stable `code`."""

DOCS_ASSETS = "/docs/assets"


def create_app(settings: Settings | None = None) -> FastAPI:
    """The leaseq REST API over ``settings.database_url`` (``Settings()`` when None)."""
    settings = settings or Settings()
    Runtime.check(settings)
    configured = settings  # narrowed for the closure

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        runtime = Runtime.build(configured)
        app.state.runtime = runtime
        await runtime.start()
        try:
            yield
        finally:
            await runtime.stop()

    app = FastAPIOffline(
        title="leaseq",
        version=__version__,
        description=DESCRIPTION,
        lifespan=lifespan,
        static_url=DOCS_ASSETS,
        telemetry=tracing.telemetry(settings),
        generate_unique_id_function=openapi.operation_id,
    )
    problems.install(app)
    tokens = settings.token_list
    app.include_router(routes.router)
    app.include_router(lead_list_routes.router)
    app.include_router(token_routes.router)
    app.include_router(routes.probes)
    access.check_declared(app.routes)  # every route has a role and a scope
    route_index.install(app)
    app.add_middleware(JsonBodies)
    app.add_middleware(BodyLimit, max_body_bytes=settings.max_body_bytes)
    if tokens:
        app.add_middleware(BearerAuth, tokens=tokens)
    else:
        app.add_middleware(AllowedHosts, allowed=settings.allowed_host_list)
    app.add_middleware(RequestMetrics)
    openapi.install(app)  # the document, the same with tokens or without
    return app
