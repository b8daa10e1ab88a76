"""Any OpenAI-compatible chat server: llama.cpp server, vLLM, LM Studio, Ollama's /v1, OpenAI.

Reasoning arrives in one of three shapes, all normalised here into ``ChatResponse.thinking``:
``message.reasoning`` (Ollama's /v1, stream ``delta.reasoning``), ``reasoning_content``
(llama.cpp server, vLLM, DeepSeek) or inline ``<think>…</think>`` in the content.

Servers differ in what they take and how they fail; each difference is learned or read here:

* Structured output steps down ``json_schema`` → ``json_object`` with the schema attached →
  JSON asked for in the prompt only. A server that refuses a mode (llama-cpp-python's answers
  ``json_schema`` with HTTP 500 and a validation error) raises :class:`FormatRefused` once, and
  this backend asks that server and model in the next mode from then on.
* A call with a token listener is streamed; one without is not, so that an error reaches us
  with the server's words. llama-cpp-python's server, asked to stream a prompt longer than its
  context, answers 200 and ends the stream without a single event; the retry of exactly that
  request goes out without streaming, and its HTTP 400 ``context_length_exceeded`` becomes a
  :class:`ContextOverflow`, which is never retried.

Every error leaves through :meth:`OpenAICompatBackend._translate` and names the backend, never
its address: where a message quotes the server or httpx (whose messages hold the whole URL,
userinfo included), the address becomes the name (:func:`~novaberg.backends.base.addressless`).
The operator's log and ``novaberg doctor`` show the address without its userinfo.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import deque
from collections.abc import Callable
from typing import Any

import httpx

from novaberg.backends.base import (
    CALLER_HEADER,
    Backend,
    BackendStatus,
    ChatMessage,
    ChatRequest,
    ChatResponse,
    TokenCallback,
    ToolCall,
    addressless,
    emit,
    first_within,
)
from novaberg.backends.guards import refuses_json_mode, says_context_exceeded
from novaberg.backends.reasoning import ThinkTagSplitter
from novaberg.backends.transport import as_httpx, transport
from novaberg.config import Timeouts
from novaberg.errors import (
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    BackendUnreachable,
    ContextOverflow,
    FormatRefused,
    ModelNotFound,
    StreamCut,
)
from novaberg.redaction import safe_url
from novaberg.telemetry import JsonMode

log = logging.getLogger("novaberg")

_NO_ANSWER = (StreamCut, BackendUnreachable, BackendTimeout)
"""Failures that carry no answer of the server: a request that was to go whole to learn why
its stream broke goes whole again (after an aborted stream, the server may also close the
kept-alive connection under the next request)."""

REASONING_KEYS = ("reasoning", "reasoning_content")
JSON_MODES: tuple[JsonMode, ...] = ("json_schema", "json_object", "prompt")
"""The ways to ask for JSON, most to least strict; a server starts at the first."""
JSON_INSTRUCTION = (
    "Answer with exactly one JSON object and nothing else. It must match this JSON schema:\n"
)
WHERE = "The OpenAI-compatible server"
"""How messages name the server: never by its address."""
REMEMBERED_CUTS = 32
"""How many request bodies whose stream broke before any event are remembered."""


def with_json_instruction(messages: list[ChatMessage], schema: dict[str, Any]) -> list[ChatMessage]:
    """``messages`` with the request for JSON matching ``schema`` added to the first system
    message (or, without one, as a system message in front)."""
    text = JSON_INSTRUCTION + json.dumps(schema, ensure_ascii=False)
    copied = [m.copy() for m in messages]
    for message in copied:
        if message.get("role") == "system":
            message["content"] = f"{message.get('content') or ''}\n\n{text}".lstrip()
            return copied
    return [ChatMessage(role="system", content=text), *copied]


class OpenAICompatBackend(Backend):
    """Chat calls to ``POST {base_url}/chat/completions``; streamed when someone listens."""

    embeds = True

    def __init__(self, base_url: str, model: str, api_key: str | None, timeouts: Timeouts) -> None:
        self.name = "openai"
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeouts = timeouts
        self._client: httpx.AsyncClient | None = None
        self._json_modes: dict[tuple[str, str], JsonMode] = {}
        """The JSON mode learned per (server, model): the first one it did not refuse."""
        self._cut_before_data: deque[str] = deque(maxlen=REMEMBERED_CUTS)

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
                transport=transport(),
                timeout=httpx.Timeout(
                    connect=self.timeouts.connect_s,
                    read=self.timeouts.first_token_s,
                    write=self.timeouts.connect_s,
                    pool=self.timeouts.total_s,
                ),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.aclose()

    def json_mode(self, request: ChatRequest) -> JsonMode:
        """How this request will ask for JSON on this server (``""`` if it asks for none)."""
        if request.json_schema is None:
            return ""
        return self._json_modes.get((self.base_url, self.model), JSON_MODES[0])

    def _body(self, request: ChatRequest, mode: JsonMode) -> dict[str, Any]:
        """The request body, without the streaming fields."""
        messages = request.messages
        body: dict[str, Any] = {"model": self.model}
        if request.tools:
            body["tools"] = request.tools
        schema = request.json_schema
        if schema is not None and mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": schema},
            }
        elif schema is not None and mode == "json_object":
            body["response_format"] = {"type": "json_object", "schema": schema}
        elif schema is not None and mode == "prompt":
            messages = with_json_instruction(messages, schema)
        body["messages"] = messages
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.seed is not None:
            body["seed"] = request.seed
        return body

    def _translate(self, exc: BaseException) -> BackendError:
        """The error ``exc`` as it leaves this backend: one of the tree of
        :mod:`novaberg.errors`, naming the backend and never its address."""
        return addressless(self._classify(as_httpx(exc)), self.base_url)

    def _classify(self, exc: BaseException) -> BackendError:
        kw: dict[str, Any] = {"backend": self.name, "model": self.model}
        if isinstance(exc, BackendError):
            exc.backend, exc.model = exc.backend or self.name, exc.model or self.model
            return exc
        if isinstance(exc, httpx.ConnectError):
            return BackendUnreachable(
                f"{WHERE} is not reachable. Start it or fix NOVABERG_OPENAI_URL.", **kw
            )
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return BackendTimeout(f"{WHERE} did not answer in time ({type(exc).__name__}).", **kw)
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | json.JSONDecodeError):
            return StreamCut(f"{WHERE} cut the stream: {exc}", **kw)
        return BackendError(f"{WHERE} failed: {type(exc).__name__}: {exc}", **kw)

    async def chat(
        self, request: ChatRequest, on_token: TokenCallback | None = None
    ) -> ChatResponse:
        mode = self.json_mode(request)
        body = self._body(request, mode)
        digest = hashlib.sha256(json.dumps(body, sort_keys=True).encode()).hexdigest()
        retry_whole = digest in self._cut_before_data
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                if on_token is not None and not retry_whole:
                    response = await self._stream(request, body, mode, digest, on_token)
                else:
                    response = await self._whole(request, body, mode)
                    await emit(on_token, response.content)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            error = self._translate(exc)
            if retry_whole and not isinstance(error, _NO_ANSWER):
                self._cut_before_data.remove(digest)  # the server has said why
            raise error from None
        if retry_whole:  # once: a later request with a listener streams again
            self._cut_before_data.remove(digest)
        response.json_mode = mode
        return response

    async def embed(self, texts: list[str], model: str, caller: str) -> list[list[float]]:
        """``POST {base_url}/embeddings`` with ``model`` (an embedding model on that server)."""
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                response = await self._get_client().post(
                    "/embeddings",
                    json={"model": model, "input": texts},
                    headers={CALLER_HEADER: caller},
                )
                if response.status_code == 404:
                    raise ModelNotFound(
                        f"The embedding model {model!r} is not served by the OpenAI-compatible "
                        f"server ({response.text[:200]}); set memory.embed_model to one it "
                        "serves, or unset it to retrieve by full text only.",
                        installed=[],
                        backend=self.name,
                        model=model,
                    )
                if response.status_code >= 400:
                    raise self._http_error(response)
                data = sorted(response.json()["data"], key=lambda d: d["index"])
                return [[float(x) for x in d["embedding"]] for d in data]
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self._translate(exc) from None

    async def _whole(
        self, request: ChatRequest, body: dict[str, Any], mode: JsonMode
    ) -> ChatResponse:
        """One request without streaming: the answer, or the server's error in its words."""
        timeout = httpx.Timeout(
            connect=self.timeouts.connect_s,
            read=self.timeouts.total_s,  # nothing arrives before the whole answer
            write=self.timeouts.connect_s,
            pool=self.timeouts.total_s,
        )
        response = await self._get_client().post(
            "/chat/completions",
            json={**body, "stream": False},
            headers={CALLER_HEADER: request.caller},
            timeout=timeout,
        )
        if response.status_code >= 400:
            raise self._http_error(response, mode)
        acc = _Accumulator(self._overflow)
        acc.feed(response.json())
        return acc.result(self.name, self.model)

    async def _stream(
        self,
        request: ChatRequest,
        body: dict[str, Any],
        mode: JsonMode,
        digest: str,
        on_token: TokenCallback | None,
    ) -> ChatResponse:
        client = self._get_client()
        headers = {CALLER_HEADER: request.caller}
        streamed = {**body, "stream": True, "stream_options": {"include_usage": True}}
        events = 0
        async with client.stream(
            "POST", "/chat/completions", json=streamed, headers=headers
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                raise self._http_error(response, mode)
            acc = _Accumulator(self._overflow)
            lines = first_within(response.aiter_lines(), self.timeouts.first_token_s)
            async for line in lines:
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return acc.result(self.name, self.model)
                events += 1
                await emit(on_token, acc.feed(json.loads(data)))
        if events == 0:
            # llama-cpp-python's server does this when the prompt exceeds its context: the
            # error happens after the 200, and only its own log says why. Sent again, this
            # request goes out whole, so that the server can answer with the reason.
            self._cut_before_data.append(digest)
            raise StreamCut(
                f"{WHERE} ended the stream before sending anything; if this request is sent "
                "again, it goes without streaming so that the server can say why.",
                backend=self.name,
                model=self.model,
            )
        raise StreamCut(
            f"{WHERE} ended the stream without [DONE]; the answer is incomplete and was not used.",
            backend=self.name,
            model=self.model,
        )

    def _overflow(self, said: str) -> ContextOverflow:
        return ContextOverflow(
            "The prompt exceeded the model's context window on the OpenAI-compatible server (it "
            f"said: {said[:300]}). Set limits.context_tokens to the server's context size so "
            "that prompts are sized to it, start the server with a larger context (llama.cpp: "
            "--n_ctx), or start a new conversation; the same request is not sent again.",
            backend=self.name,
            model=self.model,
        )

    def _refused(self, mode: JsonMode, status: int) -> FormatRefused:
        """Learn the next JSON mode for this server and model after ``mode`` was refused."""
        key = (self.base_url, self.model)
        current = self._json_modes.get(key, JSON_MODES[0])
        if current == mode and mode != JSON_MODES[-1]:
            current = JSON_MODES[JSON_MODES.index(mode) + 1]
            self._json_modes[key] = current
            log.info(
                "the server at %s refused structured output as %s for %s (HTTP %d); "
                "asking it for JSON as %s from now on",
                safe_url(self.base_url),
                mode,
                self.model,
                status,
                current,
            )
        stepped = JSON_MODES.index(current) > JSON_MODES.index(mode)
        then = f"the next request asks for JSON as {current}" if stepped else "none is left"
        return FormatRefused(
            f"{WHERE} refused structured output as {mode} "
            f"(HTTP {status}, a validation error about response_format); {then}.",
            refused=mode,
            stepped_down=stepped,
            backend=self.name,
            model=self.model,
        )

    def _http_error(self, response: httpx.Response, mode: JsonMode = "") -> BackendError:
        try:
            payload = response.json()
            error = payload.get("error", payload) if isinstance(payload, dict) else payload
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
        except ValueError:
            message = response.text
        status = response.status_code
        if says_context_exceeded(message):
            return self._overflow(message)
        if mode in ("json_schema", "json_object") and refuses_json_mode(status, message):
            return self._refused(mode, status)
        if status == 404 and "model" in message.lower():
            return ModelNotFound(
                f"Model '{self.model}' not found on the OpenAI-compatible server: {message}. "
                "Set NOVABERG_OPENAI_MODEL to a model the server serves.",
                installed=[],
                backend=self.name,
                model=self.model,
            )
        return BackendHTTPError(
            f"{WHERE} answered HTTP {status}: {message}",
            status=status,
            backend=self.name,
            model=self.model,
        )

    async def status(self) -> BackendStatus:
        try:
            response = await self._get_client().get("/models", headers={CALLER_HEADER: "doctor"})
            response.raise_for_status()
            models = tuple(m.get("id", "") for m in response.json().get("data", []))
        except Exception as exc:
            err = self._translate(exc)
            return BackendStatus(
                self.name,
                self.model,
                False,
                f"{err} (at {safe_url(self.base_url)})",
                fix="start the server or fix NOVABERG_OPENAI_URL / NOVABERG_OPENAI_KEY",
            )
        fix = "" if self.model in models or not models else "set NOVABERG_OPENAI_MODEL"
        return BackendStatus(
            self.name,
            self.model,
            True,
            f"OpenAI-compatible server at {safe_url(self.base_url)}",
            installed_models=models,
            fix=fix,
        )


class _Accumulator:
    """Collects the streamed deltas of one chat completion."""

    def __init__(self, overflow: Callable[[str], ContextOverflow]) -> None:
        self._overflow = overflow
        self.content: list[str] = []
        self.thinking: list[str] = []
        self.tools: dict[int, dict[str, str]] = {}
        self.splitter = ThinkTagSplitter()
        self.finish_reason = ""
        self.model = ""
        self.usage: dict[str, int] = {}

    def feed(self, chunk: dict[str, Any]) -> str:
        """Take one chunk; return the new CONTENT text (thinking never leaves as a token)."""
        if chunk.get("error"):
            error = chunk["error"]
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
            if says_context_exceeded(message):
                raise self._overflow(message)
            raise BackendHTTPError(f"the server reported an error mid-stream: {message}", status=-1)
        self.model = chunk.get("model") or self.model
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        new_content = ""
        for choice in chunk.get("choices") or ():
            delta = choice.get("delta") or choice.get("message") or {}
            for key in REASONING_KEYS:
                if delta.get(key):
                    self.thinking.append(delta[key])
            if delta.get("content"):
                text, thought = self.splitter.feed(delta["content"])
                if thought:
                    self.thinking.append(thought)
                if text:
                    self.content.append(text)
                    new_content += text
            for position, call in enumerate(delta.get("tool_calls") or ()):
                # streamed deltas carry an index; a whole message lists its calls in order
                index = call.get("index", position)
                slot = self.tools.setdefault(index, {"name": "", "arguments": ""})
                function = call.get("function") or {}
                slot["name"] += function.get("name") or ""
                slot["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return new_content

    def result(self, backend: str, configured_model: str) -> ChatResponse:
        text, thought = self.splitter.flush()
        if thought:
            self.thinking.append(thought)
        if text:
            self.content.append(text)
        calls = []
        for _, slot in sorted(self.tools.items()):
            try:
                arguments = json.loads(slot["arguments"] or "{}")
            except json.JSONDecodeError:
                arguments = {"_unparsed": slot["arguments"]}
            calls.append(ToolCall(slot["name"], arguments if isinstance(arguments, dict) else {}))
        return ChatResponse(
            content="".join(self.content).lstrip("\n") if self.thinking else "".join(self.content),
            thinking="".join(self.thinking),
            tool_calls=calls,
            eval_count=int(self.usage.get("completion_tokens", 0)),
            prompt_eval_count=int(self.usage.get("prompt_tokens", 0)),
            done_reason=self.finish_reason,
            backend=backend,
            model=self.model or configured_model,
        )
