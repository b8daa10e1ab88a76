"""How ``novaberg serve`` listens: the socket, uvicorn's configuration and its HTTP protocol.

One place for what every server process shares (``novaberg serve`` and
``python -m benchmarks.server``):

- **The socket** is a TCP socket (``IPPROTO_TCP``), bound before the engine opens, so
  ``--port 0`` picks a free port that can be printed first.
- **``TCP_NODELAY`` on every accepted connection** (:class:`Protocol`): asyncio sets it only
  when the listening socket was made with ``IPPROTO_TCP``; without it, each event streamed on
  a reused connection waited about 40 ms for Nagle's algorithm and the peer's delayed ACK.
- **Timeouts**: a request's line and headers must arrive within ``server.header_timeout_s``
  of the connection opening (or of its first byte on a kept-alive connection), its body
  within ``server.body_timeout_s`` after the headers; otherwise the connection is closed.
  uvicorn has no such timeouts of its own (only the keep-alive one), so a client that opens
  connections and sends nothing would hold them for ever. ``server.max_connections`` is
  uvicorn's ``limit_concurrency``: past it, new requests are answered 503 at once.
- **The access log** (``--verbose``) names method, path and status: query strings are cut
  off (``?query=`` holds search words, which must not outlive a forget in a log).
"""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from typing import Any

import h11
import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from novaberg.config import Settings
from novaberg.errors import UsageError

log = logging.getLogger("novaberg.server")
ACCESS_LOGGER = "uvicorn.access"


def bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host``:``port`` (not yet listening), or a usage error."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(
            f"Cannot listen on {host}:{port} ({exc.strerror}); choose another --port or --host."
        ) from exc
    return sock


class Protocol(H11Protocol):
    """uvicorn's h11 protocol with ``TCP_NODELAY`` and the header and body timeouts.

    The phase of the request being read is h11's ``their_state``: ``IDLE`` while the
    request line and headers arrive, ``SEND_BODY`` while the body does; a timer runs for
    the phase and closes the connection when it ends first."""

    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._read_timer: asyncio.TimerHandle | None = None
        self._read_phase: object | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        sock = transport.get_extra_info("socket")
        if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._watch(started=True)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch(started=True)

    def connection_lost(self, exc: Exception | None) -> None:
        self._stop_timer()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch(started=False)  # the next request's timer starts with its first byte

    def _watch(self, *, started: bool) -> None:
        """Keep the timer of the phase the request is in (none once it was read)."""
        state = self.conn.their_state
        if state is h11.IDLE and not started:
            self._stop_timer()
            return
        if state is self._read_phase and self._read_timer is not None:
            return
        self._stop_timer()
        if state is h11.IDLE:
            self._start_timer(state, self.header_timeout_s)
        elif state is h11.SEND_BODY:
            self._start_timer(state, self.body_timeout_s)

    def _start_timer(self, phase: object, seconds: float) -> None:
        self._read_phase = phase
        self._read_timer = self.loop.call_later(seconds, self._read_timed_out)

    def _stop_timer(self) -> None:
        if self._read_timer is not None:
            self._read_timer.cancel()
        self._read_timer = None
        self._read_phase = None

    def _read_timed_out(self) -> None:
        part = "headers" if self._read_phase is h11.IDLE else "body"
        self._read_timer = None
        self._read_phase = None
        if not self.transport.is_closing():
            log.info("closed a connection: the request's %s did not arrive in time", part)
            self.transport.close()


class StripQuery(logging.Filter):
    """Cuts the query string off the path in uvicorn's access log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def protocol_class(settings: Settings) -> type[Protocol]:
    """:class:`Protocol` with the timeouts of ``settings``."""
    return type(
        "Protocol",
        (Protocol,),
        {
            "header_timeout_s": settings.server.header_timeout_s,
            "body_timeout_s": settings.server.body_timeout_s,
        },
    )


def uvicorn_config(app: Any, settings: Settings, *, verbose: bool) -> uvicorn.Config:
    """uvicorn's configuration for ``app``: the protocol above, the connection limit, the
    graceful shutdown of ``server.shutdown_grace_s``, no ``Server`` header, and an access
    log without query strings (shown with ``--verbose``)."""
    config = uvicorn.Config(
        app,
        http=protocol_class(settings),
        log_level="info" if verbose else "warning",
        access_log=True,
        lifespan="on",
        server_header=False,
        limit_concurrency=settings.server.max_connections,
        timeout_graceful_shutdown=math.ceil(settings.server.shutdown_grace_s),
    )
    access = logging.getLogger(ACCESS_LOGGER)
    if not any(isinstance(f, StripQuery) for f in access.filters):
        access.addFilter(StripQuery())
    return config
