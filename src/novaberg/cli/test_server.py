"""``novaberg test-server``: the Ollama-protocol test server in the foreground."""

from __future__ import annotations

import typer

from novaberg.cli.common import err_console


def run_test_server(*, host: str, port: int, delay_ms: float, reasoning_style: str) -> None:
    from novaberg.testing.ollama_server import OllamaTestServer

    if reasoning_style not in ("reasoning", "reasoning_content", "think_tags"):
        err_console.print("usage error: --reasoning-style is reasoning|reasoning_content|think_tags")
        raise typer.Exit(2)
    server = OllamaTestServer(host=host, port=port, delay_s=delay_ms / 1000,
                              reasoning_style=reasoning_style)  # type: ignore[arg-type]
    err_console.print(
        f"Ollama test server on {server.url} — export OLLAMA_HOST={server.url}; "
        "script it with POST /_novaberg/script, see what it got at GET /_novaberg/requests."
    )
    server.serve_forever()
