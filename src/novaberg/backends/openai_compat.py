"""Any OpenAI-compatible chat server: llama.cpp server, vLLM, LM Studio, Ollama's /v1, OpenAI.

Reasoning arrives in one of three shapes, all normalised here into ``ChatResponse.thinking``:
``message.reasoning`` (Ollama's /v1, stream ``delta.reasoning``), ``reasoning_content``
(llama.cpp server, vLLM, DeepSeek) or inline ``<think>…</think>`` in the content.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from novaberg.backends.base import (
    CALLER_HEADER,
    BackendStatus,
    ChatRequest,
    ChatResponse,
    TokenCallback,
    ToolCall,
    emit,
    first_within,
)
from novaberg.backends.reasoning import ThinkTagSplitter
from novaberg.config import Timeouts
from novaberg.errors import (
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    BackendUnreachable,
    ModelNotFound,
    StreamCut,
)

REASONING_KEYS = ("reasoning", "reasoning_content")


class OpenAICompatBackend:
    """Chat calls to ``POST {base_url}/chat/completions``, always streamed."""

    def __init__(self, base_url: str, model: str, api_key: str | None, timeouts: Timeouts) -> None:
        self.name = "openai"
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.api_key = api_key
        self.timeouts = timeouts
        self._client: httpx.AsyncClient | None = None

    def _get_client(self) -> httpx.AsyncClient:
        if self._client is None:
            headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
            self._client = httpx.AsyncClient(
                base_url=self.base_url,
                headers=headers,
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

    def _body(self, request: ChatRequest) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model,
            "messages": request.messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = request.tools
        if request.json_schema is not None:
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": request.json_schema},
            }
        if request.temperature is not None:
            body["temperature"] = request.temperature
        if request.max_tokens is not None:
            body["max_tokens"] = request.max_tokens
        if request.seed is not None:
            body["seed"] = request.seed
        return body

    def _translate(self, exc: BaseException) -> BackendError:
        where = f"OpenAI-compatible server at {self.base_url}"
        kw: dict[str, Any] = {"backend": self.name, "model": self.model}
        if isinstance(exc, BackendError):
            exc.backend, exc.model = exc.backend or self.name, exc.model or self.model
            return exc
        if isinstance(exc, httpx.ConnectError):
            return BackendUnreachable(
                f"{where} is not reachable. Start it or fix NOVABERG_OPENAI_URL.", **kw
            )
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return BackendTimeout(f"{where} did not answer in time ({type(exc).__name__}).", **kw)
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError | json.JSONDecodeError):
            return StreamCut(f"{where} cut the stream: {exc}", **kw)
        return BackendError(f"{where} failed: {type(exc).__name__}: {exc}", **kw)

    async def chat(
        self, request: ChatRequest, on_token: TokenCallback | None = None
    ) -> ChatResponse:
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                return await self._stream(request, on_token)
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self._translate(exc) from None

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
                        f"The embedding model {model!r} is not served at {self.base_url} "
                        f"({response.text[:200]}); set memory.embed_model to one it serves, or "
                        "unset it to retrieve by full text only.",
                        installed=[],
                        backend=self.name,
                        model=model,
                    )
                if response.status_code >= 400:
                    raise self._http_error(response)
                data = sorted(response.json()["data"], key=lambda d: d["index"])
                return [[float(x) for x in d["embedding"]] for d in data]
        except (asyncio.CancelledError, KeyboardInterrupt, BackendError):
            raise
        except Exception as exc:
            raise self._translate(exc) from None

    async def _stream(self, request: ChatRequest, on_token: TokenCallback | None) -> ChatResponse:
        client = self._get_client()
        headers = {CALLER_HEADER: request.caller}
        async with client.stream(
            "POST", "/chat/completions", json=self._body(request), headers=headers
        ) as response:
            if response.status_code >= 400:
                await response.aread()
                raise self._http_error(response)
            acc = _Accumulator()
            lines = first_within(response.aiter_lines(), self.timeouts.first_token_s)
            async for line in lines:
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return acc.result(self.name, self.model)
                await emit(on_token, acc.feed(json.loads(data)))
        raise StreamCut(
            f"OpenAI-compatible server at {self.base_url} ended the stream without [DONE]; "
            "the answer is incomplete and was not used.",
            backend=self.name,
            model=self.model,
        )

    def _http_error(self, response: httpx.Response) -> BackendError:
        try:
            payload = response.json()
            error = payload.get("error", payload)
            message = error.get("message", str(error)) if isinstance(error, dict) else str(error)
        except ValueError:
            message = response.text
        status = response.status_code
        if status == 404 and "model" in message.lower():
            return ModelNotFound(
                f"Model '{self.model}' not found at {self.base_url}: {message}. "
                "Set NOVABERG_OPENAI_MODEL to a model the server serves.",
                installed=[],
                backend=self.name,
                model=self.model,
            )
        return BackendHTTPError(
            f"OpenAI-compatible server at {self.base_url} answered HTTP {status}: {message}",
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
                str(err),
                fix="start the server or fix NOVABERG_OPENAI_URL / NOVABERG_OPENAI_KEY",
            )
        fix = "" if self.model in models or not models else "set NOVABERG_OPENAI_MODEL"
        return BackendStatus(
            self.name,
            self.model,
            True,
            f"OpenAI-compatible server at {self.base_url}",
            installed_models=models,
            fix=fix,
        )


class _Accumulator:
    """Collects the streamed deltas of one chat completion."""

    def __init__(self) -> None:
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
            for call in delta.get("tool_calls") or ():
                slot = self.tools.setdefault(call.get("index", 0), {"name": "", "arguments": ""})
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
