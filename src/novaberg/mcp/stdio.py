"""``novaberg mcp``: Nova's MCP server over stdin and stdout, for one user (``--user`` or
``NOVABERG_USER``, the home as for every command), the way Claude Desktop, Cursor and LM
Studio start a local server.

The protocol answers at once: the engine (its modules, database, backends, graph) loads and
opens beside it, and a tool call waits for it. stdout carries the protocol alone; logs and
notices go to stderr.
The turns of ``talk`` run on this process's own turn service, its memory jobs in this
process's loop; what is still running when the client closes stdin is stored as aborted.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from typing import TYPE_CHECKING

from mcp.server.mcpserver import Context

from novaberg.config import Settings
from novaberg.mcp.calls import Seat
from novaberg.mcp.server import build_server, client_name

if TYPE_CHECKING:
    from novaberg.engine import Engine
    from novaberg.engine.service import TurnService

log = logging.getLogger("novaberg.mcp")
GRACE_S = 5.0
"""How long running turns may finish after the client closed stdin."""


class Opening:
    """The engine, opened once beside the protocol; every tool call awaits it."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self._task: asyncio.Task[tuple[Engine, TurnService]] | None = None

    def start(self) -> None:
        self._task = asyncio.create_task(self._open())

    async def _open(self) -> tuple[Engine, TurnService]:
        # the engine's modules (langgraph, the backends: 0.6 s) load in a thread, so that the
        # protocol answers meanwhile
        await asyncio.to_thread(importlib.import_module, "novaberg.engine.service")
        from novaberg.engine import Engine
        from novaberg.engine.service import TurnService

        engine = await Engine.open(self.settings)
        for notice in engine.notices:
            log.warning("notice: %s", notice)
        return engine, TurnService(engine)

    async def seat(self, ctx: Context) -> Seat:
        assert self._task is not None
        engine, service = await asyncio.shield(self._task)
        return Seat(engine, service, self.settings.user, client_name(ctx))

    async def close(self) -> None:
        if self._task is None:
            return
        if not self._task.done():
            self._task.cancel()
        try:
            engine, service = await self._task
        except BaseException:  # it did not open (or was stopped opening): nothing to close
            return
        await service.finish(GRACE_S)
        await engine.aclose()


async def serve_stdio(settings: Settings) -> None:
    """Answer MCP over stdin/stdout until the client closes stdin."""
    opening = Opening(settings)
    opening.start()
    try:
        await build_server(opening.seat).run_stdio_async()
    finally:
        await opening.close()
