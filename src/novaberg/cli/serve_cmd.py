"""``novaberg serve``: Nova over HTTP (FastAPI on uvicorn), one process, one engine.

The socket is bound here, before the engine opens, so ``--port 0`` picks a free port and the
first line on stdout names the address; the server answers once ``GET /healthz`` does.
uvicorn's access log names method, path (without its query string) and status only: never
a header (keys) or a body (messages). Socket, protocol and timeouts: :mod:`novaberg.server.listen`.

SIGTERM (or Ctrl-C): uvicorn stops accepting connections and waits up to
``server.shutdown_grace_s`` for the open ones (a turn answers its request, then the connection
closes); requests still open then are cancelled, and so are turns whose client had left
(:func:`novaberg.server.app.finish_turns`): each is stored as aborted, never half. Memory jobs
and second passes left waiting run in the next process (``novaberg serve`` or ``worker``).
"""

from __future__ import annotations

import socket
import sys
import time

import typer

from novaberg.cli.common import guarded, load, setup_logging


def run_serve(*, host: str, port: int, verbose: bool) -> None:
    setup_logging(verbose)
    import uvicorn

    from novaberg.server.app import create_app
    from novaberg.server.listen import bind, uvicorn_config

    settings = guarded(lambda: load().settings)
    sock = guarded(lambda: bind(host, port))
    bound = sock.getsockname()[1]
    shown = f"[{host}]" if ":" in host else host
    typer.echo(f"novaberg serve: http://{shown}:{bound} (OpenAI-compatible base URL: /v1)")
    sys.stdout.flush()
    app = create_app(settings, listen_host=host)
    config = uvicorn_config(app, settings, verbose=verbose)

    class Server(uvicorn.Server):
        """uvicorn's server, noting when its graceful shutdown began: the grace for turns
        whose client left counts from there (``server.app.finish_turns``)."""

        async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
            app.state.stopping_since = time.monotonic()
            await super().shutdown(sockets)

    server = Server(config)
    try:
        server.run(sockets=[sock])
    finally:
        sock.close()
    if not server.started:
        raise typer.Exit(1)
