"""What the two turn routes (``/api/turns`` and ``/v1/chat/completions``) share on top of the
engine's one door into a turn (:mod:`novaberg.engine.service`): a turn that was refused or
failed as an HTTP problem, and the watch on a client that goes away.

A client that goes away before its answer reached it (Stop in a front-end, a closed tab) is
noticed by the ASGI server's ``http.disconnect`` (:func:`watch`): the turn is aborted and
stored so (``AdmittedTurn.leave``). After the answer, a client that leaves stops nothing.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from collections.abc import AsyncIterator

from fastapi import Request

from novaberg.engine.service import AdmittedTurn, Failed, Started, TurnAsk, TurnEvent, TurnService
from novaberg.engine.voice import VoiceService
from novaberg.errors import (
    BackendError,
    ConversationBusy,
    ModelOutputError,
    QueueFull,
    TurnRefused,
    UsageError,
)
from novaberg.server.errors import ApiProblem

log = logging.getLogger("novaberg.server")


def service_of(request: Request) -> TurnService:
    service: TurnService = request.app.state.service
    return service


def refused(exc: TurnRefused) -> ApiProblem:
    """409 for a conversation whose turn runs, 503 with ``Retry-After`` for a full queue."""
    if isinstance(exc, ConversationBusy):
        return ApiProblem(409, str(exc), code="conversation_busy")
    if isinstance(exc, QueueFull):
        return ApiProblem(
            503,
            f"{exc.waiting} model calls are waiting (server.max_queue is {exc.limit}); "
            "try again after the seconds in Retry-After.",
            code="queue_full",
            headers={"Retry-After": str(exc.retry_after_s)},
        )
    return ApiProblem(503, str(exc), code="refused")


def admit(request: Request, ask: TurnAsk) -> AdmittedTurn:
    """Admit ``ask``'s turn, or the HTTP problem that says why not (400, 409, 503). A message
    that was spoken (its words are a transcription of this user's) says so in the trace."""
    voice: VoiceService | None = getattr(request.app.state, "voice", None)  # made on first use
    spoken = None if voice is None else voice.notice_for(ask.user, ask.message)
    if spoken is not None:
        ask = dataclasses.replace(ask, notices=(*ask.notices, spoken))
    try:
        return service_of(request).admit(ask)
    except UsageError as exc:
        raise ApiProblem(400, str(exc), code="invalid_message") from None
    except TurnRefused as exc:
        raise refused(exc) from None


def failure(exc: BaseException) -> ApiProblem:
    """A turn that failed, as the problem its response reports (the details are stored with
    the turn and in the server log)."""
    if isinstance(exc, UsageError):
        return ApiProblem(400, str(exc), code="invalid_message")
    if isinstance(exc, BackendError | ModelOutputError):
        return ApiProblem(502, "The model backend gave no usable answer.", code="backend_error")
    return ApiProblem(500, "The turn failed; the server log names the error.", code="turn_failed")


async def _disconnected(request: Request) -> None:
    """Return when the client has gone away (the body was read whole before: every later
    message is the disconnect, sent when the client closes or the response completed)."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


def watch(request: Request, turn: AdmittedTurn) -> asyncio.Task[None]:
    """Leave ``turn`` when the client goes away (aborted unless its answer was delivered);
    cancel the returned task when the response is over."""

    async def watching() -> None:
        await _disconnected(request)
        turn.leave()

    return asyncio.create_task(watching())


async def started(
    turn: AdmittedTurn, watcher: asyncio.Task[None]
) -> tuple[Started, AsyncIterator[TurnEvent]]:
    """A streamed response's first event, and the rest to read: the turn is recorded, or the
    HTTP problem of a turn that failed before it was (then the watch ends too)."""
    events = turn.events()
    try:
        first = await anext(events)
    except BaseException:
        watcher.cancel()
        raise
    if isinstance(first, Started):
        return first, events
    watcher.cancel()
    if isinstance(first, Failed) and not isinstance(first.error, asyncio.CancelledError):
        raise failure(first.error) from first.error
    raise ApiProblem(500, "The turn ended before it started.", code="turn_failed")
