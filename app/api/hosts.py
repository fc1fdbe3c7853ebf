"""The Host check that stops DNS rebinding, a pure ASGI middleware installed without API tokens.

A web page on another site can make a browser send requests to a service
with no tokens on 127.0.0.1 by pointing its own name at that address (DNS
rebinding); the browser then treats the answers as the page's own. Such a
request still names the attacker's host in ``Host``. So, without tokens, only
loopback names (``localhost``, ``*.localhost``, ``127.0.0.0/8``, ``[::1]``,
any port) and those of ``LEASEQ_ALLOWED_HOSTS`` are served; any other gets 403
``forbidden``. The probes stay open: they answer nothing worth reading, and
orchestrators call them by the pod's address.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Iterable

from starlette.types import ASGIApp, Receive, Scope, Send

from app.api.problems import problem

OPEN_PATHS = frozenset({"/healthz", "/readyz"})
ANY_HOST = "*"


def host_name(value: str) -> str:
    """The name of a Host header, without its port, lower case (``[::1]:80`` → ``[::1]``)."""
    value = value.strip().lower()
    if value.startswith("["):
        return value.partition("]")[0] + "]"
    return value.rpartition(":")[0] if value.count(":") == 1 else value


@functools.lru_cache(maxsize=256)
def is_loopback(name: str) -> bool:
    """Whether a Host name can only mean this machine (remembered: a fleet sends a handful of
    names, and parsing an address was most of the check's cost on every request)."""
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name.strip("[]")).is_loopback
    except ValueError:
        return False


class AllowedHosts:
    """Refuse requests whose Host is neither loopback nor one of ``allowed``."""

    def __init__(self, app: ASGIApp, *, allowed: Iterable[str] = ()) -> None:
        self.app = app
        self.allowed = frozenset(host_name(name) for name in allowed)

    def permits(self, host: str | None) -> bool:
        if ANY_HOST in self.allowed:
            return True
        if host is None:  # HTTP/1.0 without Host: no browser sends that
            return True
        name = host_name(host)
        return is_loopback(name) or name in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in OPEN_PATHS or self.permits(_host(scope)):
            await self.app(scope, receive, send)
            return
        detail = (
            "this Host is not served without API tokens; add it to LEASEQ_ALLOWED_HOSTS "
            "or configure LEASEQ_API_TOKENS"
        )
        await problem(403, "forbidden", detail)(scope, receive, send)


def _host(scope: Scope) -> str | None:
    for name, value in scope["headers"]:
        if name == b"host":
            return bytes(value).decode("latin-1")
    return None
