"""The FastAPI app of ``novaberg serve``: one :class:`~novaberg.engine.Engine` per process
(one model queue shared by all users), opened when the server starts and closed when it
stops; each request runs as the user of its key."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.server import (
    api_details,
    api_events,
    api_memory,
    api_turns,
    health,
    openai,
    stats_api,
    web,
)
from novaberg.server.errors import install_error_handlers
from novaberg.server.limits import BodyLimit, ConversationBusy
from novaberg.server.ratelimit import RateLimiter

log = logging.getLogger("novaberg.server")
CORS_REQUEST_HEADERS = [
    "Authorization",
    "Content-Type",
    "X-Novaberg-Conversation-Id",
    "X-OpenWebUI-Chat-Id",
    "X-OpenWebUI-User-Id",
    "X-OpenWebUI-User-Jwt",
    "Last-Event-ID",
]
CORS_RESPONSE_HEADERS = ["X-Novaberg-Conversation-Id", "X-Novaberg-Turn-Id", "Retry-After"]


def create_app(settings: Settings) -> FastAPI:
    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = await Engine.open(settings)
        for notice in engine.notices:
            log.warning("notice: %s", notice)
        app.state.engine = engine
        app.state.turns = set()
        app.state.busy = ConversationBusy()
        engine.start_background()  # memory jobs a previous process left waiting
        try:
            yield
        finally:
            turns: set[asyncio.Task[object]] = app.state.turns
            for task in list(turns):  # turns whose client left; each is marked aborted
                task.cancel()
            await asyncio.gather(*turns, return_exceptions=True)
            await engine.aclose()

    app = FastAPI(
        title="Novaberg",
        summary="Nova over HTTP: an OpenAI-compatible endpoint over the same engine as the CLI.",
        lifespan=lifespan,
    )
    install_error_handlers(app)
    app.add_middleware(BodyLimit, max_bytes=settings.server.max_body_bytes)
    app.state.limiter = RateLimiter(settings.server.rate_limit_per_minute)
    if settings.server.cors_origins:  # outermost: error answers carry the CORS headers too
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.cors_origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=CORS_REQUEST_HEADERS,
            expose_headers=CORS_RESPONSE_HEADERS,
        )
    app.include_router(health.router)
    app.include_router(openai.router)
    app.include_router(stats_api.router)
    app.include_router(api_turns.router)
    app.include_router(api_events.router)
    app.include_router(api_memory.router)
    app.include_router(api_details.router)
    app.include_router(web.router)
    return app
