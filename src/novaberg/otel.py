"""OpenTelemetry: a span per turn, per node, and a GenAI client span per model request.

Off unless ``OTEL_EXPORTER_OTLP_ENDPOINT`` (or ``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``) is set and
the ``otel`` extra is installed (:func:`configure`; without the extra a notice says so). While
off, :data:`TRACER` is ``None`` and every hook is one ``is None`` test: no OpenTelemetry module
is imported, no span object made.

Spans (names and attributes after the OpenTelemetry GenAI semantic conventions)::

    novaberg.turn                         gen_ai.conversation.id, novaberg.turn.id, …
    └── novaberg.node <name>              novaberg.node
        └── chat <model>  (CLIENT)        gen_ai.* and novaberg.caller/outcome/normalizer/attempt

A model request's span is made when its response (or failure) is in, with the request's real
start and end times, and ended when its node ends: nodes mark a call after the queue returned it
(malformed JSON, the thinking normaliser's case 1 or 2), so the span carries the outcome that
was recorded. Background jobs' requests end with a ``novaberg.background_jobs`` span in the same
way; a request outside both ends at once.

No text leaves the process unless ``telemetry.export_text`` is true: then the request's messages
(``gen_ai.input.messages``), the answer (``gen_ai.output.messages``), and the turn's message and
reply. Failures are exported as their kind (``error.type`` = the exception's class, the status
description = :func:`~novaberg.errors.error_kind`), never as an error's message, which may quote
a server's body and so a prompt.
"""

from __future__ import annotations

import atexit
import json
import logging
import os
import time
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar

from novaberg.errors import error_kind

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.trace import Span, Tracer

    from novaberg.backends.base import ChatRequest, ChatResponse
    from novaberg.config import Settings
    from novaberg.telemetry import CallRecord

T = TypeVar("T")
log = logging.getLogger("novaberg")

TRACER: Tracer | None = None
"""The tracer while OpenTelemetry is on; ``None`` (the default) means off."""
EXPORT_TEXT = False
"""Whether spans carry message text (``telemetry.export_text``)."""

PROVIDERS = {"ollama": "ollama", "openai": "openai", "embedded": "llama.cpp"}
"""``gen_ai.provider.name`` per backend (the embedded backend runs llama.cpp)."""
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
TIMEOUT_VARIABLES = ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
EXPORT_TIMEOUT_S = 2.0
"""The exporter's time for one export, retries included, unless the environment sets one."""

_provider: TracerProvider | None = None
_conversation: ContextVar[int | None] = ContextVar("novaberg_otel_conversation", default=None)
_pending: ContextVar[list[tuple[Span, CallRecord, int]] | None] = ContextVar(
    "novaberg_otel_pending", default=None
)


# -- switching on and off ----------------------------------------------------------------
def configure(settings: Settings, notices: list[str]) -> None:
    """Switch export on from the environment, once per process: a no-op when no endpoint is
    set (or ``OTEL_SDK_DISABLED=true``), a notice when the ``otel`` extra is missing."""
    if TRACER is not None:
        return
    endpoint = next((os.environ[v] for v in ENDPOINT_VARIABLES if os.environ.get(v)), None)
    if endpoint is None or os.environ.get("OTEL_SDK_DISABLED", "").lower() == "true":
        return
    try:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError:
        notices.append(
            "OTEL_EXPORTER_OTLP_ENDPOINT is set, but OpenTelemetry is not installed, so no "
            "spans are exported; install it with: pip install 'novaberg[otel]'"
        )
        return
    from novaberg import __version__

    attributes: dict[str, str] = {"service.version": __version__}
    if not os.environ.get("OTEL_SERVICE_NAME"):
        attributes["service.name"] = "novaberg"
    provider = TracerProvider(resource=Resource.create(attributes))
    # A collector that is down must not hold a command for the SDK's default 10 s at exit.
    own_timeout = any(os.environ.get(v) for v in TIMEOUT_VARIABLES)
    exporter = OTLPSpanExporter(timeout=None if own_timeout else EXPORT_TIMEOUT_S)
    provider.add_span_processor(BatchSpanProcessor(exporter))
    install(provider, export_text=settings.telemetry.export_text)
    atexit.register(provider.shutdown)
    log.info("OpenTelemetry: spans are exported over OTLP/HTTP (endpoint from the environment)")


def install(provider: TracerProvider, *, export_text: bool = False) -> None:
    """Export spans through ``provider`` (tests and benchmarks install their own)."""
    global TRACER, EXPORT_TEXT, _provider
    from novaberg import __version__

    _provider = provider
    EXPORT_TEXT = export_text
    TRACER = provider.get_tracer("novaberg", __version__)


def uninstall() -> None:
    """Off again (spans already made are left to their provider)."""
    global TRACER, EXPORT_TEXT, _provider
    TRACER = None
    EXPORT_TEXT = False
    _provider = None


def flush(timeout_ms: int = int(EXPORT_TIMEOUT_S * 1000)) -> None:
    """Hand the finished spans to the exporter now (at the end of a command)."""
    if _provider is not None:
        _provider.force_flush(timeout_ms)


# -- turns and nodes ---------------------------------------------------------------------
async def turn(
    work: Awaitable[T],
    *,
    turn_id: int,
    conversation_id: int,
    origin: str,
    text: str,
) -> T:
    """Await one turn's graph run inside a ``novaberg.turn`` span (when on)."""
    tracer = TRACER
    if tracer is None:
        return await work
    from opentelemetry.trace import SpanKind

    attributes: dict[str, Any] = {
        "gen_ai.conversation.id": str(conversation_id),
        "novaberg.turn.id": turn_id,
        "novaberg.origin": origin,
    }
    if EXPORT_TEXT:
        attributes["novaberg.user_text"] = text
    token = _conversation.set(conversation_id)
    try:
        with tracer.start_as_current_span(
            "novaberg.turn",
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                output = await work
            except BaseException as exc:
                _failed(span, exc)
                raise
            _describe_turn(span, output)
            return output
    finally:
        _conversation.reset(token)


def _describe_turn(span: Span, output: Any) -> None:
    if not isinstance(output, dict):
        return
    # the turn's channels (novaberg.graph.channels, a layer above this one), read by name
    result = getattr(output.get("thinker"), "result", None)
    if isinstance(result, str):
        span.set_attribute("novaberg.thinker.result", result)
    rounds = getattr(output.get("tribunal"), "rounds", None)
    if isinstance(rounds, int):
        span.set_attribute("novaberg.tribunal.rounds", rounds)
    reply = output.get("reply")
    if isinstance(reply, str):
        span.set_attribute("novaberg.reply_chars", len(reply))
        if EXPORT_TEXT:
            span.set_attribute("novaberg.reply", reply)


async def node(name: str, work: Awaitable[T]) -> T:
    """Run one node inside a ``novaberg.node <name>`` span (when on); the model requests made
    inside it are ended with it, carrying the outcome the node recorded."""
    if TRACER is None:
        return await work
    return await _scope(f"novaberg.node {name}", {"novaberg.node": name}, work)


async def background(work: Awaitable[T]) -> T:
    """Run waiting background jobs inside a ``novaberg.background_jobs`` span (when on): their
    model requests end with it, carrying the outcome each job recorded."""
    if TRACER is None:
        return await work
    return await _scope("novaberg.background_jobs", {}, work)


async def _scope(span_name: str, attributes: dict[str, Any], work: Awaitable[T]) -> T:
    tracer = TRACER
    if tracer is None:
        return await work
    from opentelemetry.trace import SpanKind

    pending: list[tuple[Span, CallRecord, int]] = []
    token = _pending.set(pending)
    try:
        with tracer.start_as_current_span(
            span_name,
            kind=SpanKind.INTERNAL,
            attributes=attributes,
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                return await work
            except BaseException as exc:
                _failed(span, exc)
                raise
            finally:
                for call_span, record, end in pending:
                    _finish(call_span, record, end)
    finally:
        _pending.reset(token)


def _failed(span: Span, exc: BaseException) -> None:
    from opentelemetry.trace import Status, StatusCode

    span.set_attribute("error.type", type(exc).__name__)
    span.set_status(Status(StatusCode.ERROR, error_kind(exc)))


# -- model requests ----------------------------------------------------------------------
def model_call(
    record: CallRecord,
    request_model: str,
    *,
    request: ChatRequest | None = None,
    response: ChatResponse | None = None,
    error: BaseException | None = None,
    operation: str = "chat",
) -> None:
    """A GenAI client span for one request sent (``record`` is filled in as far as the queue
    knows); a no-op while off."""
    tracer = TRACER
    if tracer is None:
        return
    from opentelemetry.trace import SpanKind

    end = time.time_ns()
    start = end - int(record.ms * 1e6)
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": operation,
        "gen_ai.provider.name": PROVIDERS.get(record.backend, record.backend),
        "gen_ai.request.model": request_model,
        "novaberg.caller": record.caller,
        "novaberg.attempt": record.attempt,
        "novaberg.backend": record.backend,
        "novaberg.think": record.think,
        "novaberg.queue_wait_ms": round(record.queue_wait_ms, 3),
    }
    conversation = _conversation.get()
    if conversation is not None:
        attributes["gen_ai.conversation.id"] = str(conversation)
    if response is not None:
        attributes["gen_ai.response.model"] = record.model
        attributes["gen_ai.usage.input_tokens"] = record.prompt_eval_count
        attributes["gen_ai.usage.output_tokens"] = record.eval_count
        if response.done_reason:
            attributes["gen_ai.response.finish_reasons"] = (response.done_reason,)
    if request is not None and request.max_tokens is not None:
        attributes["gen_ai.request.max_tokens"] = request.max_tokens
    if EXPORT_TEXT:
        if request is not None:
            attributes["gen_ai.input.messages"] = _input_messages(request)
        if response is not None:
            attributes["gen_ai.output.messages"] = _output_messages(response)
    span = tracer.start_span(
        f"{operation} {request_model}",
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=start,
    )
    if error is not None:
        _failed(span, error)
    pending = _pending.get()
    if pending is None:
        _finish(span, record, end)
    else:
        pending.append((span, record, end))


def _finish(span: Span, record: CallRecord, end: int) -> None:
    """The attributes a node may still change after the queue returned, then the end."""
    span.set_attributes(
        {
            "novaberg.outcome": record.outcome,
            "novaberg.normalizer": record.normalizer,
            "novaberg.content_len": record.content_len,
            "novaberg.thinking_len": record.thinking_len,
            "novaberg.tool_calls": record.tool_calls,
            "novaberg.json_mode": record.json_mode,
        }
    )
    span.end(end_time=end)


def _input_messages(request: ChatRequest) -> str:
    """The request's messages in the GenAI conventions' shape, as a JSON string."""
    out = []
    for message in request.messages:
        content = message.get("content")
        parts = [{"type": "text", "content": content}] if isinstance(content, str) else []
        out.append({"role": str(message.get("role", "")), "parts": parts})
    return json.dumps(out, ensure_ascii=False)


def _output_messages(response: ChatResponse) -> str:
    parts: list[dict[str, Any]] = []
    if response.thinking:
        parts.append({"type": "reasoning", "content": response.thinking})
    if response.content:
        parts.append({"type": "text", "content": response.content})
    for call in response.tool_calls:
        parts.append({"type": "tool_call", "name": call.name, "arguments": call.arguments})
    message = {"role": "assistant", "parts": parts, "finish_reason": response.done_reason}
    return json.dumps([message], ensure_ascii=False, default=str)
