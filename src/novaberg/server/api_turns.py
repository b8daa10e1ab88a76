"""The native API's turns and conversations: ``POST /api/turns`` (the object ``novaberg ask
--json`` prints; ``?stream=true``: server-sent events while it runs), ``GET /api/turns/{id}``
(the same object, from the database), ``GET /api/conversations`` and
``GET /api/conversations/{id}/messages``.

The stream's events: ``start`` {turn_id, conversation_id}; ``progress`` {node, turn_id} while
the pipeline runs; ``token`` {text} the answer that passed the tribunal, in pieces (a draft
the tribunal sent back never streams), as soon as the tribunal passed it; ``reply`` {text,
turn_id}; ``followup`` {text, turn_id, parent_turn_id} per self-triggered follow-up ready
within ``server.followup_wait_s``; ``done`` {the ``ask --json`` object} once the turn is
stored; or ``error`` {detail, status} (the non-streamed answer's message and status). A
request refused before its turn starts (bad input, a conversation that is not the user's, a
turn running in it, a full queue) is a plain HTTP error. A client that goes away before the
answer reached it aborts the turn (stored as aborted, nothing but its call records kept);
after the answer, the turn finishes and is stored, and a follow-up that comes later is on
``GET /api/events``.

Everything runs as the key's user; another user's turn or conversation answers 404 exactly as
one that does not exist. Errors in FastAPI's ``{"detail": ...}`` shape.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from novaberg.engine.contract import TurnContract
from novaberg.engine.conversation_service import MAX_ID, Conversations
from novaberg.engine.pages import ConversationPage, ImportedChats, MessagePage
from novaberg.engine.service import (
    AdmittedTurn,
    Answer,
    Failed,
    Progress,
    Stored,
    TurnAsk,
    TurnService,
)
from novaberg.errors import NovabergError, UsageError, error_kind
from novaberg.server import sse
from novaberg.server.auth import engine_of, require_user
from novaberg.server.conversations import CONVERSATION_HEADER, TURN_HEADER
from novaberg.server.errors import ApiProblem, api_errors
from novaberg.server.turns import admit, failure, service_of, started, watch
from novaberg.text import quoted
from novaberg.validation import validate_message

log = logging.getLogger("novaberg.server")
router = APIRouter(prefix="/api", tags=["turns"])
IMPORT_PATH = "/api/conversations/import"
"""Its body has a cap of its own, ``server.max_import_bytes`` (an export is large)."""


class TurnRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    message: str = Field(description="What the user says to Nova.")
    conversation_id: int | None = Field(
        default=None, ge=1, le=MAX_ID, description="One of the user's conversations; new if unset."
    )


def _no_conversation(conversation: int) -> ApiProblem:
    return ApiProblem(404, f"There is no conversation {conversation}.")


@router.post(
    "/turns",
    response_model=None,
    responses={
        200: {"model": TurnContract, "content": {sse.MEDIA_TYPE: {}}},
        **api_errors(
            (400, "An empty or oversized message (as the CLI refuses it)."),
            (404, "The conversation_id is not one of the user's conversations."),
            (409, "The conversation has a turn running."),
            (500, "The turn failed; the server log names the error."),
            502,
            503,
        ),
    },
)
async def post_turn(
    body: TurnRequest,
    request: Request,
    user: Annotated[str, Depends(require_user)],
    stream: Annotated[
        bool, Query(description="Server-sent events while the turn runs (see the README).")
    ] = False,
) -> TurnContract | StreamingResponse:
    """One turn as the key's user; the object ``novaberg ask --json`` prints."""
    engine = engine_of(request)
    try:
        message = validate_message(body.message, engine.settings)
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    conversations = Conversations(engine)
    if body.conversation_id is None:
        conversation = await conversations.start(user)
    elif await conversations.owns(user, body.conversation_id):
        conversation = body.conversation_id
    else:
        raise _no_conversation(body.conversation_id)
    turn = admit(request, TurnAsk(user, message, conversation))  # 409, 503
    watcher = watch(request, turn)
    if stream:
        return await _stream_turn(service_of(request), turn, watcher)
    try:
        async for event in turn.events():
            if isinstance(event, Failed):
                if isinstance(event.error, asyncio.CancelledError):
                    raise event.error  # the client left (nobody reads this), or a stop
                raise failure(event.error) from event.error
            if isinstance(event, Stored):
                result = event.result
    finally:
        watcher.cancel()
    # as `novaberg ask --json`: with every follow-up of the turn, however long it takes
    result.followups = await turn.followups(engine, None, "inline")
    result.events = await service_of(request).events_of(result.turn_id)
    return result.contract()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


def _error_event(exc: BaseException) -> str:
    if not isinstance(exc, NovabergError):
        log.error("a streamed turn failed: %s", error_kind(exc))
    problem = failure(exc)
    return sse.event("error", {"detail": str(problem.detail), "status": problem.status_code})


async def _stream_turn(
    service: TurnService, turn: AdmittedTurn, watcher: asyncio.Task[None]
) -> StreamingResponse:
    """``POST /api/turns?stream=true``: the admitted turn's events as server-sent events."""
    engine = service.engine
    first, events = await started(turn, watcher)
    turn_id = first.turn_id
    conversation = turn.conversation
    wait_s = engine.settings.server.followup_wait_s
    size = engine.settings.server.stream_chunk_chars

    async def stream() -> AsyncIterator[str]:
        try:
            yield sse.event("start", {"turn_id": turn_id, "conversation_id": conversation})
            async for event in events:
                if isinstance(event, Progress):
                    yield sse.event("progress", {"node": event.node, "turn_id": turn_id})
                elif isinstance(event, Answer):
                    for piece in _pieces(event.text, size):
                        yield sse.event("token", {"text": piece})
                    yield sse.event("reply", {"text": event.text, "turn_id": turn_id})
                    turn.delivered()
                elif isinstance(event, Failed):
                    if not isinstance(event.error, asyncio.CancelledError):
                        yield _error_event(event.error)
                    return  # cancelled: the client left, or the server stops (aborted)
                elif isinstance(event, Stored):
                    result = event.result
            result.followups = await turn.followups(engine, wait_s, "api")
            for f in result.followups:
                data = {"text": f.reply, "turn_id": f.turn_id, "parent_turn_id": turn_id}
                yield sse.event("followup", data)
            result.events = await service.events_of(result.turn_id)
            yield sse.event("done", result.contract_json())
        finally:
            watcher.cancel()
            turn.leave()  # a response cut off before the answer: the turn is aborted

    ids = {CONVERSATION_HEADER: str(conversation), TURN_HEADER: str(turn_id)}
    return StreamingResponse(stream(), media_type=sse.MEDIA_TYPE, headers={**sse.HEADERS, **ids})


@router.get(
    "/turns/{turn_id}",
    responses=api_errors(
        (404, "The user has no such turn."),
        (409, "The turn is running, failed or was aborted: it has no stored reply."),
    ),
)
async def get_turn(
    turn_id: int,
    request: Request,
    user: Annotated[str, Depends(require_user)],
) -> TurnContract:
    """A finished turn of the key's user, rebuilt from what was stored (see the README for
    what a stored turn cannot give back exactly)."""
    service = service_of(request)
    row = await service.owned(user, turn_id)
    if row is None:
        raise ApiProblem(404, f"There is no turn {quoted(turn_id)}.")
    if row.status != "done":
        raise ApiProblem(409, f"Turn {turn_id} is {row.status}: it has no stored reply.")
    return await service.contract_of(row)


@router.get("/conversations")
async def conversations(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_ID)] = 0,
) -> ConversationPage:
    """The user's conversations, newest first, with how many turns each has finished."""
    return await Conversations(engine_of(request)).page(user, limit, offset)


@router.post(
    IMPORT_PATH.removeprefix("/api"),
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {}}, "text/plain": {"schema": {}}},
        }
    },
    responses=api_errors(
        (400, "Not an export of a format import-chats reads (the detail says what is wrong); "
              "nothing was imported."),
        (413, "The body is larger than server.max_import_bytes; nothing was imported."),
    ),
)  # fmt: skip
async def import_conversations(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    fmt: Annotated[
        str, Query(alias="format", description="auto, openwebui, sillytavern, chatgpt or plain")
    ] = "auto",
) -> ImportedChats:
    """``novaberg import-chats``: the export file as the body (a SillyTavern ``.jsonl`` as
    text), its chats as the key's user's dated conversations → ``{"conversations",
    "messages", "skipped"}``."""
    from novaberg.engine.chat_formats import parse

    raw = await request.body()
    try:
        parsed = await asyncio.to_thread(parse, raw, fmt, name="the body")
    except UsageError as exc:
        raise ApiProblem(400, str(exc)) from None
    done = await Conversations(engine_of(request)).import_chats(user, parsed)
    return ImportedChats.model_validate(done.view())


@router.get(
    "/conversations/{conversation_id}/messages",
    responses=api_errors((404, "The user has no such conversation.")),
)
async def messages(
    conversation_id: int,
    request: Request,
    user: Annotated[str, Depends(require_user)],
) -> MessagePage:
    """The conversation's stored messages, oldest first (a turn whose words were forgotten
    is left out, as from Nova's own history)."""
    conversations = Conversations(engine_of(request))
    if not await conversations.owns(user, conversation_id):
        raise _no_conversation(conversation_id)
    return await conversations.messages(conversation_id)
