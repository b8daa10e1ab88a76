"""A misbehaving MCP server for the thinker's MCP tool tests (run as a script):

- ``hang`` and ``big``: list the tools ``wait`` (never answers), ``dump`` (answers 5 MB of
  text) and ``crash`` (the process exits in the call);
- ``exit``: exits with status 3 before it says anything;
- ``silent``: never answers ``initialize``.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time

MODE = sys.argv[1]


def main() -> None:
    if MODE == "exit":
        sys.exit(3)
    if MODE == "silent":
        time.sleep(600)
        return
    from mcp.server.mcpserver import MCPServer

    server: MCPServer = MCPServer("fake", log_level="WARNING")

    @server.tool()
    async def wait(seconds: float = 600) -> str:
        """Waits (and waits)."""
        await asyncio.sleep(seconds)
        return "done"

    @server.tool()
    def dump() -> str:
        """Answers 5 MB."""
        return "x" * 5_000_000

    @server.tool()
    def crash() -> str:
        """Exits in the middle of the call."""
        os._exit(1)

    server.run("stdio")


if __name__ == "__main__":
    main()
