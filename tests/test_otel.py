"""OpenTelemetry spans of real turns (engine, graph, queue, Ollama test server), caught by the
SDK's in-memory exporter: a span per turn and per node, a GenAI client span per request sent,
their parent/child structure and attributes, no message text unless the user opts in, and
nothing at all (nor a crash) when it is off or not installed."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any, ClassVar

import pytest
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from novaberg import otel
from novaberg.config import Settings, load_settings
from novaberg.engine import Engine
from novaberg.telemetry import Trace
from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import closed_port_url

WORD = "Quokkafest"
"""A distinctive word of the user's message: it must appear in no exported span by default."""
REPLY = "Ein Quokka-Fest klingt wunderbar, erzähl mehr!"
CHECK = Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True}))


@pytest.fixture
def exported() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    otel.install(provider)
    try:
        yield exporter
    finally:
        otel.uninstall()
        provider.shutdown()


def by_name(spans: tuple[ReadableSpan, ...], prefix: str) -> list[ReadableSpan]:
    return [s for s in spans if s.name.startswith(prefix)]


def parent_of(span: ReadableSpan, spans: tuple[ReadableSpan, ...]) -> ReadableSpan | None:
    if span.parent is None:
        return None
    return next(s for s in spans if s.context.span_id == span.parent.span_id)


def everything_exported(spans: tuple[ReadableSpan, ...]) -> str:
    """Every name, attribute, event and status text of the spans, as one string."""
    parts: list[Any] = []
    for s in spans:
        parts += [s.name, dict(s.attributes or {}), s.status.description]
        parts += [(e.name, dict(e.attributes or {})) for e in s.events]
        parts += [dict(s.resource.attributes)]
    return json.dumps(parts, ensure_ascii=False, default=str)


async def test_a_turn_is_a_span_with_a_span_per_node_and_a_client_span_per_request(
    engine: Engine, server: OllamaTestServer, exported: InMemorySpanExporter
) -> None:
    server.script("responder", Reply(content=REPLY))
    result = await engine.run_turn(f"Ich plane ein {WORD} am Samstag.")
    spans = exported.get_finished_spans()
    [turn] = by_name(spans, "novaberg.turn")
    assert turn.parent is None
    assert turn.attributes is not None
    assert turn.attributes["gen_ai.conversation.id"] == str(result.conversation_id)
    assert turn.attributes["novaberg.turn.id"] == result.turn_id
    assert turn.attributes["novaberg.origin"] == "user"
    assert turn.attributes["novaberg.tribunal.rounds"] == 1
    nodes = by_name(spans, "novaberg.node ")
    assert [n.name.removeprefix("novaberg.node ") for n in nodes] == result.trace.nodes
    assert all(parent_of(n, spans) is turn for n in nodes)

    calls = [s for s in spans if s.kind == SpanKind.CLIENT]
    assert len(calls) == len(result.trace.calls) == 6
    by_caller = {s.attributes["novaberg.caller"]: s for s in calls if s.attributes}
    assert set(by_caller) == {c.caller for c in result.trace.calls}
    for record in result.trace.calls:
        span = by_caller[record.caller]
        node = parent_of(span, spans)
        assert node is not None and node.attributes is not None
        expected_node = "tribunal" if record.caller.startswith("judge_") else record.caller
        assert node.attributes["novaberg.node"] == expected_node
        assert span.name == "chat qwen3:4b"
        expected = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": "ollama",
            "gen_ai.request.model": "qwen3:4b",
            "gen_ai.response.model": record.model,
            "gen_ai.usage.input_tokens": record.prompt_eval_count,
            "gen_ai.usage.output_tokens": record.eval_count,
            "gen_ai.conversation.id": str(result.conversation_id),
            "novaberg.caller": record.caller,
            "novaberg.outcome": "ok",
            "novaberg.normalizer": "",
            "novaberg.attempt": 1,
        }
        attributes = dict(span.attributes or {})
        assert {k: attributes.get(k) for k in expected} == expected
        assert record.eval_count > 0 and record.prompt_eval_count > 0
        assert "error.type" not in (span.attributes or {})
        assert span.status.status_code == StatusCode.UNSET
        assert span.end_time is not None and span.start_time is not None
        assert node.start_time is not None and node.end_time is not None
        assert node.start_time <= span.start_time <= span.end_time <= node.end_time
        assert abs((span.end_time - span.start_time) / 1e6 - record.ms) < 1.0


async def test_no_message_text_is_exported_by_default(
    engine: Engine, server: OllamaTestServer, exported: InMemorySpanExporter
) -> None:
    """Not the message, not the reply, not a server's error body quoting the prompt."""
    server.script("responder", Reply(content=REPLY))
    server.script("judge_legal", *[Reply.http_error(500, f"cannot judge '{WORD}'")] * 3)
    await engine.run_turn(f"Ich plane ein {WORD} am Samstag.")
    spans = exported.get_finished_spans()
    text = everything_exported(spans)
    assert WORD not in text and "Quokka-Fest" not in text
    assert "gen_ai.input.messages" not in text and "gen_ai.output.messages" not in text
    failed = [s for s in spans if (s.attributes or {}).get("novaberg.caller") == "judge_legal"]
    assert [(s.attributes or {}).get("error.type") for s in failed] == ["BackendHTTPError"] * 3
    assert [s.status.status_code for s in failed] == [StatusCode.ERROR] * 3
    assert {s.status.description for s in failed} == {"HTTP 500"}


async def test_message_text_is_exported_when_the_user_opts_in(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NOVABERG_TELEMETRY__EXPORT_TEXT", "true")
    settings = load_settings().settings
    assert settings.telemetry.export_text is True
    exported = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exported))
    otel.install(provider, export_text=settings.telemetry.export_text)
    engine = await Engine.open(settings)
    try:
        ollama_env.script("responder", Reply(content=REPLY))
        await engine.run_turn(f"Ich plane ein {WORD} am Samstag.")
    finally:
        await engine.aclose()
        otel.uninstall()
        provider.shutdown()
    spans = exported.get_finished_spans()
    [turn] = by_name(spans, "novaberg.turn")
    assert (turn.attributes or {})["novaberg.user_text"] == f"Ich plane ein {WORD} am Samstag."
    assert (turn.attributes or {})["novaberg.reply"] == REPLY
    [responder] = [s for s in spans if (s.attributes or {}).get("novaberg.caller") == "responder"]
    attributes = responder.attributes or {}
    sent = json.loads(str(attributes["gen_ai.input.messages"]))
    assert sent[-1]["role"] == "user"
    assert sent[-1]["parts"] == [{"type": "text", "content": f"Ich plane ein {WORD} am Samstag."}]
    [answer] = json.loads(str(attributes["gen_ai.output.messages"]))
    assert answer["role"] == "assistant"
    assert {"type": "text", "content": REPLY} in answer["parts"]


async def test_client_spans_carry_the_outcome_the_node_recorded(
    engine: Engine, server: OllamaTestServer, exported: InMemorySpanExporter
) -> None:
    """Malformed JSON and the thinker's case 2 are known only after the queue returned."""
    server.standing("router", CHECK)
    server.script("router", Reply(content="not json"))
    server.script("responder", Reply.http_error(500), Reply(content="It is 2,962 m."))
    server.script("thinker", Reply.thinking_swallowed_answer("Prose only, no decision."))
    server.script("thinker_nachfass", Reply(content="RESULT: OK"))
    result = await engine.run_turn("How high is the Zugspitze?")
    spans = exported.get_finished_spans()
    seen = [
        (
            a["novaberg.caller"],
            a["novaberg.attempt"],
            a["novaberg.outcome"],
            a["novaberg.normalizer"],
            a.get("error.type"),
        )
        for s in spans
        if s.kind == SpanKind.CLIENT
        and (a := dict(s.attributes or {}))
        and not str(a["novaberg.caller"]).startswith("judge_")
    ]
    assert seen == [
        ("router", 1, "malformed", "", None),
        ("router", 1, "ok", "", None),
        ("responder", 1, "error", "", "BackendHTTPError"),
        ("responder", 2, "ok", "", None),
        ("thinker", 1, "think_split_prose", "think_split", None),
        ("thinker_nachfass", 1, "ok", "", None),
        ("salience", 1, "ok", "", None),
    ]
    recorded = [
        (c.caller, c.attempt, c.outcome, c.normalizer)
        for c in result.trace.calls
        if not c.caller.startswith("judge_")
    ]
    assert [s[:4] for s in seen] == recorded
    [turn] = by_name(spans, "novaberg.turn")
    assert (turn.attributes or {})["novaberg.thinker.result"] == "ok"


async def test_a_failed_turn_ends_its_spans_with_the_kind_of_error_only(
    engine: Engine, server: OllamaTestServer, exported: InMemorySpanExporter
) -> None:
    server.script("responder", *[Reply.http_error(500, f"no '{WORD}' here")] * 3)
    with pytest.raises(Exception, match="responder"):
        await engine.run_turn(f"Ich plane ein {WORD}.")
    spans = exported.get_finished_spans()
    [turn] = by_name(spans, "novaberg.turn")
    [responder] = by_name(spans, "novaberg.node responder")
    for span in (turn, responder):
        assert span.status.status_code == StatusCode.ERROR
        assert (span.attributes or {})["error.type"] == "BackendHTTPError"
        assert span.events == ()  # no exception event: its message may quote a prompt
    assert WORD not in everything_exported(spans)


async def test_embeddings_are_client_spans_too(
    engine: Engine, exported: InMemorySpanExporter
) -> None:
    trace = Trace()
    vectors = await engine.queue.embed(["hello"], "nomic-embed-text", caller="embed", trace=trace)
    assert vectors is not None
    [span] = exported.get_finished_spans()
    attributes = dict(span.attributes or {})
    assert span.name == "embeddings nomic-embed-text" and span.kind == SpanKind.CLIENT
    assert attributes["gen_ai.operation.name"] == "embeddings"
    assert attributes["gen_ai.request.model"] == "nomic-embed-text"
    assert attributes["novaberg.caller"] == "embed" and attributes["novaberg.outcome"] == "ok"
    assert span.parent is None  # outside a turn


async def test_off_by_default_no_tracer_and_no_spans(
    engine: Engine, server: OllamaTestServer
) -> None:
    exporter = InMemorySpanExporter()
    assert otel.TRACER is None  # no endpoint in the environment
    await engine.run_turn("Hallo")
    assert exporter.get_finished_spans() == ()
    assert otel.TRACER is None


def test_an_endpoint_without_the_extra_is_a_notice_not_a_crash(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", closed_port_url())
    monkeypatch.setitem(sys.modules, "opentelemetry.exporter.otlp.proto.http.trace_exporter", None)
    notices: list[str] = []
    otel.configure(settings, notices)
    assert otel.TRACER is None
    assert len(notices) == 1 and "pip install 'novaberg[otel]'" in notices[0]


def test_an_endpoint_with_the_extra_switches_export_on(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", closed_port_url())
    notices: list[str] = []
    try:
        otel.configure(settings, notices)
        assert otel.TRACER is not None and notices == []
        assert otel.EXPORT_TEXT is False
    finally:
        provider = otel._provider
        otel.uninstall()
        if provider is not None:
            provider.shutdown()


def test_otel_sdk_disabled_keeps_it_off(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", closed_port_url())
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    otel.configure(settings, [])
    assert otel.TRACER is None


class _Collector(http.server.BaseHTTPRequestHandler):
    """An OTLP/HTTP receiver: keeps the body of every POST to /v1/traces."""

    bodies: ClassVar[list[bytes]] = []

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", "0"))
        if self.path == "/v1/traces":
            self.bodies.append(self.rfile.read(length))
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        return


def test_novaberg_ask_exports_its_spans_to_the_otlp_endpoint(
    ollama_env: OllamaTestServer,
) -> None:
    """The whole path as a user has it: the environment variable, the OTLP/HTTP exporter, the
    flush at the end of the command."""
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    _Collector.bodies = []
    collector = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    thread = threading.Thread(target=collector.serve_forever, daemon=True)
    thread.start()
    try:
        endpoint = f"http://127.0.0.1:{collector.server_address[1]}"
        done = subprocess.run(
            [sys.executable, "-m", "novaberg", "ask", f"Hallo {WORD}"],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint},
        )
    finally:
        collector.shutdown()
        collector.server_close()
    assert done.returncode == 0, done.stderr
    names: list[str] = []
    resource: dict[str, str] = {}
    for body in _Collector.bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for spans in request.resource_spans:
            resource |= {a.key: a.value.string_value for a in spans.resource.attributes}
            names += [s.name for scope in spans.scope_spans for s in scope.spans]
    assert resource["service.name"] == "novaberg"
    assert names.count("novaberg.turn") == 1
    assert "novaberg.node responder" in names and "chat qwen3:4b" in names
    assert WORD.encode() not in b"".join(_Collector.bodies)


async def test_background_job_spans_carry_the_outcome_the_job_recorded(
    ollama_env: OllamaTestServer, monkeypatch: pytest.MonkeyPatch, exported: InMemorySpanExporter
) -> None:
    """A job marks unusable JSON after the queue returned, as a node does."""
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    engine = await Engine.open(load_settings().settings)
    try:
        ollama_env.script(
            "salience", Reply(content=json.dumps({"score": 0.9, "summary": "Ada plans a fest."}))
        )
        await engine.run_turn(f"Ich plane ein {WORD}.")
        ollama_env.standing("consolidate", Reply(content="not json"))
        ollama_env.standing("profile_adaptive", Reply(content="not json"))
        await engine.finish_background()
    finally:
        await engine.aclose()
    spans = exported.get_finished_spans()
    [jobs] = by_name(spans, "novaberg.background_jobs")
    consolidate = [s for s in spans if (s.attributes or {}).get("novaberg.caller") == "consolidate"]
    assert [(s.attributes or {})["novaberg.outcome"] for s in consolidate] == ["malformed"] * 2
    assert all(parent_of(s, spans) is jobs for s in consolidate)
