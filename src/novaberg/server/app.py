"""The FastAPI app of ``novaberg serve``: one :class:`~novaberg.engine.Engine` per process
(one model queue shared by all users), opened when the server starts and closed when it
stops; each request runs as the user of its key."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI
from starlette.middleware.cors import CORSMiddleware
from starlette.types import ASGIApp, Receive, Scope, Send

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.engine.service import TurnService
from novaberg.jobs.worker import Sweeper
from novaberg.mcp import http as mcp_http
from novaberg.server import (
    api_details,
    api_events,
    api_memory,
    api_proactive,
    api_turns,
    audio,
    health,
    metrics,
    openai,
    stats_api,
    web,
)
from novaberg.server.cache import NoStore
from novaberg.server.errors import install_error_handlers
from novaberg.server.head import HeadAsGet
from novaberg.server.hosts import HostAllowList, allowed_hosts
from novaberg.server.limits import BodyLimit, StreamSlots
from novaberg.server.ratelimit import RateLimiter

log = logging.getLogger("novaberg.server")
CLEANUP_S = 10.0
"""How long the shutdown waits for cancelled requests to store their turns as aborted."""
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


async def finish_turns(app: FastAPI, grace_s: float) -> None:
    """Let the turns still running (their client left after the answer, or uvicorn stopped
    waiting for it) finish within what is left of ``grace_s`` since the shutdown began
    (``app.state.stopping_since``, set by ``novaberg serve``); cancel the rest, which the
    engine stores as aborted."""
    service: TurnService = app.state.service
    since: float = getattr(app.state, "stopping_since", time.monotonic())
    await service.finish(grace_s - (time.monotonic() - since))
    # requests uvicorn cancelled after the grace: their turns store themselves as aborted
    requests: set[asyncio.Task[object]] = app.state.requests
    if requests:
        await asyncio.wait(list(requests), timeout=CLEANUP_S)


class InFlight:
    """Pure ASGI middleware keeping the task of each HTTP request in ``tasks`` while it runs,
    so the shutdown waits for a cancelled one to store its turn as aborted before the
    database closes."""

    def __init__(self, app: ASGIApp, tasks: set[asyncio.Task[object]]) -> None:
        self.app = app
        self.tasks = tasks

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        task = asyncio.current_task()
        if scope["type"] != "http" or task is None:
            await self.app(scope, receive, send)
            return
        self.tasks.add(task)
        try:
            await self.app(scope, receive, send)
        finally:
            self.tasks.discard(task)


def create_app(settings: Settings, *, listen_host: str | None = None) -> FastAPI:
    """The app; ``listen_host`` (``novaberg serve --host``) decides the host names it
    answers to when ``server.allowed_hosts`` is empty (:mod:`novaberg.server.hosts`)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        engine = await Engine.open(settings)
        for notice in engine.notices:
            log.warning("notice: %s", notice)
        app.state.engine = engine
        app.state.metrics = metrics.Metrics(engine.queue.depth)
        engine.queue.observers.add(app.state.metrics)
        app.state.service = TurnService(engine)
        # turns of a dead process, memory jobs and second passes left waiting: now and every
        # server.poll_s (other processes on one PostgreSQL leave them too)
        sweeper = Sweeper(engine, settings.server.poll_s, app.state.service)
        sweeper.start()
        mcp_running = app.state.mcp.running()  # /mcp's request task group
        await mcp_running.__aenter__()
        try:
            yield
        finally:
            await mcp_running.__aexit__(None, None, None)
            await sweeper.stop()
            await finish_turns(app, settings.server.shutdown_grace_s)
            await engine.aclose()  # a cancelled job's event runs again elsewhere, at once

    app = FastAPI(
        title="Novaberg",
        summary="Nova over HTTP: an OpenAI-compatible endpoint over the same engine as the CLI.",
        lifespan=lifespan,
        # no /docs or /redoc: they load scripts from a CDN, on this origin, where the page
        # keeps its key; /openapi.json stays
        docs_url=None,
        redoc_url=None,
    )
    install_error_handlers(app)
    speech = settings.speech
    app.add_middleware(
        BodyLimit,
        max_bytes=settings.server.max_body_bytes,
        # an audio file has its own cap, with room for the multipart form around it; so has
        # a chat export
        larger={
            audio.TRANSCRIPTIONS: (speech.max_audio_bytes + 65_536, "speech.max_audio_bytes"),
            api_turns.IMPORT_PATH: (settings.server.max_import_bytes, "server.max_import_bytes"),
        },
    )
    app.add_middleware(NoStore)
    app.add_middleware(HeadAsGet)
    app.state.requests = set()
    app.add_middleware(InFlight, tasks=app.state.requests)
    app.state.streams = StreamSlots(settings.server.max_streams)
    app.state.limiter = RateLimiter(settings.server.rate_limit_per_minute)
    if settings.server.cors_origins:  # outermost: error answers carry the CORS headers too
        app.add_middleware(
            CORSMiddleware,
            allow_origins=settings.server.cors_origins,
            allow_methods=["GET", "POST", "DELETE", "OPTIONS"],
            allow_headers=CORS_REQUEST_HEADERS,
            expose_headers=CORS_RESPONSE_HEADERS,
        )
    # outermost of all: a request for another host name is answered by nothing else
    app.add_middleware(
        HostAllowList, hosts=allowed_hosts(settings.server.allowed_hosts, listen_host)
    )
    app.include_router(health.router)
    app.include_router(metrics.router)
    app.include_router(openai.router)
    app.include_router(audio.router)
    app.include_router(stats_api.router)
    app.include_router(api_turns.router)
    app.include_router(api_events.router)
    app.include_router(api_memory.router)
    app.include_router(api_proactive.router)
    app.include_router(api_details.router)
    app.include_router(web.router)
    app.state.mcp = mcp_http.mount(app, settings)  # /mcp: the same keys and users as /api
    return app
