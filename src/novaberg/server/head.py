"""``HEAD`` on every ``GET`` route: the route runs as a ``GET``, its status and headers are
sent, its body is not (uvicorn leaves the body of a response to ``HEAD`` out), and a route
that would stream for ever (``/api/events``) is told at once that the client has gone."""

from __future__ import annotations

import asyncio

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class HeadAsGet:
    """Pure ASGI middleware."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("method") != "HEAD":
            await self.app(scope, receive, send)
            return
        answered = asyncio.Event()

        async def head_receive() -> Message:
            if answered.is_set():
                return {"type": "http.disconnect"}
            waiting = asyncio.ensure_future(receive())
            stop = asyncio.ensure_future(answered.wait())
            try:
                await asyncio.wait([waiting, stop], return_when=asyncio.FIRST_COMPLETED)
            finally:
                stop.cancel()
                if not waiting.done():
                    waiting.cancel()
            return waiting.result() if not waiting.cancelled() else {"type": "http.disconnect"}

        async def head_send(message: Message) -> None:
            if answered.is_set():
                return
            if message["type"] == "http.response.start":
                await send(message)
            elif message["type"] == "http.response.body":
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                answered.set()

        await self.app({**scope, "method": "GET"}, head_receive, head_send)
