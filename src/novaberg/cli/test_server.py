"""``novaberg test-server``: the Ollama-protocol test server in the foreground."""

from __future__ import annotations

from typing import get_args

import typer

from novaberg.cli.common import err_console


def run_test_server(*, host: str, port: int, delay_ms: float, reasoning_style: str) -> None:
    from novaberg.testing.ollama_server import OllamaTestServer
    from novaberg.testing.replies import ReasoningStyle

    styles: tuple[ReasoningStyle, ...] = get_args(ReasoningStyle)
    style = next((s for s in styles if s == reasoning_style), None)
    if style is None:
        err_console.print(f"usage error: --reasoning-style is one of {', '.join(styles)}")
        raise typer.Exit(2)
    server = OllamaTestServer(host=host, port=port, delay_s=delay_ms / 1000, reasoning_style=style)
    err_console.print(
        f"Ollama test server on {server.url} — export OLLAMA_HOST={server.url}; "
        "script it with POST /_novaberg/script, see what it got at GET /_novaberg/requests."
    )
    server.serve_forever()
