"""The OpenAI-compatible backend: reasoning normalised from all three shapes; what servers
refuse (a structured-output shape, a prompt longer than the context) is learned or reported,
never retried unchanged."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.chain import BackendChain
from novaberg.backends.openai_compat import OpenAICompatBackend
from novaberg.backends.reasoning import ThinkTagSplitter, split_think_tags
from novaberg.config import Retries, Timeouts
from novaberg.errors import (
    BackendHTTPError,
    BackendUnreachable,
    ContextOverflow,
    ModelNotFound,
    StreamCut,
)
from novaberg.queue import ModelQueue
from novaberg.telemetry import Trace
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
    with pytest.raises(StreamCut, match="without \\[DONE\\]"):
        await backend.chat(ChatRequest(caller="responder", messages=MSG), [].append)
    server.script("router", Reply.cut_stream("a whole answer cut off", after_chunks=1))
    with pytest.raises(StreamCut):  # not streamed: the body ends early
        await backend.chat(ChatRequest(caller="router", messages=MSG))


async def test_error_event_mid_stream_is_a_backend_error(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply.error_mid_stream("an answer that breaks", after_chunks=1))
    with pytest.raises(BackendHTTPError, match="mid-stream"):
        await backend.chat(ChatRequest(caller="responder", messages=MSG), [].append)


async def test_only_a_call_with_a_listener_is_streamed(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("router", Reply(content="whole"))
    server.script("responder", Reply(content="streamed in pieces, more than one"))
    assert (await backend.chat(ChatRequest(caller="router", messages=MSG))).content == "whole"
    pieces: list[str] = []
    response = await backend.chat(ChatRequest(caller="responder", messages=MSG), pieces.append)
    assert response.content == "streamed in pieces, more than one" and len(pieces) > 1
    bodies = [r.body for r in server.requests("/v1/chat/completions")]
    assert [b["stream"] for b in bodies] == [False, True]
    assert response.prompt_eval_count > 0  # usage came with the stream


async def test_a_whole_message_keeps_each_of_its_tool_calls(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    tools = [*TOOLS, {**TOOLS[0], "function": {**TOOLS[0]["function"], "name": "clock"}}]
    server.script(
        "thinker",
        Reply(
            tool_calls=[
                {"name": "web_search", "arguments": {"query": "Berlin"}},
                {"name": "clock", "arguments": {}},
            ]
        ),
    )
    response = await backend.chat(ChatRequest(caller="thinker", messages=MSG, tools=tools))
    assert [(c.name, c.arguments) for c in response.tool_calls] == [
        ("web_search", {"query": "Berlin"}),
        ("clock", {}),
    ]


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
    try:
        with pytest.raises(BackendUnreachable, match="NOVABERG_OPENAI_URL"):
            await gone.chat(ChatRequest(caller="router", messages=MSG))
    finally:
        await gone.aclose()


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


# -- structured output: json_schema → json_object → prompt, learned once ---------------------
SCHEMA = {
    "type": "object",
    "properties": {"vote": {"type": "string", "enum": ["ok", "revise"]}},
    "required": ["vote"],
}


def structured(caller: str = "judge_legal") -> ChatRequest:
    return ChatRequest(
        caller=caller,
        messages=[{"role": "system", "content": "You judge."}, *MSG],
        json_schema=SCHEMA,
    )


def make_queue(backend: OpenAICompatBackend, attempts: int = 3) -> ModelQueue:
    return ModelQueue(
        BackendChain([backend], cooldown_s=30),
        {"openai": 3},
        Retries(attempts=attempts, backoff_s=0.01),
    )


def formats_sent(server: OllamaTestServer) -> list[str]:
    return [
        (r.body.get("response_format") or {}).get("type", "none")
        for r in server.requests("/v1/chat/completions")
    ]


async def test_a_refused_json_schema_steps_down_to_json_object_once_per_server_and_model(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.state.v1_json_modes = ("text", "json_object")  # as llama-cpp-python's server
    queue = make_queue(backend, attempts=1)  # the step-down does not use up a retry
    first, second = Trace(), Trace()
    result = await queue.submit(structured(), trace=first)
    assert json.loads(result.response.content) == {"vote": "ok"}
    assert [(c.json_mode, c.outcome) for c in first.calls] == [
        ("json_schema", "error"),
        ("json_object", "ok"),
    ]
    assert "refused structured output as json_schema" in first.calls[0].error
    await queue.submit(structured("salience"), trace=second)
    assert [(c.json_mode, c.outcome) for c in second.calls] == [("json_object", "ok")]
    assert formats_sent(server) == ["json_schema", "json_object", "json_object"]
    sent = server.requests("/v1/chat/completions")[1].body["response_format"]
    assert sent == {"type": "json_object", "schema": SCHEMA}
    assert first.calls[0].contract_view()["json_mode"] == "json_schema"


async def test_a_server_without_json_modes_is_asked_in_the_prompt(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.state.v1_json_modes = ("text",)
    server.script("judge_legal", Reply(content='{"vote": "revise"}'))
    trace = Trace()
    result = await make_queue(backend).submit(structured(), trace=trace)
    assert result.response.content == '{"vote": "revise"}'
    assert [(c.json_mode, c.outcome) for c in trace.calls] == [
        ("json_schema", "error"),
        ("json_object", "error"),
        ("prompt", "ok"),
    ]
    assert formats_sent(server) == ["json_schema", "json_object", "none"]
    system = server.requests("/v1/chat/completions")[2].body["messages"][0]
    assert system["role"] == "system" and system["content"].startswith("You judge.")
    assert json.dumps(SCHEMA) in system["content"]


async def test_a_plain_500_is_no_refusal_and_stays_retryable(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("judge_legal", Reply.http_error(500, "CUDA error: out of memory"))
    trace = Trace()
    await make_queue(backend).submit(structured(), trace=trace)
    assert [(c.json_mode, c.outcome, c.attempt) for c in trace.calls] == [
        ("json_schema", "error", 1),
        ("json_schema", "ok", 2),
    ]
    assert formats_sent(server) == ["json_schema", "json_schema"]


async def test_concurrent_refusals_step_down_only_once(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.state.v1_json_modes = ("text", "json_object")
    server.set_delay(0.05)  # all three are refused before any refusal has come back
    trace = Trace()
    queue = make_queue(backend)
    judges = ("judge_legal", "judge_psychology", "judge_style")
    await asyncio.gather(*(queue.submit(structured(j), trace=trace) for j in judges))
    assert sorted(formats_sent(server)) == ["json_object"] * 3 + ["json_schema"] * 3
    assert sorted(c.json_mode for c in trace.calls if c.outcome == "ok") == ["json_object"] * 3


async def test_a_refusal_of_the_last_mode_is_not_retried(server: OllamaTestServer) -> None:
    b = OpenAICompatBackend(server.url + "/v1", "qwen3:4b", None, Timeouts())
    server.script(
        "router",
        Reply.http_error(400, "response_format is not supported by this model"),
        Reply.http_error(400, "response_format is not supported by this model"),
    )
    trace = Trace()
    try:
        result = await make_queue(b).submit(structured("router"), trace=trace)
    finally:
        await b.aclose()
    assert result.response.content  # asked in the prompt, the third request answered
    assert [c.json_mode for c in trace.calls] == ["json_schema", "json_object", "prompt"]
    request = ChatRequest(caller="x", messages=MSG, json_schema=SCHEMA)
    assert b.json_mode(request) == "prompt"
    assert b.json_mode(ChatRequest(caller="x", messages=MSG)) == ""


# -- a prompt longer than the context is never retried unchanged ----------------------------
LONG = [{"role": "user", "content": "tell me about the lake " * 40}]


async def test_a_context_overflow_is_reported_and_not_retried(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.state.v1_overflow = "refuse"
    server.state.context_length = 64
    trace = Trace()
    with pytest.raises(ContextOverflow) as info:
        await make_queue(backend).submit(ChatRequest(caller="thinker", messages=LONG), trace=trace)
    assert not info.value.retryable
    assert "exceeded the model's context window" in str(info.value)
    assert "limits.context_tokens" in str(info.value) and "--n_ctx" in str(info.value)
    assert len(server.requests("/v1/chat/completions")) == 1
    assert [c.outcome for c in trace.calls] == ["error"]


async def test_a_stream_that_ends_before_anything_is_sent_again_whole_to_learn_why(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    """llama-cpp-python answers a streamed prompt longer than its context with an empty 200
    stream; the retry goes out without streaming and gets the 400 that says why."""
    server.state.v1_overflow = "refuse"
    server.state.context_length = 64
    trace = Trace()
    seen: list[str] = []
    with pytest.raises(ContextOverflow):
        await make_queue(backend).submit(
            ChatRequest(caller="responder", messages=LONG), trace=trace, on_token=seen.append
        )
    assert [r.body["stream"] for r in server.requests("/v1/chat/completions")] == [True, False]
    assert [c.outcome for c in trace.calls] == ["error", "error"]
    assert "before sending anything" in trace.calls[0].error
    assert "context window" in trace.calls[1].error
    assert seen == []


async def test_the_whole_retry_of_an_empty_stream_still_reaches_the_listener(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script(
        "responder",
        Reply(content="never sent", cut_after_chunks=0),
        Reply(content="the answer after all"),
    )
    seen: list[str] = []
    result = await make_queue(backend).submit(
        ChatRequest(caller="responder", messages=MSG), trace=Trace(), on_token=seen.append
    )
    assert result.response.content == "the answer after all"
    assert "".join(seen) == "the answer after all"


async def test_an_overflow_reported_mid_stream_is_a_context_overflow(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script(
        "responder",
        Reply.error_mid_stream(
            "partial answer text",
            after_chunks=1,
            error="the request exceeds the available context size, try increasing it",
        ),
    )
    with pytest.raises(ContextOverflow):
        await backend.chat(ChatRequest(caller="responder", messages=MSG), [].append)


async def test_only_the_retry_of_an_empty_stream_goes_whole(
    backend: OpenAICompatBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="x", cut_after_chunks=0), Reply(content="whole"))
    request = ChatRequest(caller="responder", messages=MSG)
    with pytest.raises(StreamCut, match="before sending anything"):
        await backend.chat(request, [].append)
    await backend.chat(request, [].append)
    await backend.chat(request, [].append)  # the same request later streams again
    assert [r.body["stream"] for r in server.requests("/v1/chat/completions")] == [
        True,
        False,
        True,
    ]
