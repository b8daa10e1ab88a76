"""The OpenAI-compatible endpoint: ``GET /v1/models`` and ``POST /v1/chat/completions``.

A request that is not the user speaking — a front-end's own task (a chat title, tags,
follow-up suggestions), a generation mode (Continue, Impersonate, Summarize), a request with
no user message, or one for the model ``nova-tasks`` — is answered by one plain model call and
is no turn (:mod:`novaberg.engine.tasks`): it chooses and holds no conversation.

The turn's message is the request's last user message; the history a client resends only
chooses the conversation and tells a regenerate (:mod:`novaberg.server.conversations`), it is
never stored (Nova has her own). One turn runs per conversation at a time (a second request
gets 409); a full model queue answers 503 (:mod:`novaberg.server.limits`).

What streams: while the turn runs, the node that runs (as ``reasoning_content``, when
``server.stream_progress``); after it, the answer that passed the tribunal, as ``content``
chunks (the responder's draft never streams: the tribunal may send it back); then any
self-triggered follow-up of the turn ready within ``server.followup_wait_s``, set apart by a
rule (``---``). A follow-up not ready by then keeps running; it comes at the start of the
conversation's next response, set apart the same way (and always on ``GET /api/events``):
each is delivered by one response only (:mod:`novaberg.deliveries`). A client that
disconnects mid-stream leaves the turn running: it finishes and is stored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from novaberg.context import CallContext
from novaberg.deliveries import Followup
from novaberg.engine import Engine, TurnResult
from novaberg.engine.tasks import TASKS_MODEL_ID, FrontendTask, recognise, run_task
from novaberg.errors import BackendError, ModelOutputError, NovabergError, UsageError
from novaberg.server import followups
from novaberg.server.auth import engine_of, require_user
from novaberg.server.conversations import (
    CONVERSATION_HEADER,
    TURN_HEADER,
    Said,
    choose_conversation,
)
from novaberg.server.errors import ApiProblem, openai_error, openai_errors
from novaberg.server.limits import ConversationBusy, refuse_when_queue_full
from novaberg.text import is_blank, quoted
from novaberg.validation import validate_message

log = logging.getLogger("novaberg.server")
router = APIRouter(prefix="/v1")

MODEL_ID = "nova"
FOLLOWUP_SEPARATOR = "\n\n---\n\n"
"""What sets a self-triggered follow-up apart from the answer before it."""


class TextPart(BaseModel):
    model_config = ConfigDict(extra="ignore")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")
    role: str
    content: str | list[TextPart] | None = None


class StreamOptions(BaseModel):
    model_config = ConfigDict(extra="ignore")
    include_usage: bool = False


class ChatRequest(BaseModel):
    """The fields Nova reads; sampling options and the like are accepted and ignored (the
    pipeline's nodes choose their own)."""

    model_config = ConfigDict(extra="ignore")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    stream: bool = False
    stream_options: StreamOptions | None = None


ATTACHED_FILES = ("<attached_files>", "</attached_files>")
"""Open WebUI's list of the files attached to a message, put into its text: markup, not the
user's words."""


def without_attachment_list(text: str) -> str:
    """``text`` without Open WebUI's ``<attached_files>`` blocks (one pass, no pattern)."""
    opening, closing = ATTACHED_FILES
    kept: list[str] = []
    position = 0
    while (start := text.find(opening, position)) >= 0:
        end = text.find(closing, start)
        if end < 0:
            break
        kept.append(text[position:start])
        position = end + len(closing)
    kept.append(text[position:])
    return "".join(kept).strip() if position else text


def text_of(message: ChatMessage) -> str:
    if isinstance(message.content, list):
        text = "\n".join(p.text or "" for p in message.content if p.type == "text")
    else:
        text = message.content or ""
    return without_attachment_list(text)


def refuse_what_nova_cannot_read(message: ChatMessage, text: str) -> None:
    """A 400 for a message of images, audio or files and no words: it is not empty, Nova
    cannot read it (yet)."""
    if is_blank(text) and isinstance(message.content, list):
        kinds = sorted({p.type for p in message.content if p.type != "text"})
        if kinds:
            raise ApiProblem(
                400,
                "Nova cannot see images, hear audio or read attached files yet, and this "
                f"message has nothing else ({', '.join(kinds)}); write it as text.",
                code="unsupported_content",
            )


def _last_user_index(messages: list[ChatMessage]) -> int:
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "user":
            return index
    raise ApiProblem(400, "The request has no user message.", code="invalid_request")


def last_user_text(messages: list[ChatMessage]) -> str:
    return text_of(messages[_last_user_index(messages)])


def resent_history(messages: list[ChatMessage]) -> list[Said]:
    """The user and assistant messages the client resends before its last user message."""
    before = messages[: _last_user_index(messages)]
    return [(m.role, text_of(m)) for m in before if m.role in ("user", "assistant")]


async def usage_of(
    engine: Engine, result: TurnResult, earlier: list[Followup] | None = None
) -> dict[str, int]:
    """Tokens of every call this response needed: the turn's, and its follow-ups' turns'
    (``earlier``: those of earlier turns it delivers first)."""
    prompt = sum(c.prompt_eval_count for c in result.trace.calls)
    completion = sum(c.eval_count for c in result.trace.calls)
    later = [int(f["turn_id"]) for f in result.followups]
    for turn_id in [*(f.turn_id for f in earlier or []), *later]:
        for call in await engine.db.run(engine.db.calls_of, turn_id):
            prompt += int(call["prompt_eval_count"] or 0)
            completion += int(call["eval_count"] or 0)
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    }


def full_text(result: TurnResult, earlier: list[Followup] | None = None) -> str:
    """Earlier turns' follow-ups not delivered before, the answer, its own follow-ups."""
    return FOLLOWUP_SEPARATOR.join(
        [
            *(f.text for f in earlier or []),
            result.reply,
            *(str(f["reply"]) for f in result.followups),
        ]
    )


def _turn_error(exc: BaseException) -> ApiProblem:
    if isinstance(exc, UsageError):
        return ApiProblem(400, str(exc), code="invalid_message")
    if isinstance(exc, BackendError | ModelOutputError):
        return ApiProblem(502, "The model backend gave no usable answer.", code="backend_error")
    return ApiProblem(500, "The turn failed; the server log names the error.", code="turn_failed")


@router.get("/models")
async def models(user: Annotated[str, Depends(require_user)]) -> dict[str, Any]:
    """``nova`` (each request is a turn), and ``nova-tasks`` for a front-end's own tasks (a
    title, tags: one plain call each, never a turn; :mod:`novaberg.engine.tasks`)."""
    return {
        "object": "list",
        "data": [
            {"id": model, "object": "model", "created": 0, "owned_by": "novaberg"}
            for model in (MODEL_ID, TASKS_MODEL_ID)
        ],
    }


CHAT_ROLES = ("system", "user", "assistant")


async def _task(
    engine: Engine, body: ChatRequest, user: str, task: FrontendTask
) -> JSONResponse | StreamingResponse:
    """A front-end's task: one plain call, answered in the shape asked for; no turn."""
    refuse_when_queue_full(engine.queue, engine.settings.server.max_queue)
    try:
        ctx = CallContext(settings=engine.settings, queue=engine.queue)
        done = await run_task(ctx, engine.db, user, task)
    except NovabergError as exc:
        raise _turn_error(exc) from exc
    completion_id = f"chatcmpl-nova-task-{int(time.time() * 1000)}"
    created = int(time.time())
    usage = {
        "prompt_tokens": sum(c.prompt_eval_count for c in done.calls),
        "completion_tokens": sum(c.eval_count for c in done.calls),
    }
    usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
    if not body.stream:
        message = {"role": "assistant", "content": done.text}
        choice = {"index": 0, "message": message, "finish_reason": "stop", "logprobs": None}
        return JSONResponse(
            {
                "id": completion_id,
                "object": "chat.completion",
                "created": created,
                "model": body.model,
                "choices": [choice],
                "usage": usage,
            }
        )
    size = engine.settings.server.stream_chunk_chars
    include_usage = body.stream_options is not None and body.stream_options.include_usage

    async def sse() -> AsyncIterator[str]:
        yield _chunk(completion_id, created, {"role": "assistant", "content": ""}, None)
        for piece in _pieces(done.text, size):
            yield _chunk(completion_id, created, {"content": piece}, None)
        yield _chunk(completion_id, created, {}, "stop")
        if include_usage:
            yield _usage_chunk(completion_id, created, body.model, usage)
        yield "data: [DONE]\n\n"

    return StreamingResponse(sse(), media_type="text/event-stream")


@router.post(
    "/chat/completions",
    response_model=None,
    responses={
        200: {"content": {"application/json": {}, "text/event-stream": {}}},
        **openai_errors(
            (400, "An empty or oversized message, a malformed conversation header, "
             "malformed JSON or a wrong type (code invalid_request, invalid_message or "
             "invalid_conversation_id)."),
            (404, "An unknown model (model_not_found) or a conversation the user does not "
             "have (conversation_not_found)."),
            (409, "The conversation has a turn running (conversation_busy)."),
            (500, "The turn failed (turn_failed); the server log names the error."),
            (502, "The model backend gave no usable answer (backend_error)."),
            (503, "Too many model calls are waiting (queue_full, server.max_queue); "
             "Retry-After says how many seconds to wait."),
        ),
    },
)  # fmt: skip
async def chat_completions(
    body: ChatRequest, request: Request, user: Annotated[str, Depends(require_user)]
) -> JSONResponse | StreamingResponse:
    if body.model not in (MODEL_ID, TASKS_MODEL_ID):
        raise ApiProblem(
            404,
            f"The model {quoted(body.model)} does not exist; use {MODEL_ID!r} "
            f"({TASKS_MODEL_ID!r} for a front-end's own tasks).",
            code="model_not_found",
        )
    engine = engine_of(request)
    said = [(m.role, text_of(m)) for m in body.messages if m.role in CHAT_ROLES]
    task = recognise(said, body.model)
    if task is not None:  # not the user speaking: no turn, no conversation, no memory
        return await _task(engine, body, user, task)
    last = body.messages[_last_user_index(body.messages)]
    refuse_what_nova_cannot_read(last, text_of(last))
    try:
        message = validate_message(last_user_text(body.messages), engine.settings)
    except UsageError as exc:
        raise ApiProblem(400, str(exc), code="invalid_message") from exc
    choice = await choose_conversation(
        request, engine.db, user, resent_history(body.messages), message
    )
    conversation = choice.conversation
    refuse_when_queue_full(engine.queue, engine.settings.server.max_queue)
    busy: ConversationBusy = request.app.state.busy
    busy.claim(conversation)
    if body.stream:
        return await _stream(engine, request, body, user, message, conversation, choice.regenerate)
    try:
        result = await _turn(engine, request, user, message, conversation, choice.regenerate)
    except NovabergError as exc:
        raise _turn_error(exc) from exc
    finally:
        busy.release(conversation)
    earlier = await followups.waiting_for(engine, conversation, before_turn=result.turn_id)
    completion = {
        "id": f"chatcmpl-nova-{result.turn_id}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": MODEL_ID,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": full_text(result, earlier)},
                "finish_reason": "stop",
                "logprobs": None,
            }
        ],
        "usage": await usage_of(engine, result, earlier),
    }
    return JSONResponse(completion, headers=_ids(conversation, result.turn_id))


def _ids(conversation: int, turn_id: int) -> dict[str, str]:
    return {CONVERSATION_HEADER: str(conversation), TURN_HEADER: str(turn_id)}


async def _turn(
    engine: Engine,
    request: Request,
    user: str,
    message: str,
    conversation: int,
    regenerate: int | None,
    **callbacks: Any,
) -> TurnResult:
    """One turn for ``user`` (``regenerate``: the turn whose reply it asks for again), with
    its follow-ups ready within ``server.followup_wait_s``; its memory jobs start after it
    (in this process's loop)."""
    turn = followups.start(
        engine,
        request.app.state.turns,
        message,
        user,
        conversation,
        regenerate=regenerate,
        **callbacks,
    )
    result = await followups.answer_of(turn)
    ready = await followups.ready_followups(turn, engine.settings.server.followup_wait_s)
    result.followups = await followups.deliver(engine, ready, "openai")
    return result


_Event = tuple[Literal["start", "progress", "end"], Any]


def _chunk(completion_id: str, created: int, delta: dict[str, Any], finish: str | None) -> str:
    chunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": MODEL_ID,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}],
    }
    return f"data: {json.dumps(chunk, ensure_ascii=False)}\n\n"


def _usage_chunk(completion_id: str, created: int, model: str, usage: dict[str, int]) -> str:
    """The last chunk before ``[DONE]`` when ``stream_options.include_usage`` is set."""
    chunk = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": created,
        "model": model,
        "choices": [],
        "usage": usage,
    }
    return f"data: {json.dumps(chunk)}\n\n"


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


async def _stream(
    engine: Engine,
    request: Request,
    body: ChatRequest,
    user: str,
    message: str,
    conversation: int,
    regenerate: int | None,
) -> StreamingResponse | JSONResponse:
    events: asyncio.Queue[_Event] = asyncio.Queue()
    progress = engine.settings.server.stream_progress

    def on_start(turn_id: int) -> None:
        events.put_nowait(("start", turn_id))

    def on_progress(node: str) -> None:
        if progress:
            events.put_nowait(("progress", node))

    # The turn, then its follow-ups, as a task kept in app.state.turns until done: a client
    # that leaves does not stop them.
    turn = followups.start(
        engine,
        request.app.state.turns,
        message,
        user,
        conversation,
        on_start=on_start,
        on_progress=on_progress,
        regenerate=regenerate,
    )
    busy: ConversationBusy = request.app.state.busy
    turn.answer.add_done_callback(lambda _: busy.release(conversation))
    turn.answer.add_done_callback(lambda _: events.put_nowait(("end", None)))

    kind, turn_id = await events.get()
    if kind != "start":  # the turn failed before it was recorded
        failed = None if turn.answer.cancelled() else turn.answer.exception()
        if isinstance(failed, NovabergError):
            raise _turn_error(failed) from failed
        raise ApiProblem(500, "The turn ended before it started.", code="turn_failed")
    wait_s = engine.settings.server.followup_wait_s

    completion_id = f"chatcmpl-nova-{turn_id}"
    created = int(time.time())
    size = engine.settings.server.stream_chunk_chars
    include_usage = body.stream_options is not None and body.stream_options.include_usage

    async def sse() -> AsyncIterator[str]:
        yield _chunk(completion_id, created, {"role": "assistant", "content": ""}, None)
        earlier = await followups.waiting_for(engine, conversation, before_turn=int(turn_id))
        for waiting in earlier:  # follow-ups that were not ready for the earlier responses
            for piece in _pieces(waiting.text, size):
                yield _chunk(completion_id, created, {"content": piece}, None)
            yield _chunk(completion_id, created, {"content": FOLLOWUP_SEPARATOR}, None)
        while True:
            kind, value = await events.get()
            if kind == "end":
                break
            if kind == "progress":
                yield _chunk(completion_id, created, {"reasoning_content": f"{value}\n"}, None)
        if turn.answer.cancelled():
            return  # the server stops; the turn is marked aborted
        failed = turn.answer.exception()
        if failed is not None:
            problem = _turn_error(failed)
            error = openai_error(problem.status_code, str(problem.detail), problem.code)
            yield f"data: {json.dumps(error)}\n\n"
            return
        result = turn.answer.result()
        for piece in _pieces(result.reply, size):
            yield _chunk(completion_id, created, {"content": piece}, None)
        ready = await followups.ready_followups(turn, wait_s)
        result.followups = await followups.deliver(engine, ready, "openai")
        for followup in result.followups:
            yield _chunk(completion_id, created, {"content": FOLLOWUP_SEPARATOR}, None)
            for piece in _pieces(str(followup["reply"]), size):
                yield _chunk(completion_id, created, {"content": piece}, None)
        yield _chunk(completion_id, created, {}, "stop")
        if include_usage:
            usage = await usage_of(engine, result, earlier)
            yield _usage_chunk(completion_id, created, MODEL_ID, usage)
        yield "data: [DONE]\n\n"

    return StreamingResponse(
        sse(),
        media_type="text/event-stream",
        headers={**_ids(conversation, int(turn_id)), "Cache-Control": "no-store"},
    )
