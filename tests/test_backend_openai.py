"""The OpenAI-compatible backend: reasoning normalised from all three shapes."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.openai_compat import OpenAICompatBackend
from novaberg.backends.reasoning import ThinkTagSplitter, split_think_tags
from novaberg.config import Timeouts
from novaberg.errors import BackendHTTPError, BackendUnreachable, ModelNotFound, StreamCut
from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import MSG, TOOLS, closed_port_url


@pytest.fixture
async def backend(server: OllamaTestServer) -> AsyncIterator[OpenAICompatBackend]:
    b = OpenAICompatBackend(server.url + "/v1", "qwen3:4b", "sk-test", Timeouts())
    yield b
    await b.aclose()


@pytest.mark.parametrize("style", ["reasoning", "reasoning_content", "think_tags"])
async def test_reasoning_lands_in_thinking_whatever_its_shape(
    backend: OpenAICompatBackend, server: OllamaTestServer, style: str
) -> None:
    server.script(
        "thinker",
        Reply(content="The answer is 4.", thinking="two plus two is four", reasoning_style=style),
    )  # type: ignore[arg-type]
    pieces: list[str] = []
    response = await backend.chat(ChatRequest(caller="thinker", messages=MSG), pieces.append)
    assert response.thinking == "two plus two is four"
    assert response.content == "The answer is 4."
    assert "".join(pieces).strip() == "The answer is 4."  # thinking never streams to the user
    assert response.backend == "openai" and response.model == "qwen3:4b"
    assert response.eval_count > 0


async def test_caller_header_and_api_key_are_sent(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    await backend.chat(ChatRequest(caller="salience", messages=MSG))
    request = server.requests("/v1/chat/completions")[0]
    assert request.caller == "salience"
    assert request.headers["authorization"] == "Bearer sk-test"


async def test_streamed_tool_calls_are_assembled(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("thinker", Reply.dropped_tool_call("web_search", {"query": "Berlin"}))
    response = await backend.chat(ChatRequest(caller="thinker", messages=MSG, tools=TOOLS))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("web_search", {"query": "Berlin"})
    ]


async def test_cut_stream_is_a_failed_call(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply.cut_stream("an answer that is cut off", after_chunks=1))
    with pytest.raises(StreamCut):
        await backend.chat(ChatRequest(caller="responder", messages=MSG))


async def test_error_event_mid_stream_is_a_backend_error(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply.error_mid_stream("an answer that breaks", after_chunks=1))
    with pytest.raises(BackendHTTPError, match="mid-stream"):
        await backend.chat(ChatRequest(caller="responder", messages=MSG))


async def test_unknown_model_and_http_errors(server: OllamaTestServer) -> None:
    wrong = OpenAICompatBackend(server.url + "/v1", "nope", None, Timeouts())
    try:
        with pytest.raises(ModelNotFound, match="NOVABERG_OPENAI_MODEL"):
            await wrong.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await wrong.aclose()
    right = OpenAICompatBackend(server.url + "/v1", "qwen3:4b", None, Timeouts())
    server.script("router", Reply.http_error(503))
    try:
        with pytest.raises(BackendHTTPError) as info:
            await right.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await right.aclose()
    assert info.value.status == 503 and info.value.retryable


async def test_unreachable_server_names_the_setting() -> None:
    gone = OpenAICompatBackend(closed_port_url() + "/v1", "m", None, Timeouts())
    with pytest.raises(BackendUnreachable, match="NOVABERG_OPENAI_URL"):
        await gone.chat(ChatRequest(caller="router", messages=MSG))


def test_think_tags_split_across_chunk_boundaries() -> None:
    splitter = ThinkTagSplitter()
    out = [splitter.feed(c) for c in ["Hi <th", "ink>sec", "ret</thi", "nk> there", " <"]]
    out.append(splitter.flush())
    content = "".join(c for c, _ in out)
    thinking = "".join(t for _, t in out)
    assert content == "Hi  there <"
    assert thinking == "secret"


def test_unclosed_think_block_keeps_everything_as_thinking() -> None:
    assert split_think_tags("<think>never closes") == ("", "never closes")
    assert split_think_tags("plain answer") == ("plain answer", "")


async def test_embeddings_come_in_input_order_and_an_unknown_model_is_clear(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    vectors = await backend.embed(
        ["my sister Lena", "Lena, my sister", "a boat"], "nomic-embed-text", "embed"
    )
    assert len(vectors) == 3 and vectors[0] == vectors[1] and vectors[0] != vectors[2]
    [request] = server.requests("/v1/embeddings")
    assert request.caller == "embed"
    with pytest.raises(ModelNotFound, match=r"embedding model 'no-such-embedder'.*embed_model"):
        await backend.embed(["x"], "no-such-embedder", "embed")
