"""Limits on what the server takes: the body cap (a request body larger than
``server.max_body_bytes`` is refused with 413 before any route reads it; bodies under the cap
are read whole and handed on) and ``server.max_streams`` event streams per user (429). The
per-user rate limit is :mod:`novaberg.server.ratelimit`; one running turn per conversation
(409) and a full model queue (503) are the engine's admission
(:mod:`novaberg.engine.service`)."""

from __future__ import annotations

from collections import Counter

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from novaberg.server.errors import ApiProblem, error_response


class BodyLimit:
    """Pure ASGI middleware (streams responses untouched). ``larger``: routes whose bodies
    have a cap of their own (an audio file), as ``{path: (bytes, setting)}``."""

    def __init__(
        self, app: ASGIApp, max_bytes: int, larger: dict[str, tuple[int, str]] | None = None
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.larger = larger or {}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = str(scope.get("path", ""))
        cap, setting = self.larger.get(path, (self.max_bytes, "server.max_body_bytes"))
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and declared.isdigit() and int(declared) > cap:
            await self._refuse(path, scope, receive, send, cap, setting)
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
            if len(body) > cap:
                await self._refuse(path, scope, receive, send, cap, setting)
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

    async def _refuse(
        self, path: str, scope: Scope, receive: Receive, send: Send, cap: int, setting: str
    ) -> None:
        response = error_response(
            path,
            413,
            f"The request body is larger than {cap} bytes ({setting}).",
            "request_too_large",
            {"Connection": "close"},
        )
        await response(scope, receive, send)


STREAM_RETRY_AFTER_S = 5
"""What ``Retry-After`` says when a user has all their event streams open."""


class StreamSlots:
    """At most ``limit`` open ``/api/events`` streams per user in this process (each holds a
    connection and a task for as long as the client keeps it)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._open: Counter[str] = Counter()

    def take(self, user: str) -> None:
        if self._open[user] >= self.limit:
            raise ApiProblem(
                429,
                f"This user has {self._open[user]} event streams open (server.max_streams); "
                "close one before opening another.",
                code="too_many_streams",
                headers={"Retry-After": str(STREAM_RETRY_AFTER_S)},
            )
        self._open[user] += 1

    def release(self, user: str) -> None:
        self._open[user] -= 1
        if self._open[user] <= 0:
            del self._open[user]

    def open(self, user: str) -> int:
        return self._open[user]
