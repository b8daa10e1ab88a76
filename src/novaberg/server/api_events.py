"""``GET /api/events``: the key's user's event log (:mod:`novaberg.engine.event_log`) as server-sent
events — self-triggered follow-ups and finished memory jobs.

Each event carries ``id:`` (its log id), ``event:`` (``followup`` or ``job``) and ``data:``
(JSON). A client that reconnects with ``Last-Event-ID`` (or ``?after=ID``) gets every event
after that id, none twice; without either, only events written after it connected. The text
of a follow-up is read when it is sent: a forgotten follow-up is skipped.

Waking: a writer in this process wakes the stream at once
(:meth:`~novaberg.engine.event_log.EventLog.listening`); the log is also read every
``server.events_poll_s``, so events written by another process (a ``novaberg worker``, a
second ``serve`` on one PostgreSQL) arrive too. A comment line every
``KEEPALIVE_S`` keeps idle connections open. The stream ends when the client disconnects
(Starlette cancels it), the server is told to stop, or its key is revoked: each read of the
log first checks that the key is still active (``users revoke`` in another process, or a new
key for the same user), so a revoked key receives nothing more. A user may hold
``server.max_streams`` streams open at once in this process; one more is a 429.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Query, Request
from fastapi.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from novaberg.engine.event_log import EventLog
from novaberg.engine.memories import MAX_ID
from novaberg.server import sse
from novaberg.server.auth import bearer_key, engine_of, require_user
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.server.limits import StreamSlots

router = APIRouter(prefix="/api", tags=["events"])

KEEPALIVE_S = 15.0
STOP_CHECK_S = 0.5
"""How often a quiet stream looks whether the server is stopping."""
BATCH = 100


def _resume_point(last_event_id: str | None, after: int | None) -> int | None:
    if last_event_id is not None:
        text = last_event_id.strip()
        if not text.isascii() or not text.isdigit() or int(text) > MAX_ID:
            raise ApiProblem(400, "Last-Event-ID must be an event id (a non-negative integer).")
        return int(text)
    return after


@router.get(
    "/events",
    response_class=StreamingResponse,
    responses={
        200: {"content": {sse.MEDIA_TYPE: {}}, "description": "Server-sent events."},
        **api_errors(
            (400, "Last-Event-ID is not an event id."),
            (429, "The user has server.max_streams event streams open already."),
        ),
    },
)
async def events(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    after: Annotated[
        int | None, Query(ge=0, le=MAX_ID, description="Resume after this event id.")
    ] = None,
    last_event_id: Annotated[str | None, Header(alias="Last-Event-ID")] = None,
) -> StreamingResponse:
    """The key's user's follow-ups and finished memory jobs, as they happen (SSE)."""
    engine = engine_of(request)
    key = bearer_key(request)
    assert key is not None  # require_user refused the request otherwise
    log = EventLog.of(engine, user, key)
    cursor = _resume_point(last_event_id, after)
    if cursor is None:
        cursor = await log.latest()
    poll_s = engine.settings.server.events_poll_s
    slots: StreamSlots = request.app.state.streams
    slots.take(user)
    return _EventStream(
        _stream(log, cursor, poll_s),
        release=lambda: slots.release(user),
        media_type=sse.MEDIA_TYPE,
        headers=sse.HEADERS,
    )


class _EventStream(StreamingResponse):
    """A stream that gives its user's slot back when it ends, however it ends."""

    def __init__(self, content: AsyncIterator[str], release: Callable[[], None], **kw: Any):
        super().__init__(content, **kw)
        self._release = release

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._release()


async def _stream(log: EventLog, cursor: int, poll_s: float) -> AsyncIterator[str]:
    with log.listening() as woken:
        yield sse.comment("novaberg events")
        quiet_since = time.monotonic()
        while not sse.server_stopping():
            woken.clear()  # before reading: a write after the read sets it again
            batch = await log.after(cursor, BATCH)
            if batch is None:
                return  # revoked: the client's next request is a 401
            for item in batch:
                cursor = item.id
                if item.data is not None:  # None: forgotten since; nothing to send
                    yield sse.event(item.kind, item.data, item.id)
                    quiet_since = time.monotonic()
            if len(batch) == BATCH:
                continue
            next_read = time.monotonic() + poll_s
            while not woken.is_set() and not sse.server_stopping():
                left = next_read - time.monotonic()
                if left <= 0:
                    break
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), min(left, STOP_CHECK_S))
                if time.monotonic() - quiet_since >= KEEPALIVE_S:
                    yield sse.comment("keep-alive")
                    quiet_since = time.monotonic()
