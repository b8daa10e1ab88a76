"""Ollama, through the official ``ollama`` AsyncClient.

Quirks handled here, once (see ../shared/OLLAMA.md):

* A model with the ``thinking`` capability thinks when ``think`` is omitted (since v0.12.4), so a
  call that must not think sends ``think: false`` EXPLICITLY. ``think`` and ``tools`` are never
  sent to a model whose ``/api/show`` capabilities lack them (cached per model).
* The client has no timeout and no retries by default: the connect and first-token timeouts are
  set on its httpx client, the total timeout wraps the whole call, and retries are the model
  queue's job (one request per :meth:`OllamaBackend.chat`, so each one is recorded).
* Errors after the first byte arrive as an ``{"error"}`` line with status 200 (the client raises
  ``ResponseError`` with status -1); a stream may end without its done chunk; a truncated last
  line surfaces as ``JSONDecodeError``. All are translated in :meth:`OllamaBackend._translate`.
* Every error leaves through that choke point, and names the backend, never its address: the
  message says "Ollama", and where it quotes the server or the client library, the address
  (userinfo included) is replaced by the name (:func:`~novaberg.backends.base.addressless`).
  Only the operator's views (``novaberg doctor``) show the address, without its userinfo.
* A prompt longer than the runtime context is cut from the head silently and answered anyway.
  ``num_ctx`` goes out on every chat (``limits.context_tokens``), and a ``prompt_eval_count``
  far below the estimate of what was sent marks the response as cut (outcome ``truncated``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import ollama

from novaberg.backends.base import (
    CALLER_HEADER,
    Backend,
    BackendStatus,
    ChatRequest,
    ChatResponse,
    TokenCallback,
    ToolCall,
    addressless,
    current_caller,
    emit,
    first_within,
)
from novaberg.backends.guards import estimate_prompt_tokens, prompt_was_cut, says_context_exceeded
from novaberg.backends.transport import as_httpx, transport
from novaberg.config import Timeouts
from novaberg.errors import (
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    BackendUnreachable,
    CapabilityError,
    ContextOverflow,
    ModelNotFound,
    StreamCut,
)
from novaberg.redaction import safe_url
from novaberg.telemetry import JsonMode

log = logging.getLogger("novaberg")


async def _stamp_caller(request: httpx.Request) -> None:
    request.headers[CALLER_HEADER] = current_caller.get()


class OllamaBackend(Backend):
    """Chat calls to one model on one Ollama server."""

    embeds = True

    def __init__(
        self, host: str, model: str, timeouts: Timeouts, num_ctx: int | None = None
    ) -> None:
        self.name = "ollama"
        self.model = model
        self.host = host
        self.timeouts = timeouts
        self.num_ctx = num_ctx
        """The runtime context asked for on every chat (``options.num_ctx``); ``None``: the
        server's default (4096 or 2048 tokens, whatever the model could do)."""
        self._capabilities: dict[str, tuple[str, ...]] = {}
        self._client: ollama.AsyncClient | None = None

    # -- the one choke point to the wire -------------------------------------------------
    def _get_client(self) -> ollama.AsyncClient:
        if self._client is None:
            timeout = httpx.Timeout(
                connect=self.timeouts.connect_s,
                read=self.timeouts.first_token_s,
                write=self.timeouts.connect_s,
                pool=self.timeouts.total_s,
            )
            self._client = ollama.AsyncClient(
                host=self.host,
                timeout=timeout,
                event_hooks={"request": [_stamp_caller]},
                transport=transport(),
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            client, self._client = self._client, None
            await client.close()  # type: ignore[no-untyped-call]  # untyped upstream

    def _translate(self, exc: BaseException) -> BackendError:
        """The error ``exc`` as it leaves this backend: one of the tree of
        :mod:`novaberg.errors`, naming the backend and never its address."""
        return addressless(self._classify(as_httpx(exc)), self.host)

    def _classify(self, exc: BaseException) -> BackendError:
        where = "Ollama"
        kw: dict[str, Any] = {"backend": self.name, "model": self.model}
        if isinstance(exc, BackendError):
            exc.backend, exc.model = exc.backend or self.name, exc.model or self.model
            return exc
        if isinstance(exc, ConnectionError | httpx.ConnectError):
            return BackendUnreachable(
                "The Ollama server is not reachable. Start it with `ollama serve`, or point "
                "OLLAMA_HOST at a running server, or set NOVABERG_BACKEND=embedded.",
                **kw,
            )
        if isinstance(exc, httpx.TimeoutException | TimeoutError):
            return BackendTimeout(
                f"{where} did not answer in time ({type(exc).__name__}). Raise the timeouts "
                "(`novaberg config`) or use a smaller model.",
                **kw,
            )
        if isinstance(exc, ollama.ResponseError):
            status = exc.status_code
            if says_context_exceeded(exc.error):
                return ContextOverflow(
                    f"The prompt exceeded the model's context window on {where} (the server "
                    f"said: {exc.error[:300]}). Raise limits.context_tokens (sent as num_ctx) "
                    "if the model can take more, or start a new conversation; the same request "
                    "is not sent again.",
                    **kw,
                )
            if status == -1:
                return BackendHTTPError(
                    f"{where} reported an error mid-stream: {exc.error}", status=-1, **kw
                )
            if status == 400 and "does not support" in exc.error:
                return CapabilityError(f"{where}: {exc.error}", **kw)
            return BackendHTTPError(
                f"{where} answered HTTP {status}: {exc.error}", status=status, **kw
            )
        if isinstance(exc, json.JSONDecodeError | httpx.RemoteProtocolError | httpx.ReadError):
            return StreamCut(f"{where} cut the stream: {exc}", **kw)
        return BackendError(f"{where} failed: {type(exc).__name__}: {exc}", **kw)

    async def _installed(self) -> list[str]:
        try:
            tags = await self._get_client().list()
        except Exception:
            return []
        return sorted(m.model for m in tags.models if m.model)

    async def _model_missing(self) -> ModelNotFound:
        installed = await self._installed()
        listed = ", ".join(installed) if installed else "none"
        return ModelNotFound(
            f"Model '{self.model}' is not installed on Ollama (installed: {listed}). "
            f"Run `ollama pull {self.model}` or set NOVABERG_MODEL to an installed model.",
            installed=installed,
            backend=self.name,
            model=self.model,
        )

    async def capabilities(self) -> tuple[str, ...]:
        """The model's capabilities from ``/api/show``, read once and cached."""
        if self.model not in self._capabilities:
            token = current_caller.set("capabilities")
            try:
                shown = await self._get_client().show(self.model)
            except ollama.ResponseError as exc:
                if exc.status_code == 404:
                    raise self._translate(await self._model_missing()) from None
                raise self._translate(exc) from None
            except Exception as exc:
                raise self._translate(exc) from None
            finally:
                current_caller.reset(token)
            self._capabilities[self.model] = tuple(shown.capabilities or ())
        return self._capabilities[self.model]

    # -- the contract ------------------------------------------------------------------
    async def _request_kwargs(self, request: ChatRequest) -> dict[str, Any]:
        caps = await self.capabilities()
        kwargs: dict[str, Any] = {"model": self.model, "messages": request.messages}
        if "thinking" in caps and request.think is not None:
            # Explicit on every call that says (every node does): omitted means "think" for
            # such a model. ``think=None`` leaves it out (the probe measures that default).
            kwargs["think"] = bool(request.think)
        if request.tools:
            if "tools" not in caps:
                raise CapabilityError(
                    f"Model '{self.model}' does not support tools (capabilities: "
                    f"{', '.join(caps) or 'none'}). Choose a model with tool support.",
                    backend=self.name,
                    model=self.model,
                )
            kwargs["tools"] = request.tools
        if request.json_schema is not None:
            kwargs["format"] = request.json_schema
        options: dict[str, Any] = {}
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.max_tokens is not None:
            options["num_predict"] = request.max_tokens
        if request.seed is not None:
            options["seed"] = request.seed
        if self.num_ctx is not None:
            options["num_ctx"] = self.num_ctx
        if options:
            kwargs["options"] = options
        return kwargs

    def sent_think(self, request: ChatRequest) -> bool:
        """Whether ``think: true`` goes out for this request (known after capabilities)."""
        caps = self._capabilities.get(self.model, ())
        return bool(request.think) and "thinking" in caps

    async def chat(
        self, request: ChatRequest, on_token: TokenCallback | None = None
    ) -> ChatResponse:
        token = current_caller.set(request.caller)
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                kwargs = await self._request_kwargs(request)
                stream = await self._get_client().chat(stream=True, **kwargs)
                response = await self._collect(stream, on_token)
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                raise self._translate(await self._model_missing()) from None
            raise self._translate(exc) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            current_caller.reset(token)
        response.prompt_estimate = estimate_prompt_tokens(request.messages, request.tools)
        response.prompt_cut = prompt_was_cut(
            response.prompt_estimate, response.prompt_eval_count, self.num_ctx
        )
        response.json_mode = self.json_mode(request)
        return response

    def json_mode(self, request: ChatRequest) -> JsonMode:
        """Structured requests go out with the schema as ``format`` (enforced by the server)."""
        return "json_schema" if request.json_schema is not None else ""

    async def embed(self, texts: list[str], model: str, caller: str) -> list[list[float]]:
        """``/api/embed`` for ``texts`` with ``model`` (an embedding model on this server)."""
        token = current_caller.set(caller)
        try:
            async with asyncio.timeout(self.timeouts.total_s):
                response = await self._get_client().embed(model=model, input=texts)
            return [list(v) for v in response.embeddings]
        except ollama.ResponseError as exc:
            if exc.status_code == 404:
                missing = BackendError(
                    f"The embedding model {model!r} is not installed on Ollama; "
                    f"run `ollama pull {model}` or unset memory.embed_model.",
                    backend=self.name,
                    model=model,
                )
                raise self._translate(missing) from None
            raise self._translate(exc) from None
        except (asyncio.CancelledError, KeyboardInterrupt):
            raise
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            current_caller.reset(token)

    async def _collect(
        self, stream: AsyncIterator[ollama.ChatResponse], on_token: TokenCallback | None
    ) -> ChatResponse:
        content: list[str] = []
        thinking: list[str] = []
        calls: list[ToolCall] = []
        iterator = stream.__aiter__()
        parts = first_within(iterator, self.timeouts.first_token_s)
        async for part in parts:
            message = part.message
            if message.thinking:
                thinking.append(message.thinking)
            if message.content:
                content.append(message.content)
                await emit(on_token, message.content)
            for call in message.tool_calls or ():
                calls.append(ToolCall(call.function.name, dict(call.function.arguments or {})))
            if part.done:
                await _finish(parts, iterator)
                return ChatResponse(
                    content="".join(content),
                    thinking="".join(thinking),
                    tool_calls=calls,
                    eval_count=part.eval_count or 0,
                    prompt_eval_count=part.prompt_eval_count or 0,
                    total_duration=part.total_duration or 0,
                    load_duration=part.load_duration or 0,
                    prompt_eval_duration=part.prompt_eval_duration or 0,
                    eval_duration=part.eval_duration or 0,
                    done_reason=part.done_reason or "",
                    backend=self.name,
                    model=part.model or self.model,
                )
        raise StreamCut(
            "Ollama ended the stream without its done chunk; "
            "the answer is incomplete and was not used.",
            backend=self.name,
            model=self.model,
        )

    async def context_claims(self, caller: str) -> tuple[int | None, int | None]:
        """What the server says of the model's context window: the most the model could take
        (``/api/show``'s ``model_info["<arch>.context_length"]``) and the runtime context it is
        loaded with now (``/api/ps``); ``None`` where the server does not say."""
        token = current_caller.set(caller)
        try:
            try:
                shown = await self._get_client().show(self.model)
            except ollama.ResponseError as exc:
                if exc.status_code == 404:  # /api/show's 404: the model is not there
                    raise self._translate(await self._model_missing()) from None
                raise self._translate(exc) from None
            try:
                loaded = await self._loaded()
            except ollama.ResponseError as exc:
                if exc.status_code != 404:
                    raise self._translate(exc) from None
                # a server without /api/ps (some proxies and emulations): the loaded context
                # is not known, and the model is not missing for it
                log.debug("the server has no /api/ps; the loaded context is not known")
                loaded = None
        except BackendError:
            raise
        except Exception as exc:
            raise self._translate(exc) from None
        finally:
            current_caller.reset(token)
        info = shown.modelinfo or {}
        claimed = next(
            (int(v) for k, v in info.items() if k.endswith(".context_length") and v), None
        )
        models = loaded.models if loaded is not None else []
        running = next((m.context_length for m in models if m.model == self.model), None)
        return claimed, running or None

    async def _loaded(self) -> Any:
        """``GET /api/ps`` (the models loaded now, with their runtime context), through the
        client's public API; its errors are the caller's to classify."""
        return await self._get_client().ps()

    async def status(self) -> BackendStatus:
        token = current_caller.set("doctor")
        try:
            loaded = await self._loaded()
        except Exception as exc:
            err = self._translate(exc)
            detail = f"{err} (at {safe_url(self.host)})"
            return BackendStatus(self.name, self.model, False, detail, fix=_fix_for(err))
        finally:
            current_caller.reset(token)
        detail = f"Ollama at {safe_url(self.host)}"
        running = [m for m in loaded.models if m.model == self.model and m.context_length]
        if running:
            detail += f"; {self.model} is loaded with a {running[0].context_length}-token context"
        installed = tuple(await self._installed())
        try:
            caps = await self.capabilities()
        except BackendError as exc:
            return BackendStatus(
                self.name,
                self.model,
                True,
                f"{detail}; {exc}",
                installed_models=installed,
                fix=_fix_for(exc),
            )
        return BackendStatus(
            self.name, self.model, True, detail, capabilities=caps, installed_models=installed
        )

    async def reachable(self, timeout_s: float = 1.0) -> bool:
        """Whether an Ollama server answers at ``host`` (``auto`` mode), by ``GET /api/ps``.

        Only a failed connection or a timeout means "not reachable". Something that answers, but
        not as Ollama does, raises a :class:`BackendError` that says so; any other error is a
        bug and surfaces as it is, never silently turned into "use the embedded model".
        """
        token = current_caller.set("probe")
        try:
            async with asyncio.timeout(timeout_s):
                await self._loaded()
            return True
        except Exception as raw:
            exc = as_httpx(raw)  # aiohttp's errors, as httpx's own transport raised them
            if isinstance(
                exc, ConnectionError | httpx.ConnectError | httpx.TimeoutException | TimeoutError
            ):
                return False
            if not isinstance(exc, ollama.ResponseError | httpx.HTTPError | ValueError):
                raise
            detail = (
                f"HTTP {exc.status_code}"
                if isinstance(exc, ollama.ResponseError)
                else type(exc).__name__
            )
            odd = BackendError(
                f"Something answers at OLLAMA_HOST, but not as Ollama does ({detail}). Point "
                "OLLAMA_HOST at an Ollama server, or set NOVABERG_BACKEND to the backend you "
                "want.",
                backend=self.name,
                model=self.model,
            )
            raise self._translate(odd) from None
        finally:
            current_caller.reset(token)


async def _finish(rest: AsyncIterator[Any], stream: AsyncIterator[Any]) -> None:
    """Read ``rest`` to its end after the done chunk, so the connection goes back to the pool
    for the next call; if that fails or takes long, ``stream`` is closed (and so is the
    connection)."""
    try:
        async with asyncio.timeout(1.0):
            async for _ in rest:
                pass
    except Exception:  # a timeout or a broken tail
        closer = getattr(stream, "aclose", None)
        if closer is not None:
            await closer()


def _fix_for(err: BackendError) -> str:
    if isinstance(err, ModelNotFound):
        return f"ollama pull {err.model}  (or set NOVABERG_MODEL to an installed model)"
    if isinstance(err, BackendUnreachable):
        return "start Ollama (`ollama serve`), fix OLLAMA_HOST, or set NOVABERG_BACKEND=embedded"
    return "see the detail above"
