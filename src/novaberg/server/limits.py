"""The body cap: a request body larger than ``server.max_body_bytes`` is refused with 413
before any route reads it (bodies under the cap are read whole and handed on)."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from novaberg.server.errors import error_response


class BodyLimit:
    """Pure ASGI middleware (streams responses untouched)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_bytes:
            await self._refuse(path, scope, receive, send)
            return
        if scope.get("method") not in ("POST", "PUT", "PATCH"):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] != "http.request":  # the client went away
                return
            body += message.get("body", b"")
            if len(body) > self.max_bytes:
                await self._refuse(path, scope, receive, send)
                return
            if not message.get("more_body", False):
                break
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": bytes(body), "more_body": False}
            return await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, path: str, scope: Scope, receive: Receive, send: Send) -> None:
        response = error_response(
            path,
            413,
            f"The request body is larger than {self.max_bytes} bytes (server.max_body_bytes).",
            "request_too_large",
            {"Connection": "close"},
        )
        await response(scope, receive, send)
