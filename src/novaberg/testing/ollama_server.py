"""A real HTTP server that speaks Ollama's protocol (and OpenAI's ``/v1/chat/completions``).

Scriptable per ``X-Novaberg-Caller``: replies queued for a caller are used in order, then the
caller's standing reply, then the server's default (an echo, or a minimal JSON value that
satisfies the request's ``format`` schema). Every request is recorded with its headers and
body. It reproduces the behaviour in ../shared/OLLAMA.md: thinking when ``think`` is omitted
for a thinking model, 400 for ``think``/``tools`` a model lacks, 404 for an unknown model,
calls to tool names missing from ``tools`` swallowed into an empty answer, ``{"error"}``
lines mid-stream, streams cut before their done chunk, and a prompt longer than the runtime
context (``options.num_ctx``, else :attr:`ServerState.context_length`) cut from the head
silently, with ``prompt_eval_count`` saying how much was read.

Each fault can be scripted at an exact rate, for one condition of a caller's requests:
``server.script_mix("probe_tools", [(Reply.dropped_tool_call("lookup_order"), 14), (None, 6)],
match=Match(lacks="lookup_order"))`` answers exactly 14 of the next 20 such requests with the
fault (in a shuffled order) and the other 6 as the server would (:class:`Match`,
:func:`exact_mix`).

Its ``/v1`` side can behave like llama-cpp-python's server instead: refuse ``response_format``
types it does not know with HTTP 500 (:attr:`ServerState.v1_json_modes`), and refuse a prompt
longer than its context (:attr:`ServerState.v1_overflow`): HTTP 400 when not streaming, an empty
200 stream when streaming.

Run it for your own tests: ``novaberg test-server --port 11435`` and script it over HTTP
(``POST /_novaberg/script``), or in Python with :class:`OllamaTestServer`.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import re
import threading
import time
from collections import defaultdict, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.background import BackgroundTask

from novaberg.testing.replies import Match, ReasoningStyle, Reply, exact_mix, sample_for_schema
from novaberg.testing.serve import ThreadedServer

__all__ = [
    "Match",
    "ModelSpec",
    "OllamaTestServer",
    "RecordedRequest",
    "Reply",
    "Truncation",
    "create_app",
]

CALLER_HEADER = "x-novaberg-caller"
SERVER_VERSION = "0.13.0"
DEFAULT_CONTEXT = 4096
"""Ollama's default runtime context on machines with under 24 GiB of VRAM."""
V1_JSON_MODES = ("text", "json_object", "json_schema")
_TOKEN = re.compile(r"\w{1,6}|[^\w\s]")

log = logging.getLogger("novaberg.testing")


def prompt_tokens(body: dict[str, Any]) -> int:
    """The test server's own token count of a chat request's prompt: word pieces of up to six
    characters and punctuation marks, plus four tokens of template per message (a tokenizer
    that is not the client's, as with a real server)."""
    messages = body.get("messages") or []
    text = " ".join(f"{m.get('content') or ''} {m.get('thinking') or ''}" for m in messages)
    if body.get("tools"):
        text += json.dumps(body["tools"])
    return len(_TOKEN.findall(text)) + 4 * len(messages)


@dataclass(frozen=True)
class ModelSpec:
    name: str
    capabilities: tuple[str, ...] = ("completion", "tools", "thinking")
    family: str = "qwen3"
    parameter_size: str = "4.0B"
    context_length: int = 40960
    """The most the model could take, as ``/api/show`` reports it (not the runtime context)."""


DEFAULT_MODELS = (
    ModelSpec("qwen3:4b"),
    ModelSpec("gemma3:270m", ("completion",), "gemma3", "268M"),
    ModelSpec("llama3.2:3b", ("completion", "tools"), "llama", "3.2B"),
    ModelSpec("nomic-embed-text", ("embedding",), "nomic-bert", "137M"),
)


@dataclass(frozen=True)
class RecordedRequest:
    path: str
    caller: str
    body: dict[str, Any]
    headers: dict[str, str]
    at: float
    answered_at: float | None = None
    """When the server had answered a chat request (``/api/chat``, ``/v1/chat/completions``),
    on the clock of ``at`` (``time.time()``): once the last byte of its answer went out (a
    stream's final chunk, an error included), or its client went away first. ``None`` while it
    is being answered, and for the other paths. A client's own clock then tells, e.g., how long
    after the last judge's answer its first content arrived."""


@dataclass(frozen=True)
class Truncation:
    """A prompt the server cut to its runtime context (Ollama logs "truncating input prompt")."""

    path: str
    caller: str
    limit: int
    prompt: int
    kept: int


@dataclass
class _Rendered:
    """A reply as it will go out for one request."""

    content: str
    thinking: str
    tool_calls: list[dict[str, Any]]
    eval_count: int
    prompt_eval_count: int


@dataclass
class ServerState:
    models: dict[str, ModelSpec]
    delay_s: float = 0.0
    reasoning_style: ReasoningStyle = "reasoning"
    default_thinking: str = "The user wrote something; let me think about a good answer."
    context_length: int = DEFAULT_CONTEXT
    """The runtime context when a request names none (Ollama: ``OLLAMA_CONTEXT_LENGTH``)."""
    v1_json_modes: tuple[str, ...] = V1_JSON_MODES
    """``response_format`` types ``/v1`` takes; others get llama-cpp-python's HTTP 500."""
    v1_overflow: Literal["truncate", "refuse"] = "truncate"
    no_ps: bool = False
    """Answer ``GET /api/ps`` with 404, as some Ollama-compatible proxies and emulations do."""
    """``/v1`` with a prompt longer than ``context_length``: cut it silently (Ollama's /v1) or
    refuse it (llama-cpp-python: 400 ``context_length_exceeded``, or an empty 200 stream)."""
    scripts: dict[str, deque[Reply | None]] = field(default_factory=lambda: defaultdict(deque))
    """Replies queued per caller; ``None``: the standing reply or the server's own answer."""
    matched: list[tuple[str, Match, deque[Reply | None]]] = field(default_factory=list)
    """Replies queued per caller for the requests a :class:`Match` picks (tried first)."""
    standing: dict[str, Reply] = field(default_factory=dict)
    requests: list[RecordedRequest] = field(default_factory=list)
    truncations: list[Truncation] = field(default_factory=list)
    loaded: dict[str, int] = field(default_factory=dict)
    """Models that answered a chat, with the runtime context they last ran with (``/api/ps``)."""
    lock: threading.Lock = field(default_factory=threading.Lock)

    def reset(self) -> None:
        """Forget scripts, recorded requests and loaded models; undo every setting."""
        with self.lock:
            self.scripts.clear()
            self.matched.clear()
            self.standing.clear()
            self.requests.clear()
            self.truncations.clear()
            self.loaded.clear()
        self.delay_s = 0.0
        self.reasoning_style = "reasoning"
        self.context_length = DEFAULT_CONTEXT
        self.v1_json_modes = V1_JSON_MODES
        self.v1_overflow = "truncate"
        self.no_ps = False

    def read_prompt(
        self, path: str, caller: str, model: str, body: dict[str, Any], window: int
    ) -> int:
        """How many prompt tokens a runner with a ``window``-token context reads of ``body``:
        a longer prompt keeps its first 4 tokens and its end (the cut is recorded)."""
        prompt = prompt_tokens(body)
        kept = prompt if prompt <= window else window
        with self.lock:
            self.loaded[model] = window
            if kept < prompt:
                self.truncations.append(Truncation(path, caller, window, prompt, kept))
        if kept < prompt:
            log.info(
                "truncating input prompt limit=%d prompt=%d keep=4 new=%d", window, prompt, kept
            )
        return kept

    def queue(self, caller: str, replies: list[Reply | None], match: Match | None = None) -> None:
        """Queue ``replies`` for ``caller``'s requests (those ``match`` picks, if given)."""
        with self.lock:
            if match is None:
                self.scripts[caller].extend(replies)
                return
            for who, how, queued in self.matched:
                if who == caller and how == match:
                    queued.extend(replies)
                    return
            self.matched.append((caller, match, deque(replies)))

    def next_reply(self, caller: str, body: dict[str, Any] | None = None) -> Reply | None:
        with self.lock:
            for who, match, matched in self.matched:
                if who == caller and matched and body is not None and match.matches(body):
                    return matched.popleft() or self._standing(caller)
            queued = self.scripts.get(caller)
            if queued:
                return queued.popleft() or self._standing(caller)
            return self._standing(caller)

    def _standing(self, caller: str) -> Reply | None:
        return self.standing.get(caller) or self.standing.get("*")


def create_app(state: ServerState) -> FastAPI:
    app = FastAPI(title="Novaberg Ollama test server", docs_url=None, redoc_url=None)

    async def record(request: Request) -> dict[str, Any]:
        raw = await request.body()
        body = json.loads(raw) if raw else {}
        entry = RecordedRequest(
            request.url.path,
            request.headers.get(CALLER_HEADER, ""),
            body,
            dict(request.headers),
            time.time(),
        )
        with state.lock:
            state.requests.append(entry)
        request.state.recorded = entry
        return body if isinstance(body, dict) else {}

    def answered(request: Request, response: Response) -> Response:
        """``response``, stamping its request's :attr:`RecordedRequest.answered_at` once sent."""
        entry = getattr(request.state, "recorded", None)

        def stamp() -> None:
            with state.lock:
                for i in range(len(state.requests) - 1, -1, -1):
                    if state.requests[i] is entry:
                        state.requests[i] = replace(entry, answered_at=time.time())
                        return

        if entry is not None:
            response.background = BackgroundTask(stamp)
        return response

    @app.get("/")
    async def root() -> PlainTextResponse:
        return PlainTextResponse("Ollama is running")

    @app.get("/api/version")
    async def version() -> dict[str, str]:
        return {"version": SERVER_VERSION}

    @app.get("/api/tags")
    async def tags() -> dict[str, Any]:
        return {"models": [_tag(spec) for spec in state.models.values()]}

    @app.get("/api/ps", response_model=None)
    async def ps() -> dict[str, Any] | JSONResponse:
        if state.no_ps:
            return JSONResponse({"error": "404 page not found"}, status_code=404)
        with state.lock:
            loaded = dict(state.loaded)
        return {
            "models": [
                {**_tag(state.models[name]), "size_vram": 0, "context_length": ctx}
                for name, ctx in loaded.items()
                if name in state.models
            ]
        }

    @app.post("/api/show")
    async def show(request: Request) -> Response:
        body = await record(request)
        spec = state.models.get(body.get("model") or body.get("name") or "")
        if spec is None:
            return _error(404, f"model '{body.get('model')}' not found")
        return JSONResponse(
            {
                "modelfile": "",
                "parameters": "",
                "template": "{{ .Prompt }}",
                "details": _details(spec),
                "model_info": {
                    "general.architecture": spec.family,
                    f"{spec.family}.context_length": spec.context_length,
                },
                "capabilities": list(spec.capabilities),
            }
        )

    @app.post("/api/embed")
    async def embed(request: Request) -> Response:
        body = await record(request)
        if body.get("model") not in state.models:
            return _error(404, f"model '{body.get('model')}' not found")
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        return JSONResponse(
            {
                "model": body["model"],
                "embeddings": [_vector(t) for t in texts],
                "total_duration": 1000,
                "prompt_eval_count": len(texts),
            }
        )

    @app.post("/api/chat")
    async def chat(request: Request) -> Response:
        return answered(request, await ollama_chat(request))

    async def ollama_chat(request: Request) -> Response:
        received = time.perf_counter_ns()
        body = await record(request)
        caller = request.headers.get(CALLER_HEADER, "")
        spec = state.models.get(body.get("model", ""))
        if spec is None:
            return _error(404, f"model '{body.get('model')}' not found")
        think = body.get("think")
        if think not in (None, False) and "thinking" not in spec.capabilities:
            return _error(400, f'"{spec.name}" does not support thinking')
        tools = body.get("tools") or []
        if tools and "tools" not in spec.capabilities:
            return _error(400, f"registry.ollama.ai/library/{spec.name} does not support tools")
        reply = state.next_reply(caller, body) or _default_reply(body)
        await asyncio.sleep(state.delay_s + reply.delay_s)
        if reply.status is not None:
            return _error(reply.status, reply.error)
        options = body.get("options") or {}
        window = min(reply.context_limit or 1 << 30, options.get("num_ctx") or state.context_length)
        read = state.read_prompt(request.url.path, caller, spec.name, body, window)
        thinks = think not in (None, False) or (think is None and "thinking" in spec.capabilities)
        default_thinking = state.default_thinking if think is None or reply.thinks else ""
        rendered = _render(reply, tools, thinks, default_thinking, read)
        if body.get("stream", True) is False:
            return JSONResponse(_ollama_final(spec.name, reply, rendered, received, whole=True))
        return StreamingResponse(
            _ollama_stream(spec.name, reply, rendered, received), media_type="application/x-ndjson"
        )

    @app.get("/v1/models")
    async def v1_models() -> dict[str, Any]:
        return {
            "object": "list",
            "data": [
                {"id": name, "object": "model", "owned_by": "novaberg-test"}
                for name in state.models
            ],
        }

    @app.post("/v1/embeddings")
    async def openai_embeddings(request: Request) -> Response:
        body = await record(request)
        if body.get("model") not in state.models:
            return JSONResponse(
                {"error": {"message": f"model '{body.get('model')}' not found"}}, status_code=404
            )
        inputs = body.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        return JSONResponse(
            {
                "object": "list",
                "model": body["model"],
                "data": [
                    {"object": "embedding", "index": i, "embedding": _vector(t)}
                    for i, t in enumerate(texts)
                ],
            }
        )

    @app.post("/v1/chat/completions")
    async def v1_chat(request: Request) -> Response:
        return answered(request, await openai_chat(request))

    async def openai_chat(request: Request) -> Response:
        body = await record(request)
        caller = request.headers.get(CALLER_HEADER, "")
        spec = state.models.get(body.get("model", ""))
        if spec is None:
            return JSONResponse(
                {
                    "error": {
                        "message": f"model '{body.get('model')}' not found",
                        "type": "api_error",
                    }
                },
                status_code=404,
            )
        kind = (body.get("response_format") or {}).get("type")
        if kind is not None and kind not in state.v1_json_modes:
            return _v1_error(
                500, _literal_error(kind, state.v1_json_modes), "internal_server_error"
            )
        prompt = prompt_tokens(body)
        if state.v1_overflow == "refuse" and prompt >= state.context_length:
            if body.get("stream"):  # the error happens after the 200: nothing is sent
                return StreamingResponse(_nothing(), media_type="text/event-stream")
            return _v1_error(
                400,
                _context_exceeded(state.context_length, prompt, body.get("max_tokens")),
                "invalid_request_error",
                code="context_length_exceeded",
            )
        reply = state.next_reply(caller, body) or _default_reply(body)
        await asyncio.sleep(state.delay_s + reply.delay_s)
        if reply.status is not None:
            return _v1_error(reply.status, reply.error, "api_error")
        window = min(reply.context_limit or 1 << 30, state.context_length)
        read = state.read_prompt(request.url.path, caller, spec.name, body, window)
        rendered = _render(reply, body.get("tools") or [], True, "", read)
        style = reply.reasoning_style or state.reasoning_style
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return StreamingResponse(
                _openai_stream(spec.name, reply, rendered, style, usage),
                media_type="text/event-stream",
            )
        if reply.error_after_chunks is not None:
            return _v1_error(500, reply.error, "api_error")
        whole = json.dumps(_openai_whole(spec.name, reply, rendered, style))
        if reply.cut_after_chunks is not None:  # the connection ends inside the body
            return Response(whole[: len(whole) // 2], media_type="application/json")
        return Response(whole, media_type="application/json")

    # -- control endpoints, for scripting a server running in another process -----------
    @app.post("/_novaberg/script")
    async def script(request: Request) -> dict[str, Any]:
        body = await request.json()
        caller = body.get("caller", "*")
        replies: list[Reply | None] = [Reply.model_validate(r) for r in body.get("replies", [])]
        mix = [
            (None if m.get("reply") is None else Reply.model_validate(m["reply"]), m["times"])
            for m in body.get("mix", [])
        ]
        replies += exact_mix(mix, seed=body.get("seed", 0))
        match = Match.model_validate(body["match"]) if body.get("match") else None
        state.queue(caller, replies, match)
        if "standing" in body:
            with state.lock:
                state.standing[caller] = Reply.model_validate(body["standing"])
        return {"queued": len(replies)}

    @app.post("/_novaberg/reset")
    async def reset() -> dict[str, bool]:
        state.reset()
        return {"reset": True}

    @app.get("/_novaberg/requests")
    async def requests() -> list[dict[str, Any]]:
        with state.lock:
            return [{"path": r.path, "caller": r.caller, "body": r.body} for r in state.requests]

    return app


# -- rendering --------------------------------------------------------------------------
def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _v1_error(status: int, message: str, kind: str, code: str | None = None) -> JSONResponse:
    error = {"message": message, "type": kind, "param": None, "code": code}
    return JSONResponse({"error": error}, status_code=status)


def _literal_error(kind: str, accepted: tuple[str, ...]) -> str:
    """llama-cpp-python's server's answer to a ``response_format`` type it does not know."""
    expected = " or ".join(f"'{a}'" for a in accepted if a != "json_schema")
    return (
        "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', "
        f"'type'), 'msg': \"Input should be {expected}\", 'input': '{kind}'}}"
    )


def _context_exceeded(window: int, prompt: int, max_tokens: int | None) -> str:
    """llama-cpp-python's server's answer to a prompt longer than its context."""
    return (
        f"This model's maximum context length is {window} tokens. However, you requested "
        f"{prompt + (max_tokens or 0)} tokens ({prompt} in the messages, {max_tokens} in the "
        "completion). Please reduce the length of the messages or completion."
    )


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # an async generator that ends at once


def _details(spec: ModelSpec) -> dict[str, Any]:
    return {
        "format": "gguf",
        "family": spec.family,
        "families": [spec.family],
        "parameter_size": spec.parameter_size,
        "quantization_level": "Q4_K_M",
    }


def _tag(spec: ModelSpec) -> dict[str, Any]:
    return {
        "name": spec.name,
        "model": spec.name,
        "modified_at": "2026-01-01T00:00:00Z",
        "size": 1_000_000,
        "digest": hashlib.sha256(spec.name.encode()).hexdigest(),
        "details": _details(spec),
    }


def _vector(text: str, dims: int = 64) -> list[float]:
    """A deterministic toy embedding: hashed bag of word stems (first five letters), unit
    length. Texts sharing words are similar; it knows no synonyms."""
    vector = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word[:5].encode()).digest()
        vector[digest[0] % dims] += 1.0 if digest[1] % 2 else -1.0
    norm = sum(v * v for v in vector) ** 0.5 or 1.0
    return [round(v / norm, 6) for v in vector]


def _default_reply(body: dict[str, Any]) -> Reply:
    schema = body.get("format") or _openai_schema(body)
    if isinstance(schema, dict):
        return Reply(content=json.dumps(sample_for_schema(schema)))
    if schema == "json":
        return Reply(content="{}")
    last = next(
        (
            m.get("content", "")
            for m in reversed(body.get("messages", []))
            if m.get("role") == "user"
        ),
        "",
    )
    return Reply(content=f"(test server) You said: {str(last)[:200]}")


def _openai_schema(body: dict[str, Any]) -> Any:
    fmt = body.get("response_format") or {}
    return (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema")


def _render(
    reply: Reply, tools: list[dict[str, Any]], thinks: bool, default_thinking: str, read: int
) -> _Rendered:
    declared = {(t.get("function") or {}).get("name") for t in tools}
    calls = [c for c in reply.tool_calls if c.get("name") in declared]
    thinks = thinks if reply.thinks is None else reply.thinks
    thinking = (reply.thinking or default_thinking) if thinks else ""
    words = len(reply.content.split()) + len(reply.thinking.split()) + 5 * len(reply.tool_calls)
    eval_count = reply.eval_count if reply.eval_count is not None else max(1, words)
    prompt_eval_count = reply.prompt_eval_count if reply.prompt_eval_count is not None else read
    return _Rendered(reply.content, thinking, calls, eval_count, prompt_eval_count)


def _pieces(text: str, size: int = 12) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def _ollama_final(
    model: str, reply: Reply, r: _Rendered, received_ns: int, whole: bool
) -> dict[str, Any]:
    """The done chunk; ``total_duration`` is the real time since the request arrived."""
    total = time.perf_counter_ns() - received_ns
    message: dict[str, Any] = {"role": "assistant", "content": r.content if whole else ""}
    if whole and r.thinking:
        message["thinking"] = r.thinking
    if whole and r.tool_calls:
        message["tool_calls"] = [_ollama_call(c, i) for i, c in enumerate(r.tool_calls)]
    return {
        "model": model,
        "created_at": _now(),
        "message": message,
        "done": True,
        "done_reason": reply.done_reason,
        "total_duration": total,
        "load_duration": 0,
        "prompt_eval_count": r.prompt_eval_count,
        "prompt_eval_duration": total // 10,
        "eval_count": r.eval_count,
        "eval_duration": total - total // 10,
    }


def _ollama_call(call: dict[str, Any], index: int) -> dict[str, Any]:
    return {
        "function": {"index": index, "name": call["name"], "arguments": call.get("arguments", {})}
    }


async def _ollama_stream(
    model: str, reply: Reply, r: _Rendered, received_ns: int
) -> AsyncIterator[bytes]:
    chunks: list[dict[str, Any]] = []
    for piece in _pieces(r.thinking):
        chunks.append({"role": "assistant", "content": "", "thinking": piece})
    for piece in _pieces(r.content):
        chunks.append({"role": "assistant", "content": piece})
    for i, call in enumerate(r.tool_calls):
        chunks.append({"role": "assistant", "content": "", "tool_calls": [_ollama_call(call, i)]})
    for sent, message in enumerate(chunks):
        if reply.error_after_chunks is not None and sent >= reply.error_after_chunks:
            yield _line({"error": reply.error})
            return
        if reply.cut_after_chunks is not None and sent >= reply.cut_after_chunks:
            return
        yield _line({"model": model, "created_at": _now(), "message": message, "done": False})
        if reply.chunk_delay_s:
            await asyncio.sleep(reply.chunk_delay_s)
    if reply.error_after_chunks is not None:
        yield _line({"error": reply.error})
        return
    if reply.cut_after_chunks is not None:
        return
    yield _line(_ollama_final(model, reply, r, received_ns, whole=False))


def _openai_message(r: _Rendered, style: ReasoningStyle) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": r.content}
    if r.thinking:
        if style == "think_tags":
            message["content"] = f"<think>{r.thinking}</think>\n{r.content}"
        else:
            message[style] = r.thinking
    if r.tool_calls:
        message["tool_calls"] = [  # a whole message lists calls without an index
            {
                "id": f"call_{i}",
                "type": "function",
                "function": {"name": c["name"], "arguments": json.dumps(c.get("arguments", {}))},
            }
            for i, c in enumerate(r.tool_calls)
        ]
    return message


def _openai_whole(model: str, reply: Reply, r: _Rendered, style: ReasoningStyle) -> dict[str, Any]:
    return {
        "id": "chatcmpl-test",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": _openai_message(r, style),
                "finish_reason": "tool_calls" if r.tool_calls else reply.done_reason,
            }
        ],
        "usage": {
            "prompt_tokens": r.prompt_eval_count,
            "completion_tokens": r.eval_count,
            "total_tokens": r.prompt_eval_count + r.eval_count,
        },
    }


async def _openai_stream(
    model: str, reply: Reply, r: _Rendered, style: ReasoningStyle, usage: bool
) -> AsyncIterator[bytes]:
    message = _openai_message(r, style)
    deltas: list[dict[str, Any]] = []
    if style != "think_tags" and r.thinking:
        deltas += [{style: p} for p in _pieces(r.thinking)]
    deltas += [{"content": p} for p in _pieces(message["content"])]
    for i, call in enumerate(message.get("tool_calls", [])):
        deltas.append({"tool_calls": [{"index": i, **call}]})

    def event(payload: dict[str, Any]) -> bytes:
        return f"data: {json.dumps(payload)}\n\n".encode()

    base = {
        "id": "chatcmpl-test",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    for sent, delta in enumerate(deltas):
        if reply.error_after_chunks is not None and sent >= reply.error_after_chunks:
            yield event({"error": {"message": reply.error, "type": "api_error"}})
            return
        if reply.cut_after_chunks is not None and sent >= reply.cut_after_chunks:
            return
        yield event({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
        if reply.chunk_delay_s:
            await asyncio.sleep(reply.chunk_delay_s)
    if reply.cut_after_chunks is not None:
        return
    finish = "tool_calls" if r.tool_calls else reply.done_reason
    yield event({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]})
    if usage:
        yield event(
            {
                **base,
                "choices": [],
                "usage": {
                    "prompt_tokens": r.prompt_eval_count,
                    "completion_tokens": r.eval_count,
                    "total_tokens": r.prompt_eval_count + r.eval_count,
                },
            }
        )
    yield b"data: [DONE]\n\n"


def _line(payload: dict[str, Any]) -> bytes:
    return (json.dumps(payload) + "\n").encode()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())


# -- running it -------------------------------------------------------------------------
class OllamaTestServer:
    """The test server in a background thread of this process, on a free loopback port."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        models: tuple[ModelSpec, ...] = DEFAULT_MODELS,
        delay_s: float = 0.0,
        reasoning_style: ReasoningStyle = "reasoning",
    ) -> None:
        self.state = ServerState(
            models={m.name: m for m in models}, delay_s=delay_s, reasoning_style=reasoning_style
        )
        self.app = create_app(self.state)
        self._runner = ThreadedServer(self.app, host, port)
        self.port = self._runner.port

    @property
    def url(self) -> str:
        return self._runner.url

    # scripting
    def script(self, caller: str, *replies: Reply, match: Match | None = None) -> None:
        """Queue replies for requests from ``caller`` (``"*"``: any caller without its own);
        with ``match``, for those of its requests the match picks (they are tried first)."""
        self.state.queue(caller, list(replies), match)

    def script_mix(
        self,
        caller: str,
        mix: list[tuple[Reply | None, int]],
        *,
        match: Match | None = None,
        seed: int = 0,
    ) -> None:
        """Faults at exact rates: each reply of ``mix`` for exactly as many of the next
        requests as given, in a shuffled order (:func:`exact_mix`; ``None``: the server's own
        answer)."""
        self.state.queue(caller, exact_mix(mix, seed), match)

    def script_rate(
        self,
        caller: str,
        fault: Reply,
        times: int,
        of: int,
        *,
        otherwise: Reply | None = None,
        match: Match | None = None,
        seed: int = 0,
    ) -> None:
        """``fault`` in exactly ``times`` of the next ``of`` requests, ``otherwise`` (default:
        the server's own answer) in the rest."""
        if not 0 <= times <= of:
            raise ValueError(f"times must be between 0 and of ({of}), not {times}")
        self.script_mix(caller, [(fault, times), (otherwise, of - times)], match=match, seed=seed)

    def standing(self, caller: str, reply: Reply) -> None:
        """Answer every request from ``caller`` with ``reply`` once its queue is empty."""
        with self.state.lock:
            self.state.standing[caller] = reply

    def set_delay(self, seconds: float) -> None:
        self.state.delay_s = seconds

    def requests(self, path: str | None = None, caller: str | None = None) -> list[RecordedRequest]:
        with self.state.lock:
            return [
                r
                for r in self.state.requests
                if (path is None or r.path == path) and (caller is None or r.caller == caller)
            ]

    def truncations(self) -> list[Truncation]:
        """The prompts this server cut to its runtime context, in order."""
        with self.state.lock:
            return list(self.state.truncations)

    def reset(self) -> None:
        """Back to a fresh server: no scripts, no recorded requests, default settings."""
        self.state.reset()

    def pending(self) -> dict[str, int]:
        """Scripted replies not consumed yet, per caller (a test should end with none)."""
        with self.state.lock:
            pending = {k: len(v) for k, v in self.state.scripts.items() if v}
            for caller, _, queued in self.state.matched:
                if queued:
                    pending[caller] = pending.get(caller, 0) + len(queued)
            return pending

    # lifecycle
    def start(self) -> OllamaTestServer:
        self._runner.start()
        return self

    def stop(self) -> None:
        self._runner.stop()

    def serve_forever(self) -> None:
        """Run in the calling thread until interrupted (``novaberg test-server``)."""
        self._runner.serve_forever()

    def __enter__(self) -> OllamaTestServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
