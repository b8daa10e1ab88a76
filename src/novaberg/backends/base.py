"""The small contract every backend implements, and the one response type they all return."""

from __future__ import annotations

import asyncio
import contextvars
import inspect
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, NotRequired, TypedDict, TypeVar

from novaberg.errors import BackendError, CapabilityError
from novaberg.redaction import redact
from novaberg.telemetry import JsonMode

T = TypeVar("T")

TokenCallback = Callable[[str], Awaitable[None] | None]
"""Receives each piece of CONTENT as it streams in (thinking is never passed on)."""

CALLER_HEADER = "X-Novaberg-Caller"

current_caller: contextvars.ContextVar[str] = contextvars.ContextVar(
    "novaberg_caller", default="unknown"
)
"""The caller of the request being sent; every backend puts it in ``X-Novaberg-Caller``."""


async def emit(on_token: TokenCallback | None, piece: str) -> None:
    """Pass a content piece to the callback, awaiting it if it is a coroutine function."""
    if on_token is not None and piece:
        result = on_token(piece)
        if inspect.isawaitable(result):
            await result


async def first_within(items: AsyncIterator[T], seconds: float) -> AsyncIterator[T]:
    """The items of a stream; the first must arrive within ``seconds`` (else ``TimeoutError``)."""
    try:
        async with asyncio.timeout(seconds):  # no task of its own, unlike wait_for before 3.12
            first = await anext(items)
    except StopAsyncIteration:
        return
    yield first
    async for item in items:
        yield item


def addressless(error: BackendError, server: str) -> BackendError:
    """``error`` as anyone may read it: the address of ``server`` (the URL the backend was
    configured with) replaced by the backend's name wherever the message quotes it, userinfo
    gone (:func:`novaberg.redaction.redact`). Each backend passes every error it raises
    through here, at its one translation choke point."""
    error.args = (redact(str(error), server=server, name=error.backend or "backend"),)
    return error


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]


class ChatMessage(TypedDict):
    """One message of a chat request, in Ollama's shape (the OpenAI-compatible and embedded
    backends send it as it is)."""

    role: str
    """system, user, assistant or tool."""
    content: str
    tool_name: NotRequired[str]
    """A tool's result: the tool that gave it."""
    thinking: NotRequired[str]
    """An assistant message's reasoning, where a history carries it."""
    tool_calls: NotRequired[list[dict[str, Any]]]
    """An assistant message's tool calls (Ollama's ``{"function": {name, arguments}}``)."""


@dataclass(frozen=True)
class ChatRequest:
    """One LLM call as a node asks for it.

    ``think``: ``True`` to reason, ``False`` to forbid reasoning (sent EXPLICITLY to models that
    can think, since Ollama thinks when it is omitted), ``None`` to leave the model's default.
    ``json_schema``: ask for JSON output matching this schema (the caller still validates it).
    """

    caller: str
    messages: list[ChatMessage]
    think: bool | None = False
    tools: list[dict[str, Any]] = field(default_factory=list)
    json_schema: dict[str, Any] | None = None
    temperature: float | None = None
    max_tokens: int | None = None
    seed: int | None = None


@dataclass
class ChatResponse:
    """What a backend answered, whichever backend it was.

    ``backend`` and ``model`` name the ANSWERING backend and model, which may differ from the
    configured ones (a fallback answered, or the server reports another model name).
    Durations are nanoseconds as the server reported them (0 when unknown).
    """

    content: str
    thinking: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    eval_count: int = 0
    prompt_eval_count: int = 0
    total_duration: int = 0
    load_duration: int = 0
    prompt_eval_duration: int = 0
    eval_duration: int = 0
    done_reason: str = ""
    backend: str = ""
    model: str = ""
    json_mode: JsonMode = ""
    """How the request asked for JSON (``json_schema``, ``json_object``, ``prompt``), if it did."""
    prompt_estimate: int = 0
    """The backend's estimate of the prompt tokens it sent (0 when it made none)."""
    prompt_cut: bool = False
    """The server read far fewer prompt tokens than were sent: it cut the prompt silently."""
    host: str = ""
    """The server that answered, for a backend with several (``ollama_hosts``)."""


@dataclass(frozen=True)
class BackendStatus:
    """What ``novaberg doctor`` reports about one backend."""

    name: str
    model: str
    reachable: bool
    detail: str
    capabilities: tuple[str, ...] = ()
    installed_models: tuple[str, ...] = ()
    fix: str = ""


class Backend(ABC):
    """A model server Novaberg can send a chat call to.

    Every backend subclasses this. ``chat``, ``status`` and ``aclose`` are each backend's own;
    every optional part is declared here with what a backend without it does (as pydantic-ai's
    ``Model`` declares its optional methods), so callers use each part plainly and a type
    checker sees them all:

    ====================  =================================================================
    ``servers``           1; an Ollama pool (``ollama_hosts``) has one per host
    ``embeds``/``embed``  no embeddings endpoint: ``embed`` raises :class:`CapabilityError`
    ``capabilities``      ``None``: the protocol does not report the model's capabilities
    ``json_mode``         the schema goes out as it is (``json_schema``) when one is asked for
    ``sent_think``        ``False``: no ``think: true`` goes out
    ``context_claims``    ``(None, None)``: the server says nothing of the context window
    ====================  =================================================================

    ``chat`` sends exactly ONE request (retries are the model queue's job, so that each request
    is recorded) and raises a :class:`~novaberg.errors.BackendError` when it gets no answer.
    ``on_token`` receives content pieces as they stream in.
    """

    name: str
    model: str
    servers: int = 1
    """How many servers answer for this backend: the model queue gives it its concurrency
    limit once per server."""
    embeds: ClassVar[bool] = False
    """Whether :meth:`embed` reaches an embeddings endpoint; the model queue embeds with the
    primary backend only when it does."""

    @abstractmethod
    async def chat(
        self, request: ChatRequest, on_token: TokenCallback | None = None
    ) -> ChatResponse: ...

    @abstractmethod
    async def status(self) -> BackendStatus: ...

    @abstractmethod
    async def aclose(self) -> None: ...

    async def embed(self, texts: list[str], model: str, caller: str) -> list[list[float]]:
        """Embeddings of ``texts`` with ``model`` (an embedding model on this server), one
        request. Only a backend whose :attr:`embeds` is true has them."""
        raise CapabilityError(
            f"The {self.name} backend has no embeddings endpoint; unset memory.embed_model "
            "to embed in-process.",
            backend=self.name,
            model=model,
        )

    async def capabilities(self) -> tuple[str, ...] | None:
        """The model's capabilities as the server reports them (``thinking``, ``tools``, …),
        or ``None`` where the protocol does not report them. A backend that asks its server
        raises a :class:`~novaberg.errors.BackendError` when it cannot (unreachable, the
        model is not installed)."""
        return None

    def json_mode(self, request: ChatRequest) -> JsonMode:
        """How this request asks for JSON, if it does (recorded with the call)."""
        return "json_schema" if request.json_schema is not None else ""

    def sent_think(self, request: ChatRequest) -> bool:
        """Whether ``think: true`` goes out for this request (recorded as the call's
        ``think``)."""
        return False

    async def context_claims(self, caller: str) -> tuple[int | None, int | None]:
        """What the server says of the model's context window: the most the model could take,
        and the runtime context it is loaded with now; ``None`` where it does not say."""
        return None, None
