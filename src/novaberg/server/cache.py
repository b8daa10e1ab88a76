"""``Cache-Control: no-store`` on every ``/api`` and ``/v1`` response: they carry messages
and memories, which a browser must not keep on disk (a forgotten item would outlive its
``memory forget`` there). The page's own files are revalidated instead (:mod:`.web`)."""

from __future__ import annotations

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

PREFIXES = ("/api/", "/v1/")
NO_STORE = "no-store"


def private_path(path: str) -> bool:
    return any(path.startswith(prefix) or path == prefix[:-1] for prefix in PREFIXES)


class NoStore:
    """Pure ASGI middleware: sets the header on the response start of those routes."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not private_path(str(scope.get("path", ""))):
            await self.app(scope, receive, send)
            return

        async def send_no_store(message: Message) -> None:
            if message["type"] == "http.response.start":
                MutableHeaders(scope=message)["Cache-Control"] = NO_STORE
            await send(message)

        await self.app(scope, receive, send_no_store)
