"""The HTTP transport under the model backends' httpx clients: aiohttp's, through
``httpx-aiohttp`` (the transport the ``openai`` SDK offers as ``DefaultAioHttpClient``).

Why not httpx's own: a turn sends six or more model requests, and httpx's default transport
(httpcore, with the pure-Python ``h11`` parser and anyio's locks) spends about half a
millisecond of the event loop's time on each; aiohttp parses HTTP in C. With calls answered
at once, that was about 3 ms of a turn's 16 and most of the CPU time the turn's calls took
outside the server (issue 21; ``make bench``, part orchestration). The clients stay httpx
clients (``ollama.AsyncClient`` takes the transport), so timeouts, event hooks and response
handling are httpx's.

What changes is the errors: ``httpx-aiohttp`` raises httpx's exceptions for aiohttp's, but
maps every ``aiohttp.ClientConnectionError`` to ``httpx.ConnectTimeout``: a refused
connection, a server that closed the connection mid-answer and a reset alike.
:func:`as_httpx` gives each the httpx exception httpx's own transport raises for it, from
the aiohttp exception it was raised from, so the backends' fault translation (unreachable,
timed out, stream cut) reads them as before.

Credentials in the address (``http://user:secret@host``): httpx sends them as the
``Authorization`` header, and aiohttp refuses a request whose URL still carries them beside
that header, so the transport hands aiohttp the address without them.

Proxies: httpx reads ``HTTP(S)_PROXY``/``NO_PROXY`` only for its own transport, so this
one reads them, once per host it is sent to (aiohttp's ``trust_env`` would read the
environment and ``~/.netrc`` again for every request: a tenth of a millisecond each).
"""

from __future__ import annotations

import asyncio
import ssl
import urllib.request

import aiohttp
import httpx
from httpx_aiohttp import AiohttpTransport

KEEPALIVE_S = 5.0
"""How long an idle connection is kept (httpx's default)."""


def _session(verify: ssl.SSLContext) -> aiohttp.ClientSession:
    """Made at the first request, on the loop that sends it (aiohttp binds to it); TLS is
    verified as httpx verifies it (certifi's roots, or ``SSL_CERT_FILE``/``SSL_CERT_DIR``)."""
    connector = aiohttp.TCPConnector(limit=100, keepalive_timeout=KEEPALIVE_S, ssl=verify)
    return aiohttp.ClientSession(connector=connector)


def proxy_for(url: httpx.URL) -> httpx.Proxy | None:
    """The proxy the environment names for ``url``: ``HTTP_PROXY``/``HTTPS_PROXY`` for its
    scheme, none where ``NO_PROXY`` names its host (as aiohttp's ``trust_env`` reads them)."""
    if url.host and urllib.request.proxy_bypass(url.host):
        return None
    named = urllib.request.getproxies().get(url.scheme)
    return httpx.Proxy(named) if named else None


class _Transport(AiohttpTransport):
    def __init__(self) -> None:
        super().__init__(client=lambda: _session(self.ssl_context))
        self._proxies: dict[tuple[str, str], httpx.Proxy | None] = {}

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        if request.url.userinfo:  # already the Authorization header httpx built from them
            request.url = request.url.copy_with(userinfo=b"")
        where = (request.url.scheme, request.url.host)
        if where not in self._proxies:
            self._proxies[where] = proxy_for(request.url)
        self.proxy = self._proxies[where]  # read by the request below, before its first await
        return await super().handle_async_request(request)


def transport() -> httpx.AsyncBaseTransport:
    """A new transport for one backend's client (closed with the client)."""
    return _Transport()


def as_httpx(exc: BaseException) -> BaseException:
    """``exc`` as httpx's own transport would have raised it: an exception raised from one
    of aiohttp's becomes the httpx exception for that kind of failure; anything else is
    returned as it is."""
    cause = exc.__cause__ if isinstance(exc, httpx.HTTPError) else exc
    if not isinstance(cause, aiohttp.ClientError) and not (
        cause is not exc and isinstance(cause, asyncio.TimeoutError)
    ):
        return exc
    message = str(cause) or type(cause).__name__
    mapped: httpx.HTTPError
    if isinstance(cause, aiohttp.ConnectionTimeoutError):
        mapped = httpx.ConnectTimeout(message)
    elif isinstance(cause, aiohttp.ServerTimeoutError | asyncio.TimeoutError):
        mapped = httpx.ReadTimeout(message)
    elif isinstance(cause, aiohttp.ClientProxyConnectionError | aiohttp.ClientHttpProxyError):
        mapped = httpx.ProxyError(message)
    elif isinstance(cause, aiohttp.ClientConnectorError):  # refused, no such host, TLS
        mapped = httpx.ConnectError(message)
    elif isinstance(cause, aiohttp.ServerDisconnectedError | aiohttp.ClientPayloadError):
        mapped = httpx.RemoteProtocolError(message)  # closed before the answer was whole
    elif isinstance(cause, aiohttp.ClientOSError | aiohttp.ClientConnectionError):
        mapped = httpx.ReadError(message)  # reset, or broken under the answer
    else:
        return exc
    mapped.__cause__ = cause
    return mapped
