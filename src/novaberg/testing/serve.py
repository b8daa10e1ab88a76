"""Running an ASGI app on a free loopback port in a background thread (for test servers)."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn


class ThreadedServer:
    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self._host = host
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Like Ollama (Go sets TCP_NODELAY): small writes such as the last chunk of a stream go
        # out at once instead of waiting ~40 ms for a delayed ACK. Accepted sockets inherit it.
        self._socket.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._socket.bind((host, port))
        self.port = self._socket.getsockname()[1]
        self._server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self._host}:{self.port}"

    def start(self) -> None:
        self._thread = threading.Thread(
            target=self._server.run,
            kwargs={"sockets": [self._socket]},
            daemon=True,
            name=f"novaberg-test-server-{self.port}",
        )
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the test server on {self.url} did not start")
            time.sleep(0.01)

    def stop(self) -> None:
        self._server.should_exit = True
        self._server.force_exit = True  # do not wait for scripted delays still sleeping
        if self._thread is not None:
            self._thread.join(timeout=10)
        self._socket.close()

    def serve_forever(self) -> None:
        self._server.run(sockets=[self._socket])
