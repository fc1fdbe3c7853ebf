"""The async client's default transport: httpx's requests and answers, carried by aiohttp.

``AsyncClient`` speaks httpx's types everywhere (a transport takes an
``httpx.Request`` and gives an ``httpx.Response``, and tests hand it their
own transports). Only the carrying differs: httpx's own async transport
(httpcore, anyio and h11, all pure Python) costs a worker about 0.75 ms of CPU
per request on a 2-CPU machine; aiohttp, whose parser and connection pool are
compiled, about 0.3 ms, and a worker sends one request per lead
(docs/worker.md, "The cost of a lead"). So the default transport is this one:
the request's method, URL, headers and body go out as they are, the answer
comes back as an ``httpx.Response``, and aiohttp's failures become the
``httpx.TransportError`` of the same meaning, which the client retries as any
other (``leaseq._wire``).

The aiohttp session is opened on the first request, inside the running loop, and
closed by ``aclose``. Keep-alive connections are pooled, at most as many as
httpx's pool holds.
"""

from __future__ import annotations

import urllib.request

import aiohttp
import httpx

MAX_CONNECTIONS = 100
_REDIRECTS_OFF = False  # a redirect is an answer to the caller, as httpx answers it


class AioHttpTransport(httpx.AsyncBaseTransport):
    """An ``httpx.AsyncBaseTransport`` over an ``aiohttp.ClientSession`` (the module docstring)."""

    def __init__(self) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._proxies: dict[tuple[str, str], str | None] = {}  # by scheme and host

    def _opened(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            # httpx's own pool size; idle connections closed after 15 s, before the
            # service's keep-alive (65 s) or a balancer's (60 s) would.
            connector = aiohttp.TCPConnector(limit=MAX_CONNECTIONS, keepalive_timeout=15)
            self._session = aiohttp.ClientSession(
                connector=connector,
                auto_decompress=False,  # httpx.Response decodes what Content-Encoding says
                skip_auto_headers=("User-Agent", "Accept-Encoding", "Content-Type"),
            )
        return self._session

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        timeout = _timeout_of(request)
        origin = (request.url.scheme, request.url.host)
        if origin not in self._proxies:
            self._proxies[origin] = _proxy_for(*origin)
        headers = [
            (name.decode("latin-1"), text.decode("latin-1")) for name, text in request.headers.raw
        ]
        try:
            async with self._opened().request(
                request.method,
                str(request.url),
                headers=headers,
                data=request.content,
                timeout=timeout,
                allow_redirects=_REDIRECTS_OFF,
                proxy=self._proxies[origin],
            ) as answer:
                content = await answer.read()
                raw_headers = answer.raw_headers
                status = answer.status
                reason = answer.reason
        except aiohttp.ClientConnectorError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__, request=request) from exc
        except aiohttp.ConnectionTimeoutError as exc:
            raise httpx.ConnectTimeout(str(exc) or "connect timed out", request=request) from exc
        except (aiohttp.SocketTimeoutError, TimeoutError) as exc:
            raise httpx.ReadTimeout(str(exc) or "timed out", request=request) from exc
        except aiohttp.ClientPayloadError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except aiohttp.ServerDisconnectedError as exc:
            raise httpx.RemoteProtocolError(str(exc), request=request) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__, request=request) from exc
        return httpx.Response(
            status,
            headers=list(raw_headers),
            content=content,
            request=request,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": (reason or "").encode()},
        )

    async def aclose(self) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()
        self._session = None


def _proxy_for(scheme: str, host: str) -> str | None:
    """The proxy the environment names for ``scheme`` and ``host`` (``HTTP_PROXY``,
    ``HTTPS_PROXY``, ``NO_PROXY``), as httpx's clients honour it; read once per origin, not
    per request (aiohttp's own ``trust_env`` reads it in a thread for every request)."""
    proxy = urllib.request.getproxies_environment().get(scheme)
    if proxy is None or urllib.request.proxy_bypass(host):
        return None
    return proxy


def _timeout_of(request: httpx.Request) -> aiohttp.ClientTimeout:
    """The request's httpx timeouts (``extensions["timeout"]``) as aiohttp's."""
    given = request.extensions.get("timeout", {})
    return aiohttp.ClientTimeout(
        total=None,
        connect=given.get("pool"),
        sock_connect=given.get("connect"),
        sock_read=given.get("read"),
    )
