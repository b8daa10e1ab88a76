"""A recording reverse proxy between a front-end and ``novaberg serve``: every request the
front-end sends and what Nova answered (status, headers, body), as the recordings in
../shared/data were made. It streams as it receives, and when the front-end goes away (Open
WebUI's Stop) it closes its own connection to Nova at once, so Nova sees what it would see
without the proxy."""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from novaberg.testing.serve import ThreadedServer

HOP_BY_HOP = {
    "host",
    "connection",
    "keep-alive",
    "transfer-encoding",
    "content-length",
    "accept-encoding",
    "upgrade",
    "te",
    "trailer",
    "proxy-authorization",
    "proxy-connection",
}
CHAT_ID_HEADER = "x-openwebui-chat-id"
CONVERSATION_HEADER = "x-novaberg-conversation-id"
TURN_HEADER = "x-novaberg-turn-id"


def task_kind(text: str) -> str | None:
    """The kind of an Open WebUI background task by its prompt (what 0.12.4 sends: a user
    message beginning ``### Task:``), None for anything else."""
    if not text.lstrip().startswith("### Task:"):
        return None
    lowered = text.lower()
    if "concise" in lowered and "title" in lowered:
        return "title"
    if "tags" in lowered:
        return "tags"
    if "follow-up" in lowered or "follow_ups" in lowered or "might naturally send next" in lowered:
        return "follow_ups"
    if "queries" in lowered:
        return "queries"
    if "autocompletion" in lowered:
        return "autocomplete"
    return "task"


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


@dataclass
class Exchange:
    """One request the front-end sent and Nova's answer, as far as it went."""

    n: int
    method: str
    path: str
    headers: dict[str, str]
    body: Any
    started: float
    status: int | None = None
    response_headers: dict[str, str] = field(default_factory=dict)
    chunks: list[bytes] = field(default_factory=list)
    ended: float | None = None
    client_gone: bool = False
    """The front-end closed the connection before Nova's answer ended (Stop, a closed tab)."""
    error: str = ""

    @property
    def done(self) -> bool:
        return self.ended is not None

    @property
    def chat_id(self) -> str | None:
        return self.headers.get(CHAT_ID_HEADER)

    @property
    def messages(self) -> list[dict[str, Any]]:
        if isinstance(self.body, dict) and isinstance(self.body.get("messages"), list):
            return list(self.body["messages"])
        return []

    @property
    def last_user_text(self) -> str:
        users = [m for m in self.messages if isinstance(m, dict) and m.get("role") == "user"]
        return _text(users[-1].get("content")) if users else ""

    @property
    def is_chat(self) -> bool:
        return self.method == "POST" and self.path.endswith("/chat/completions")

    @property
    def task(self) -> str | None:
        """The background task's kind, None for a request that is the user speaking."""
        return task_kind(self.last_user_text) if self.is_chat else None

    @property
    def conversation(self) -> int | None:
        value = self.response_headers.get(CONVERSATION_HEADER)
        return int(value) if value and value.isdigit() else None

    @property
    def turn(self) -> int | None:
        value = self.response_headers.get(TURN_HEADER)
        return int(value) if value and value.isdigit() else None

    @property
    def text(self) -> str:
        return b"".join(self.chunks).decode("utf-8", errors="replace")

    @property
    def reply(self) -> str:
        """The answer's content as the front-end received it (stream or whole)."""
        text = self.text
        if self.response_headers.get("content-type", "").startswith("text/event-stream"):
            parts = []
            for line in text.splitlines():
                if not line.startswith("data: {"):
                    continue
                event = json.loads(line.removeprefix("data: "))
                for choice in event.get("choices") or []:
                    parts.append((choice.get("delta") or {}).get("content") or "")
            return "".join(parts)
        try:
            body = json.loads(text)
        except ValueError:
            return text
        if isinstance(body, dict) and body.get("choices"):
            return str(body["choices"][0].get("message", {}).get("content") or "")
        return text

    def summary(self) -> str:
        """One line for a failure message: what was asked and what Nova answered."""
        what = f"task {self.task}" if self.task else repr(self.last_user_text[:60])
        if self.messages:
            tools = len(self.body.get("tools") or []) if isinstance(self.body, dict) else 0
            what += f" ({len(self.messages)} messages, {tools} tools)"
        gone = " (front-end went away)" if self.client_gone else ""
        answer = self.reply if self.status == 200 else self.text
        return (
            f"#{self.n} {self.method} {self.path} {what} chat={self.chat_id} "
            f"-> {self.status}{gone} conversation={self.conversation} turn={self.turn} "
            f"answer={answer[:160]!r}{' error=' + self.error if self.error else ''}"
        )


class RecordingProxy:
    """The proxy on a free loopback port, forwarding to ``upstream`` (set before first use)."""

    def __init__(self, upstream: str = "") -> None:
        self.upstream = upstream
        self.exchanges: list[Exchange] = []
        self._lock = threading.Lock()
        self._server = ThreadedServer(self)

    @property
    def url(self) -> str:
        return self._server.url

    def __enter__(self) -> RecordingProxy:
        self._server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.stop()

    def snapshot(self) -> list[Exchange]:
        with self._lock:
            return list(self.exchanges)

    def since(self, mark: int) -> list[Exchange]:
        """The exchanges numbered ``mark`` and later (``mark``: a ``len(snapshot())``)."""
        return [x for x in self.snapshot() if x.n >= mark]

    def mark(self) -> int:
        with self._lock:
            return len(self.exchanges)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """The ASGI app (uvicorn takes an object with an async ``__call__`` for ASGI 3)."""
        if scope["type"] != "http":
            return
        body = b""
        while True:
            message = await receive()
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        try:
            parsed: Any = json.loads(body) if body else None
        except ValueError:
            parsed = body.decode("utf-8", errors="replace")
        with self._lock:
            exchange = Exchange(
                len(self.exchanges), scope["method"], scope["path"], headers, parsed,
                time.monotonic(),
            )  # fmt: skip
            self.exchanges.append(exchange)
        query = scope.get("query_string", b"").decode("latin-1")
        url = self.upstream + scope["path"] + (f"?{query}" if query else "")
        forwarded = {k: v for k, v in headers.items() if k not in HOP_BY_HOP}
        relay = asyncio.create_task(self._relay(exchange, url, forwarded, body, send))
        gone = asyncio.create_task(_disconnected(receive))
        try:
            await asyncio.wait({relay, gone}, return_when=asyncio.FIRST_COMPLETED)
            if not relay.done():
                exchange.client_gone = True
                relay.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await relay
        except Exception as exc:  # recorded, and answered as a 502
            exchange.error = f"{type(exc).__name__}: {exc}"
            if exchange.status is None:
                exchange.status = 502
                with contextlib.suppress(Exception):
                    await send({"type": "http.response.start", "status": 502, "headers": []})
                    await send({"type": "http.response.body", "body": exchange.error.encode()})
        finally:
            gone.cancel()
            exchange.ended = time.monotonic()

    async def _relay(
        self, exchange: Exchange, url: str, headers: dict[str, str], body: bytes, send: Any
    ) -> None:
        async with httpx.AsyncClient(timeout=httpx.Timeout(None)) as client:
            request = client.build_request(exchange.method, url, headers=headers, content=body)
            response = await client.send(request, stream=True)
            try:
                await self._answer(exchange, response, send)
            finally:
                await response.aclose()

    @staticmethod
    async def _answer(exchange: Exchange, response: httpx.Response, send: Any) -> None:
        exchange.response_headers = {k.lower(): v for k, v in response.headers.items()}
        exchange.status = response.status_code
        out = [
            (k.encode("latin-1"), v.encode("latin-1"))
            for k, v in response.headers.items()
            if k.lower() not in HOP_BY_HOP
        ]
        await send({"type": "http.response.start", "status": response.status_code, "headers": out})
        async for chunk in response.aiter_raw():
            exchange.chunks.append(chunk)
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Any) -> None:
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
