"""The Ollama backend through the official client against the test server: protocol quirks,
the runtime context (num_ctx, prompts cut silently) and the reachability check of auto mode."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator

import httpx
import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.guards import prompt_was_cut
from novaberg.backends.ollama import OllamaBackend
from novaberg.backends.select import choose_primary, make_backend
from novaberg.config import Timeouts, load_settings
from novaberg.errors import (
    BackendError,
    BackendHTTPError,
    BackendTimeout,
    BackendUnreachable,
    CapabilityError,
    ModelNotFound,
    StreamCut,
)
from novaberg.testing import OllamaTestServer, Reply, SearxngTestServer
from tests.conftest import MSG, TOOLS, closed_port_url


@pytest.fixture
async def backend(server: OllamaTestServer) -> AsyncIterator[OllamaBackend]:
    b = OllamaBackend(server.url, "qwen3:4b", Timeouts())
    yield b
    await b.aclose()


async def test_every_request_carries_its_caller_header(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    await backend.chat(ChatRequest(caller="router", messages=MSG))
    await backend.chat(ChatRequest(caller="judge_legal", messages=MSG))
    callers = [r.caller for r in server.requests()]
    assert callers == ["capabilities", "router", "judge_legal"]
    assert all(r.headers.get("x-novaberg-caller") for r in server.requests())


async def test_think_false_is_sent_explicitly_to_a_thinking_model(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    response = await backend.chat(ChatRequest(caller="router", messages=MSG, think=False))
    body = server.requests("/api/chat")[0].body
    assert "think" in body and body["think"] is False
    assert response.thinking == ""  # it would have thought had think been omitted


async def test_think_and_tools_are_never_sent_to_a_model_that_lacks_them(
    server: OllamaTestServer,
) -> None:
    small = OllamaBackend(server.url, "gemma3:270m", Timeouts())
    try:
        response = await small.chat(ChatRequest(caller="thinker", messages=MSG, think=True))
        assert response.content  # no 400: think was left out
        assert "think" not in server.requests("/api/chat")[0].body
        assert small.sent_think(ChatRequest(caller="thinker", messages=MSG, think=True)) is False
        with pytest.raises(CapabilityError, match="does not support tools"):
            await small.chat(ChatRequest(caller="thinker", messages=MSG, tools=TOOLS))
        assert len(server.requests("/api/chat")) == 1  # the tool request never went out
    finally:
        await small.aclose()


async def test_capabilities_are_read_once_and_cached(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    for _ in range(3):
        await backend.chat(ChatRequest(caller="router", messages=MSG))
    assert len(server.requests("/api/show")) == 1


async def test_thinking_is_carried_through_never_dropped(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("thinker", Reply(content="RESULT: OK", thinking="long reasoning " * 50))
    response = await backend.chat(ChatRequest(caller="thinker", messages=MSG, think=True))
    assert response.content == "RESULT: OK"
    assert response.thinking == "long reasoning " * 50
    assert response.backend == "ollama" and response.model == "qwen3:4b"
    assert response.eval_count > 0 and response.done_reason == "stop"


async def test_streamed_tokens_are_content_only(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="visible answer text", thinking="hidden thoughts"))
    pieces: list[str] = []
    await backend.chat(ChatRequest(caller="responder", messages=MSG, think=True), pieces.append)
    assert "".join(pieces) == "visible answer text"


async def test_unknown_model_error_lists_installed_models(server: OllamaTestServer) -> None:
    missing = OllamaBackend(server.url, "llama9:70b", Timeouts())
    try:
        with pytest.raises(ModelNotFound) as info:
            await missing.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await missing.aclose()
    assert "qwen3:4b" in info.value.installed and "gemma3:270m" in info.value.installed
    assert "ollama pull llama9:70b" in str(info.value)
    assert "qwen3:4b" in str(info.value)


async def test_unreachable_server_names_ollama_host() -> None:
    gone = OllamaBackend(closed_port_url(), "qwen3:4b", Timeouts())
    try:
        with pytest.raises(BackendUnreachable) as info:
            await gone.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await gone.aclose()
    assert "OLLAMA_HOST" in str(info.value) and info.value.retryable


async def test_error_line_mid_stream_is_a_retryable_backend_error(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply.error_mid_stream("some partial answer text", after_chunks=1))
    with pytest.raises(BackendHTTPError) as info:
        await backend.chat(ChatRequest(caller="responder", messages=MSG))
    assert info.value.status == -1 and info.value.retryable


async def test_stream_without_done_chunk_is_a_failed_call(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply.cut_stream("an answer cut short here", after_chunks=1))
    with pytest.raises(StreamCut, match="without its done chunk"):
        await backend.chat(ChatRequest(caller="responder", messages=MSG))


@pytest.mark.parametrize("status,retryable", [(500, True), (503, True), (400, False)])
async def test_http_errors_are_classified_for_retry(
    backend: OllamaBackend, server: OllamaTestServer, status: int, retryable: bool
) -> None:
    server.script("router", Reply.http_error(status))
    with pytest.raises(BackendHTTPError) as info:
        await backend.chat(ChatRequest(caller="router", messages=MSG))
    assert info.value.status == status and info.value.retryable is retryable


async def test_first_token_timeout(server: OllamaTestServer) -> None:
    slow = OllamaBackend(server.url, "qwen3:4b", Timeouts(first_token_s=0.2, total_s=5))
    await slow.capabilities()
    server.script("router", Reply(content="late", delay_s=1.0))
    try:
        with pytest.raises(BackendTimeout):
            await slow.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await slow.aclose()


async def test_total_timeout_bounds_a_slow_stream(server: OllamaTestServer) -> None:
    slow = OllamaBackend(server.url, "qwen3:4b", Timeouts(first_token_s=5, total_s=0.3))
    await slow.capabilities()
    server.script("responder", Reply(content="a long answer " * 20, chunk_delay_s=0.05))
    try:
        with pytest.raises(BackendTimeout):
            await slow.chat(ChatRequest(caller="responder", messages=MSG))
    finally:
        await slow.aclose()


async def test_embeddings_carry_the_caller_and_a_missing_embedder_says_how_to_fix_it(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    vectors = await backend.embed(["my sister Lena", "a boat"], "nomic-embed-text", "embed")
    assert len(vectors) == 2 and vectors[0] != vectors[1]
    [request] = server.requests("/api/embed")
    assert request.caller == "embed" and request.body["input"] == ["my sister Lena", "a boat"]
    with pytest.raises(BackendError, match="ollama pull no-such-embedder"):
        await backend.embed(["x"], "no-such-embedder", "embed")


# -- the runtime context: num_ctx on every chat, a cut prompt recognised ---------------------
LONG = [
    {"role": "system", "content": "You are Nova, a warm companion. " * 150},
    {"role": "user", "content": "hi"},
]


async def test_num_ctx_goes_out_on_every_chat(server: OllamaTestServer) -> None:
    b = OllamaBackend(server.url, "qwen3:4b", Timeouts(), num_ctx=2048)
    try:
        await b.chat(ChatRequest(caller="router", messages=MSG))
        await b.chat(ChatRequest(caller="responder", messages=MSG, temperature=0.2))
    finally:
        await b.aclose()
    options = [r.body["options"] for r in server.requests("/api/chat")]
    assert options == [{"num_ctx": 2048}, {"temperature": 0.2, "num_ctx": 2048}]


async def test_the_configured_backend_sends_limits_context_tokens(
    monkeypatch: pytest.MonkeyPatch, ollama_env: OllamaTestServer
) -> None:
    monkeypatch.setenv("NOVABERG_LIMITS__CONTEXT_TOKENS", "3000")
    backend = make_backend("ollama", load_settings().settings)
    try:
        await backend.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await backend.aclose()
    assert ollama_env.requests("/api/chat")[0].body["options"]["num_ctx"] == 3000


async def test_a_prompt_cut_to_the_context_is_marked_as_cut(server: OllamaTestServer) -> None:
    b = OllamaBackend(server.url, "qwen3:4b", Timeouts(), num_ctx=512)
    try:
        response = await b.chat(ChatRequest(caller="responder", messages=LONG))
    finally:
        await b.aclose()
    assert response.content  # Ollama answers anyway
    assert response.prompt_cut and response.prompt_eval_count == 512
    assert response.prompt_estimate > 1000
    assert [t.limit for t in server.truncations()] == [512]


async def test_a_server_that_caps_the_context_below_num_ctx_is_caught_too(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply.context_cut("an answer to half a prompt", context=256))
    response = await backend.chat(ChatRequest(caller="responder", messages=LONG))
    assert response.prompt_cut and response.prompt_eval_count == 256


async def test_a_prompt_that_fits_is_not_marked(server: OllamaTestServer) -> None:
    b = OllamaBackend(server.url, "qwen3:4b", Timeouts(), num_ctx=4096)
    try:
        response = await b.chat(ChatRequest(caller="responder", messages=LONG))
    finally:
        await b.aclose()
    assert not response.prompt_cut and server.truncations() == []
    assert response.prompt_eval_count > 0.75 * response.prompt_estimate


def test_cut_detection_needs_a_clear_shortfall() -> None:
    assert prompt_was_cut(estimate=5000, evaluated=4096, window=4096) is False  # within error
    assert prompt_was_cut(estimate=6000, evaluated=4096, window=4096) is True
    assert prompt_was_cut(estimate=6000, evaluated=0, window=4096) is False  # count missing
    assert prompt_was_cut(estimate=3000, evaluated=1200, window=4096) is True  # capped below
    assert prompt_was_cut(estimate=300, evaluated=100, window=None) is False  # too small to say


# -- auto mode: "unreachable" only when nothing answers --------------------------------------
async def test_reachable_through_public_api_only_for_connection_failures(
    server: OllamaTestServer,
) -> None:
    up = OllamaBackend(server.url, "qwen3:4b", Timeouts())
    down = OllamaBackend(closed_port_url(), "qwen3:4b", Timeouts())
    try:
        assert await up.reachable() is True
        assert await down.reachable() is False
    finally:
        await up.aclose()
        await down.aclose()


async def test_a_server_that_never_answers_is_unreachable_after_the_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (backlog), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(1)
        host = f"http://127.0.0.1:{silent.getsockname()[1]}"
        mute = OllamaBackend(host, "qwen3:4b", Timeouts())
        try:
            assert await mute.reachable(timeout_s=0.2) is False
        finally:
            await mute.aclose()


async def test_something_else_at_ollama_host_is_an_error_not_a_silent_switch(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    with SearxngTestServer() as other:  # answers HTTP, but 404 on Ollama's routes
        monkeypatch.setenv("OLLAMA_HOST", other.url)
        notices: list[str] = []
        with pytest.raises(BackendError, match="not as Ollama does"):
            await choose_primary(load_settings().settings, notices)
        assert notices == []


async def test_an_unexpected_error_in_the_check_surfaces(
    monkeypatch: pytest.MonkeyPatch, server: OllamaTestServer
) -> None:
    async def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a changed client")

    monkeypatch.setattr(httpx.AsyncClient, "send", broken)
    b = OllamaBackend(server.url, "qwen3:4b", Timeouts())
    try:
        with pytest.raises(RuntimeError, match="a changed client"):
            await b.reachable()
    finally:
        monkeypatch.undo()
        await b.aclose()


async def test_auto_mode_falls_back_to_the_embedded_model_only_when_nothing_answers() -> None:
    notices: list[str] = []
    primary = await choose_primary(load_settings().settings, notices)  # OLLAMA_HOST: closed
    assert primary.name == "embedded"
    assert notices and "not reachable" in notices[0]
