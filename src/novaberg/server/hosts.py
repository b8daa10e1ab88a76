"""The names the server answers to: a request whose ``Host`` header names another is refused
with 400 before any route runs.

A web page on another site can make its own name resolve to 127.0.0.1 (DNS rebinding) and
then read whatever this server answers without a key (``/healthz``, ``/readyz``,
``/metrics``, ``/openapi.json``, the page's files); its requests still say that site's name
in ``Host``. So, with ``server.allowed_hosts`` empty, a server listening on loopback answers
only to ``localhost``, ``127.0.0.1`` and ``[::1]``; one listening on another single address
also to that address; one listening on every address (``0.0.0.0``, ``::``) to any name,
since its clients' names cannot be known. ``server.allowed_hosts`` replaces that list
(``*.example.org`` matches subdomains, ``*`` anything).
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.datastructures import Headers
from starlette.types import ASGIApp, Receive, Scope, Send

from novaberg.server.errors import error_response

LOOPBACK_NAMES = ("localhost", "127.0.0.1", "[::1]")
ANY = "*"
EVERY_ADDRESS = ("0.0.0.0", "::", "")


def allowed_hosts(configured: Sequence[str], listen_host: str | None) -> list[str]:
    """The names to answer to (see the module text); ``["*"]`` for any."""
    if configured:
        return [name.strip().lower() for name in configured]
    if listen_host is None or listen_host.strip() in EVERY_ADDRESS:
        return [ANY]
    host = listen_host.strip().lower()
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return list(dict.fromkeys([*LOOPBACK_NAMES, shown]))


def host_name(header: str) -> str:
    """The name part of a ``Host`` header (the port cut off; an IPv6 literal keeps its
    brackets), lower-cased."""
    text = header.strip().lower()
    if text.startswith("["):
        end = text.find("]")
        return text[: end + 1] if end > 0 else text
    return text.rpartition(":")[0] if ":" in text else text


def matches(name: str, patterns: Sequence[str]) -> bool:
    for pattern in patterns:
        if pattern == ANY or name == pattern:
            return True
        if pattern.startswith("*.") and name.endswith(pattern[1:]):
            return True
    return False


class HostAllowList:
    """Pure ASGI middleware: 400 for a ``Host`` that is not allowed (and for none)."""

    def __init__(self, app: ASGIApp, hosts: Sequence[str]) -> None:
        self.app = app
        self.hosts = list(hosts)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or ANY in self.hosts:
            await self.app(scope, receive, send)
            return
        header = Headers(scope=scope).get("host", "")
        if matches(host_name(header), self.hosts):
            await self.app(scope, receive, send)
            return
        response = error_response(
            str(scope.get("path", "")),
            400,
            "This server does not answer to the host name this request was sent to (its Host "
            "header); its operator can allow the name in server.allowed_hosts.",
            "invalid_host",
        )
        await response(scope, receive, send)
