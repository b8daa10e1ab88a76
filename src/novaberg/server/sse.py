"""Server-sent events framing for the native API's streams (``POST /api/turns?stream=true``,
``GET /api/events``): ``id:`` (optional), ``event:`` and one ``data:`` line of JSON, a blank line
after each event, and comment lines as keep-alives.

JSON never holds a raw line break (``json.dumps`` escapes ``\\n`` and ``\\r``), so one
``data:`` line carries any text.
"""

from __future__ import annotations

import json
import signal
from typing import Any

MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
"""No caching, and no buffering by a proxy in front (nginx reads ``X-Accel-Buffering``)."""


def event(name: str, data: Any, event_id: int | None = None) -> str:
    """One event: ``name`` with ``data`` as JSON, and its ``id`` when given."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    return f"{head}event: {name}\ndata: {json.dumps(data, ensure_ascii=False)}\n\n"


def comment(text: str) -> str:
    """A comment line (clients ignore it; it keeps proxies and idle timers from closing)."""
    return f": {text}\n\n"


def server_stopping() -> bool:
    """Whether uvicorn was told to stop (SIGTERM/SIGINT): an endless stream must end then, or
    the server would wait for it. uvicorn installs its ``Server.handle_exit`` as the signal
    handler; its ``should_exit`` says it. Another handler (no uvicorn): never stopping."""
    handler = signal.getsignal(signal.SIGTERM)
    server = getattr(handler, "__self__", None)
    return bool(getattr(server, "should_exit", False))
