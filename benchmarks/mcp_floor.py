"""The floor under ``/mcp`` (issue 25): the `mcp` SDK's own Streamable HTTP server on uvicorn,
with no Novaberg code, answering ``recall`` with a result recorded from Nova's ``/mcp``.

``python -m benchmarks.mcp_floor PORT RESULT.json`` serves one tool, ``recall(query, k)``,
on the SDK's ``MCPServer`` exactly as :mod:`novaberg.mcp.http` configures it (stateless, one
JSON body per answer, the SDK's Host check off) and returns the recorded ``CallToolResult``
(structured content and its JSON text) without any work. Timed by hand like ``/mcp``
(:func:`benchmarks.mcp_speed.raw_http`), its round trip is what the SDK, uvicorn and the
client cost a call by themselves: ``/mcp``'s time less this is Novaberg's door and search.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from mcp_types import CallToolResult, TextContent


def serve(port: int, result_file: Path) -> None:
    import uvicorn
    from mcp.server.mcpserver import MCPServer
    from mcp.server.transport_security import TransportSecuritySettings

    recorded: dict[str, Any] = json.loads(result_file.read_text(encoding="utf-8"))
    answer = CallToolResult(
        content=[TextContent(type="text", text=json.dumps(recorded, separators=(",", ":")))],
        structured_content=recorded,
    )
    # as novaberg.mcp.server does: a handler on the root logger first, so that MCPServer adds
    # none of its own and logs nothing at INFO (a line per request would cost the floor time)
    logging.getLogger().addHandler(logging.NullHandler())
    server = MCPServer("floor")

    @server.tool()
    async def recall(query: str, k: int = 5) -> CallToolResult:
        """The recorded answer, whatever was asked."""
        return answer

    app = server.streamable_http_app(
        streamable_http_path="/mcp",
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="error")


@contextlib.contextmanager
def floor_server(result: dict[str, Any], folder: Path) -> Iterator[str]:
    """This module's server in its own process, answering with ``result``; its URL."""
    path = folder / "floor-result.json"
    path.write_text(json.dumps(result), encoding="utf-8")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.mcp_floor", str(port), str(path)],
        cwd=Path(__file__).resolve().parents[1],  # where ``benchmarks`` is a package
        stdout=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:  # listening (a GET of /mcp would open an event stream and wait)
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise RuntimeError("the floor's MCP server did not start") from None
                time.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


if __name__ == "__main__":
    serve(int(sys.argv[1]), Path(sys.argv[2]))
