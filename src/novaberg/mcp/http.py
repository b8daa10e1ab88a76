"""``/mcp`` on ``novaberg serve``: Nova's MCP server over Streamable HTTP, stateless (a fresh
transport per request; the 2026-07-28 revision's per-request envelope, and the initialize
handshake of earlier revisions, which Open WebUI and this year's desktop clients send). Each
answer is one JSON body (``application/json``), not an event stream: no tool sends progress,
and the stream cost every call about 1.5 ms of the server's CPU.

Every request is authenticated before the SDK sees it, by the same dependency as ``/v1`` and
``/api`` (:func:`~novaberg.server.auth.require_user`): no key or a wrong one is a 401, a
front-end key names its end user, the rate limit applies. A front-end key may leave its end
user out of a request of only :data:`DATA_FREE` methods (the handshake, the lists of tools
and resources), as of ``GET /v1/models``: Open WebUI's *Verify connection* sends no user.
The user's name travels in the ASGI scope to the tools (:func:`seat`), never in an
argument. The app's middleware runs first: the host allow-list (DNS rebinding), the body
limit, CORS. The SDK's own Host check is off (the allow-list is the one rule for every
route).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from typing import Any

from mcp.server.mcpserver import Context
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Message, Receive, Scope, Send

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.engine.service import TurnService
from novaberg.errors import NovabergError
from novaberg.mcp.calls import Seat
from novaberg.mcp.server import build_server, client_name
from novaberg.server.auth import user_of
from novaberg.server.errors import ApiProblem, error_response

PATH = "/mcp"
USER_KEY = "novaberg.user"
"""Where the authenticated user's name waits in the request's ASGI scope."""
DATA_FREE = frozenset(
    {
        "server/discover",
        "initialize",
        "notifications/initialized",
        "ping",
        "tools/list",
        "resources/list",
        "resources/templates/list",
        "prompts/list",
    }
)
"""JSON-RPC methods that read no user's data."""
DATA_FREE_BYTES = 16_384
"""A body longer than this is no request of :data:`DATA_FREE` methods (they carry no data):
it is not parsed here."""


def _data_free(body: bytes) -> bool:
    """Whether every message of a POST body is a :data:`DATA_FREE` method."""
    if len(body) > DATA_FREE_BYTES:
        return False
    try:
        sent: Any = json.loads(body)
    except (ValueError, RecursionError):  # not JSON, or nested too deep: the SDK answers it
        return False
    messages = sent if isinstance(sent, list) else [sent]
    return bool(messages) and all(
        isinstance(m, dict) and m.get("method") in DATA_FREE for m in messages
    )


async def _body(receive: Receive) -> bytes:
    """The whole request body (the app's body limit has bounded it already)."""
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` once, then what the connection says (a disconnect)."""
    sent = False

    async def again() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return again


async def seat(ctx: Context) -> Seat:
    """The caller of an HTTP request: its app's engine and turn service, its key's user."""
    request = ctx.request_context.request
    scope = getattr(request, "scope", None)
    if not isinstance(scope, dict) or USER_KEY not in scope:
        raise NovabergError("This request was not authenticated.")  # never: see McpRoute
    state = scope["app"].state
    engine: Engine = state.engine
    service: TurnService = state.service
    return Seat(engine, service, str(scope[USER_KEY]), client_name(ctx))


class McpRoute:
    """The ASGI endpoint of ``/mcp``: authenticate, then hand the request to the SDK."""

    def __init__(self, settings: Settings) -> None:
        self.server = build_server(seat)
        self.server.streamable_http_app(
            streamable_http_path=PATH,
            stateless_http=True,
            json_response=True,
            max_request_body_size=settings.server.max_body_bytes,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.manager = self.server.session_manager

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        body = await _body(receive) if scope["method"] == "POST" else b""
        receive = _replay(body, receive) if scope["method"] == "POST" else receive
        try:
            user = await user_of(Request(scope, receive), shared=_data_free(body))
        except ApiProblem as problem:
            response = error_response(
                PATH, problem.status_code, str(problem.detail), problem.code, problem.headers
            )
            await response(scope, receive, send)
            return
        scope[USER_KEY] = user
        await self.manager.handle_request(scope, receive, send)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        """The SDK's request task group, for the life of the app (its lifespan)."""
        async with self.manager.run():
            yield


def mount(app: Starlette, settings: Settings) -> McpRoute:
    """Add ``/mcp`` to ``app`` (GET, POST and DELETE, as the transport answers them); enter
    :meth:`McpRoute.running` in the app's lifespan."""
    route = McpRoute(settings)
    # first in the table: a request to /mcp no longer runs past every route of /api and /v1
    # first (their matching was a tenth of the door's time)
    app.router.routes.insert(0, Route(PATH, endpoint=route, methods=["GET", "POST", "DELETE"]))
    return route
