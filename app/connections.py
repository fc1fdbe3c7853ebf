"""Idle connections never starve live ones: uvicorn's HTTP protocol with two bounds on idling.

uvicorn counts every open connection against ``limit_concurrency`` and answers
503 past it, and it closes no connection that never sent a request: 2,000
sockets opened and left silent made every live request a 503. So:

* a new connection must send its first request within ``FIRST_REQUEST_S``
  (afterwards, uvicorn's keep-alive timeout applies between requests);
* when a new connection brings the process to its connection limit, the
  connections idle longest (no request in progress) are closed to make room,
  as a browser or a pooling client reconnects anyway. A connection in the
  middle of a request, a long poll included, is never closed.

Knows nothing of leaseq's API; used by ``app.serve``.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    Base: type[Any] = HttpToolsProtocol
except ImportError:  # pragma: no cover - httptools is a dependency of uvicorn[standard]
    Base = H11Protocol

# A fresh connection's time to send its first request line and headers.
FIRST_REQUEST_S = 10.0

_order = itertools.count()


class BoundedIdle(Base):  # type: ignore[misc]
    """uvicorn's HTTP protocol, closing connections that idle when room is needed."""

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.made = next(_order)
        super().connection_made(transport)
        self.timeout_keep_alive_task = self.loop.call_later(
            FIRST_REQUEST_S, self.timeout_keep_alive_handler
        )
        limit = self.limit_concurrency
        if limit is not None and len(self.connections) >= limit:
            self._make_room(len(self.connections) - limit + 1)

    def idle(self) -> bool:
        """No request in progress: none begun, or the last one answered."""
        return self.cycle is None or bool(self.cycle.response_complete)

    def _make_room(self, wanted: int) -> None:
        """Close the ``wanted`` longest-idle other connections (fewer if fewer idle)."""
        idle = [c for c in self.connections if c is not self and isinstance(c, BoundedIdle)]
        idle = sorted((c for c in idle if c.idle()), key=lambda c: c.made)[:wanted]
        for connection in idle:
            self.connections.discard(connection)
            if not connection.transport.is_closing():
                connection.transport.close()
