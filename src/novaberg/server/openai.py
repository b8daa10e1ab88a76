"""The OpenAI-compatible endpoint: ``GET /v1/models`` and ``POST /v1/chat/completions``.

A request that is not the user speaking — a front-end's own task (a chat title, tags,
follow-up suggestions), a generation mode (Continue, Impersonate, Summarize), a request with
no user message, or one for the model ``nova-tasks`` — is answered by one plain model call and
is no turn (:mod:`novaberg.engine.tasks`): it chooses and holds no conversation.

The turn's message is the request's last user message. The history a client resends chooses
the conversation and tells a regenerate (:mod:`novaberg.engine.conversations`), and it is the
responder's recent history for the turn (what the front-end shows its user); it is never
stored (Nova keeps her own). Only a request that names Nova's conversation
(``X-Novaberg-Conversation-Id``) and resends nothing gets Nova's stored history. The turn is
admitted through :mod:`novaberg.engine.service`: one runs per conversation at a time (a
second request gets 409), a full model queue answers 503.

What streams: while the turn runs, the node that runs (as ``reasoning_content``, when
``server.stream_progress``); as soon as the tribunal passed it, the answer as ``content``
chunks (the responder's draft never streams: the tribunal may send it back; salience and the
memory write run after); then any self-triggered follow-up of the turn ready within
``server.followup_wait_s``, set apart by a rule (``---``). A follow-up not ready by then
keeps running; it comes at the start of the conversation's next response, set apart the same
way (and always on ``GET /api/events``): each is delivered by one response only
(:mod:`novaberg.storage.deliveries`). A client that goes away before the answer reached it (Stop)
aborts the turn: stored as aborted, its message and no reply kept; after the answer, the
turn finishes and is stored.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, ConfigDict, Field

from novaberg.config import Settings
from novaberg.engine import Engine, TurnResult
from novaberg.engine.attached import split_sources
from novaberg.engine.conversation_service import Conversations
from novaberg.engine.conversations import Said, shown_history
from novaberg.engine.service import (
    AdmittedTurn,
    Answer,
    Failed,
    Followup,
    Progress,
    Shown,
    Stored,
    TurnAsk,
    TurnService,
)
from novaberg.engine.tasks import TASKS_MODEL_ID, FrontendTask, recognise, run_task
from novaberg.errors import NovabergError, TurnRefused, UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.conversations import CONVERSATION_HEADER, TURN_HEADER, choose_conversation
from novaberg.server.errors import ApiProblem, openai_error, openai_errors
from novaberg.server.turns import admit, failure, refused, service_of, started, watch
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
    tools: list[Any] | None = None
    """Read only to say that they are not used (Nova's thinker has her own)."""
    logit_bias: dict[str, Any] | None = None
    """Ignored, as sampling is; its presence tells SillyTavern's Test Message (a task)."""


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


def _raw_text(message: ChatMessage) -> str:
    if isinstance(message.content, list):
        return "\n".join(p.text or "" for p in message.content if p.type == "text")
    return message.content or ""


def _split(message: ChatMessage) -> tuple[str, str]:
    """(words, sources) of a message (:func:`split_sources`); a user message of sources and
    no words (a file sent alone) is left as it came: no words of the user's, no turn."""
    raw = _raw_text(message)
    words, sources = split_sources(raw)
    return (raw, "") if message.role == "user" and not words else (words, sources)


def text_of(message: ChatMessage) -> str:
    """A message's words as its author wrote them: without Open WebUI's list of attached
    files, and without its RAG template and sources around them (:func:`attached_to`)."""
    return without_attachment_list(_split(message)[0])


def attached_to(messages: list[ChatMessage]) -> str:
    """The sources a front-end attached to the last user message (in it, or in a system
    message of their own: :mod:`novaberg.engine.attached`), ``""`` when none."""
    last = _last_user_index(messages)
    sent = [m for i, m in enumerate(messages) if i == last or m.role in ("system", "developer")]
    return "\n\n".join(s for s in (_split(m)[1] for m in sent) if s)


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


UNREAD_SENTENCE = {
    "en": "(I can only read the words of a message so far: I could not see what you attached.)",
    "de": "(Ich kann bisher nur die Worte einer Nachricht lesen: Was du angehängt hast, sehe "
    "ich nicht.)",
}
"""Said once per conversation after the answer to a message with images, audio or files
beside its words."""


def unread_parts(message: ChatMessage) -> list[str]:
    """The kinds of the message's parts that are not text (images, audio, files)."""
    if not isinstance(message.content, list):
        return []
    return sorted({p.type for p in message.content if p.type != "text"})


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
    service: TurnService, result: TurnResult, earlier: list[Followup] | None = None
) -> dict[str, int]:
    """Tokens of every call this response needed: the turn's, and its follow-ups' turns'
    (``earlier``: those of earlier turns it delivers first)."""
    prompt = sum(c.prompt_eval_count for c in result.trace.calls)
    completion = sum(c.eval_count for c in result.trace.calls)
    later = [f.turn_id for f in result.followups]
    stored = [*(f.turn_id for f in earlier or []), *later]
    if stored:
        more_prompt, more_completion = await service.tokens_of(stored)
        prompt += more_prompt
        completion += more_completion
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
            *(f.reply for f in result.followups),
        ]
    )


class ModelCard(BaseModel):
    """A model as OpenAI's ``GET /v1/models`` lists one."""

    id: str
    object: Literal["model"] = "model"
    created: int = 0
    owned_by: str = "novaberg"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


@router.get("/models")
async def models(user: Annotated[str, Depends(require_user)]) -> ModelList:
    """``nova`` (each request is a turn), and ``nova-tasks`` for a front-end's own tasks (a
    title, tags: one plain call each, never a turn; :mod:`novaberg.engine.tasks`)."""
    return ModelList(data=[ModelCard(id=model) for model in (MODEL_ID, TASKS_MODEL_ID)])


CHAT_ROLES = ("system", "user", "assistant")


async def _task(
    request: Request, body: ChatRequest, user: str, task: FrontendTask
) -> JSONResponse | StreamingResponse:
    """A front-end's task: one plain call, answered in the shape asked for; no turn."""
    engine = engine_of(request)
    try:
        service_of(request).refuse_when_queue_full()
    except TurnRefused as exc:
        raise refused(exc) from None
    try:
        done = await run_task(engine, user, task)
    except NovabergError as exc:
        raise failure(exc) from exc
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
) -> JSONResponse | StreamingResponse | Response:
    if body.model not in (MODEL_ID, TASKS_MODEL_ID):
        raise ApiProblem(
            404,
            f"The model {quoted(body.model)} does not exist; use {MODEL_ID!r} "
            f"({TASKS_MODEL_ID!r} for a front-end's own tasks).",
            code="model_not_found",
        )
    engine = engine_of(request)
    said = [(m.role, text_of(m)) for m in body.messages if m.role in CHAT_ROLES]
    sent_bias = "logit_bias" in body.model_fields_set
    task = recognise(said, body.model, stream=body.stream, logit_bias=sent_bias)
    if task is not None:  # not the user speaking: no turn, no conversation, no memory
        return await _task(request, body, user, task)
    last = body.messages[_last_user_index(body.messages)]
    refuse_what_nova_cannot_read(last, text_of(last))
    try:
        message = validate_message(last_user_text(body.messages), engine.settings)
    except UsageError as exc:
        raise ApiProblem(400, str(exc), code="invalid_message") from exc
    history = resent_history(body.messages)
    attached = attached_to(body.messages)
    choice = await choose_conversation(request, engine, user, history, message)
    unread = unread_parts(last)
    aside = await _aside(engine, choice.conversation, unread)
    ask = TurnAsk(
        user,
        message,
        choice.conversation,
        regenerate=choice.regenerate,
        shown=_shown(request, body, history, engine.settings, attached),
        notices=(
            *choice.notices(len(history)),
            *_notices(body, unread, engine.settings.server.frontend_system_prompt),
            *_attached_notice(attached),
        ),
        aside=aside,
    )
    turn = admit(request, ask)
    watcher = watch(request, turn)
    if body.stream:
        return await _stream(engine, request, body, turn, watcher)
    try:
        result = await _stored(turn)
    finally:
        watcher.cancel()
    if result is None:  # the client went away before the answer: the turn was aborted
        return Response(status_code=499)
    service = service_of(request)
    wait_s = engine.settings.server.followup_wait_s
    result.followups = await turn.followups(engine, wait_s, "openai")
    earlier = await service.waiting_followups(
        turn.conversation, "openai", before_turn=result.turn_id
    )
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
        "usage": await usage_of(service, result, earlier),
    }
    return JSONResponse(completion, headers=_ids(turn.conversation, result.turn_id))


async def _stored(turn: AdmittedTurn) -> TurnResult | None:
    """The stored turn; ``None`` when it was aborted because its client left; raises the
    problem its failure is (a server that stops: the cancellation)."""
    async for event in turn.events():
        if isinstance(event, Stored):
            return event.result
        if isinstance(event, Failed):
            if isinstance(event.error, asyncio.CancelledError):
                if turn.left:
                    return None
                raise event.error
            raise failure(event.error) from event.error
    raise ApiProblem(500, "The turn ended without a result.", code="turn_failed")


def _shown(
    request: Request, body: ChatRequest, history: list[Said], settings: Settings, attached: str
) -> Shown | None:
    """What the front-end shows: its resent chat as the responder's history (``None``, Nova's
    stored history, for a request that names Nova's conversation and resends nothing), its
    system messages when they are handed on as situation, and the sources it attached."""
    stored = not history and request.headers.get(CONVERSATION_HEADER) is not None
    system = None
    if settings.server.frontend_system_prompt == "situation":
        texts = [text_of(m) for m in body.messages if m.role in ("system", "developer")]
        system = "\n\n".join(t.strip() for t in texts if not is_blank(t)) or None
    if stored and system is None and not attached:
        return None
    shown = None if stored else shown_history(history, settings.max_message_chars)
    return Shown(shown, system, attached)


def _attached_notice(attached: str) -> list[str]:
    if not attached:
        return []
    return [
        f"the front-end attached sources to the message ({len(attached)} characters): "
        "given to the responder as what the app attached, not as the user's words"
    ]


def _notices(body: ChatRequest, unread: list[str], system_prompt: str) -> list[str]:
    """What the request brought that Nova does not use, said in the turn's trace (counts and
    kinds only: never the text)."""
    notices = []
    if unread:
        notices.append(
            f"the message's {', '.join(unread)} part(s) were not read: Nova reads text only"
        )
    systems = [m for m in body.messages if m.role in ("system", "developer")]
    if systems:
        chars = sum(len(text_of(m)) for m in systems)
        use = (
            "handed to the responder as the setting"
            if system_prompt == "situation"
            else "not used (server.frontend_system_prompt is ignore)"
        )
        notices.append(f"the front-end's system prompt ({chars} characters): {use}")
    if body.tools:
        notices.append(
            f"the request's {len(body.tools)} tool definition(s) were not used: Nova's "
            "thinker has her own tools"
        )
    return notices


async def _aside(engine: Engine, conversation: int, unread: list[str]) -> str:
    """Once per conversation, a sentence after the answer that says what Nova did not read."""
    if not unread:
        return ""
    sentence = UNREAD_SENTENCE.get(engine.settings.language, UNREAD_SENTENCE["en"])
    told = await Conversations(engine).said_before(conversation, sentence)
    return "" if told else sentence


def _ids(conversation: int, turn_id: int) -> dict[str, str]:
    return {CONVERSATION_HEADER: str(conversation), TURN_HEADER: str(turn_id)}


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
    turn: AdmittedTurn,
    watcher: asyncio.Task[None],
) -> StreamingResponse | JSONResponse:
    """The turn as chunks: the node that runs (``reasoning_content``), the answer as soon as
    the tribunal passed it, the follow-ups ready in time; a client gone before the answer
    aborts the turn (:mod:`novaberg.server.turns`)."""
    first, events = await started(turn, watcher)
    turn_id = first.turn_id
    conversation = turn.conversation
    service = service_of(request)
    progress = engine.settings.server.stream_progress
    wait_s = engine.settings.server.followup_wait_s
    completion_id = f"chatcmpl-nova-{turn_id}"
    created = int(time.time())
    size = engine.settings.server.stream_chunk_chars
    include_usage = body.stream_options is not None and body.stream_options.include_usage

    def chunk(delta: dict[str, Any], finish: str | None = None) -> str:
        return _chunk(completion_id, created, delta, finish)

    async def sse() -> AsyncIterator[str]:
        try:
            yield chunk({"role": "assistant", "content": ""})
            earlier = await service.waiting_followups(conversation, "openai", before_turn=turn_id)
            for waiting in earlier:  # follow-ups that were not ready for the earlier responses
                for piece in _pieces(waiting.text, size):
                    yield chunk({"content": piece})
                yield chunk({"content": FOLLOWUP_SEPARATOR})
            result = None
            async for event in events:
                if isinstance(event, Progress) and progress:
                    yield chunk({"reasoning_content": f"{event.node}\n"})
                elif isinstance(event, Answer):
                    for piece in _pieces(event.text, size):
                        yield chunk({"content": piece})
                    turn.delivered()
                elif isinstance(event, Failed):
                    if isinstance(event.error, asyncio.CancelledError):
                        return  # the client left, or the server stops: marked aborted
                    problem = failure(event.error)
                    error = openai_error(problem.status_code, str(problem.detail), problem.code)
                    yield f"data: {json.dumps(error)}\n\n"
                    return
                elif isinstance(event, Stored):
                    result = event.result
            if result is None:
                return
            result.followups = await turn.followups(engine, wait_s, "openai")
            for followup in result.followups:
                yield chunk({"content": FOLLOWUP_SEPARATOR})
                for piece in _pieces(followup.reply, size):
                    yield chunk({"content": piece})
            yield chunk({}, "stop")
            if include_usage:
                usage = await usage_of(service, result, earlier)
                yield _usage_chunk(completion_id, created, MODEL_ID, usage)
            yield "data: [DONE]\n\n"
        finally:
            watcher.cancel()
            turn.leave()  # a response cut off before the answer: the turn is aborted

    return StreamingResponse(
        sse(),
        media_type="text/event-stream",
        headers={**_ids(conversation, turn_id), "Cache-Control": "no-store"},
    )
