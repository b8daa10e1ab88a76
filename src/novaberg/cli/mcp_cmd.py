"""``novaberg mcp``: Nova's memory and turns as an MCP server over stdin and stdout
(:mod:`novaberg.mcp.stdio`), for one user: ``--user`` or ``NOVABERG_USER``."""

from __future__ import annotations

import asyncio
import contextlib

from novaberg.cli.common import guarded, load, setup_logging


def run_mcp(*, user: str | None, verbose: bool) -> None:
    setup_logging(verbose)  # to stderr: stdout is the protocol's
    from novaberg.mcp.stdio import serve_stdio

    settings = guarded(lambda: load(user).settings)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(serve_stdio(settings))
