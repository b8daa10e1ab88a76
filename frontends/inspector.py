"""The MCP Inspector (npm ``@modelcontextprotocol/inspector`` 2.12.0) in its CLI mode, a client
of Nova's MCP server that nobody here wrote: installed by ``make frontends`` into
``.frontends/inspector`` (``MCP_INSPECTOR``: its ``mcp-inspector`` program elsewhere)."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VERSION = "2.12.0"
PROGRAM = Path(
    os.environ.get(
        "MCP_INSPECTOR",
        ROOT / ".frontends" / "inspector" / "node_modules" / ".bin" / "mcp-inspector",
    )
)
if not PROGRAM.is_absolute():
    PROGRAM = ROOT / PROGRAM
TIMEOUT_S = 120.0


def inspect(*args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``mcp-inspector --cli ARGS`` and return the JSON it prints."""
    assert PROGRAM.exists(), f"no MCP Inspector at {PROGRAM}: run `make frontends`"
    done = subprocess.run(
        [str(PROGRAM), "--cli", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        env={**os.environ, **(env or {})},
        check=False,
    )
    assert done.returncode == 0, f"mcp-inspector exited {done.returncode}: {done.stderr[-2000:]}"
    printed: dict[str, Any] = json.loads(done.stdout)
    return printed
