"""The shipped test server speaks Ollama's protocol: checked through the official client."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import ollama
import pytest

from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import TOOLS

_open: list[ollama.Client] = []


def client(server: OllamaTestServer, caller: str = "test") -> ollama.Client:
    made = ollama.Client(host=server.url, headers={"X-Novaberg-Caller": caller}, timeout=10)
    _open.append(made)
    return made


@pytest.fixture(autouse=True)
def close_clients() -> Iterator[None]:
    yield
    while _open:
        _open.pop().close()


def test_lists_version_tags_and_capabilities(server: OllamaTestServer) -> None:
    c = client(server)
    assert httpx.get(server.url + "/").text == "Ollama is running"
    assert httpx.get(server.url + "/api/version").json()["version"]
    names = [m.model for m in c.list().models]
    assert "qwen3:4b" in names and "gemma3:270m" in names
    assert c.show("qwen3:4b").capabilities == ["completion", "tools", "thinking"]
    assert c.show("gemma3:270m").capabilities == ["completion"]


def test_embed_returns_one_vector_per_input(server: OllamaTestServer) -> None:
    result = client(server).embed(model="qwen3:4b", input=["a", "b"])
    assert len(result.embeddings) == 2
    assert result.embeddings[0] != result.embeddings[1]


def test_chat_streams_pieces_and_ends_with_metrics(server: OllamaTestServer) -> None:
    server.script("test", Reply(content="Hello there, this is a longer streamed answer."))
    parts = list(
        client(server).chat(
            model="qwen3:4b", messages=[{"role": "user", "content": "hi"}], stream=True, think=False
        )
    )
    assert len(parts) > 2
    assert (
        "".join(p.message.content for p in parts)
        == "Hello there, this is a longer streamed answer."
    )
    assert parts[-1].done and parts[-1].eval_count and parts[-1].done_reason == "stop"


def test_chat_without_streaming_returns_one_object(server: OllamaTestServer) -> None:
    server.script("test", Reply(content="whole", thinking="hmm"))
    result = client(server).chat(
        model="qwen3:4b", messages=[{"role": "user", "content": "x"}], think=True
    )
    assert result.message.content == "whole"
    assert result.message.thinking == "hmm"


def test_scripts_are_per_caller(server: OllamaTestServer) -> None:
    server.script("router", Reply(content="for the router"))
    server.script("responder", Reply(content="for the responder"))
    msg = [{"role": "user", "content": "x"}]
    assert (
        client(server, "responder").chat(model="qwen3:4b", messages=msg).message.content
        == "for the responder"
    )
    assert (
        client(server, "router").chat(model="qwen3:4b", messages=msg).message.content
        == "for the router"
    )
    assert [r.caller for r in server.requests("/api/chat")] == ["responder", "router"]


def test_thinking_model_thinks_when_think_is_omitted(server: OllamaTestServer) -> None:
    msg = [{"role": "user", "content": "x"}]
    omitted = client(server).chat(model="qwen3:4b", messages=msg)
    assert omitted.message.thinking
    explicit_off = client(server).chat(model="qwen3:4b", messages=msg, think=False)
    assert not explicit_off.message.thinking


def test_everything_in_thinking_with_and_without_control_line(server: OllamaTestServer) -> None:
    server.script(
        "test",
        Reply.thinking_swallowed_answer("I checked it.", control_line="RESULT: OK"),
        Reply.thinking_swallowed_answer("I checked it, the draft is wrong."),
    )
    msg = [{"role": "user", "content": "x"}]
    case1 = client(server).chat(model="qwen3:4b", messages=msg, think=True)
    case2 = client(server).chat(model="qwen3:4b", messages=msg, think=True)
    assert case1.message.content == "" and case1.message.thinking.endswith("RESULT: OK")
    assert case2.message.content == "" and "RESULT" not in case2.message.thinking


def test_tool_call_to_undeclared_name_vanishes_into_an_empty_answer(
    server: OllamaTestServer,
) -> None:
    server.script(
        "test", Reply.dropped_tool_call("timeline"), Reply.dropped_tool_call("web_search")
    )
    msg = [{"role": "user", "content": "x"}]
    dropped = client(server).chat(model="qwen3:4b", messages=msg, tools=TOOLS, think=False)
    assert dropped.message.content == "" and not dropped.message.tool_calls
    assert dropped.eval_count and dropped.eval_count > 0 and dropped.done_reason == "stop"
    listed = client(server).chat(model="qwen3:4b", messages=msg, tools=TOOLS, think=False)
    assert listed.message.tool_calls and listed.message.tool_calls[0].function.name == "web_search"


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_scripted_http_errors_reach_the_client(server: OllamaTestServer, status: int) -> None:
    server.script("test", Reply.http_error(status, "boom"))
    with pytest.raises(ollama.ResponseError) as info:
        client(server).chat(model="qwen3:4b", messages=[{"role": "user", "content": "x"}])
    assert info.value.status_code == status
    assert info.value.error == "boom"


def test_unknown_model_is_404_and_capability_misuse_is_400(server: OllamaTestServer) -> None:
    msg = [{"role": "user", "content": "x"}]
    with pytest.raises(ollama.ResponseError) as missing:
        client(server).chat(model="nope:1b", messages=msg)
    assert missing.value.status_code == 404 and "not found" in missing.value.error
    with pytest.raises(ollama.ResponseError) as think:
        client(server).chat(model="gemma3:270m", messages=msg, think=True)
    assert think.value.status_code == 400 and "does not support thinking" in think.value.error
    with pytest.raises(ollama.ResponseError) as tools:
        client(server).chat(model="gemma3:270m", messages=msg, tools=TOOLS)
    assert tools.value.status_code == 400 and "does not support tools" in tools.value.error


def test_error_line_mid_stream_raises_with_status_minus_one(server: OllamaTestServer) -> None:
    server.script("test", Reply.error_mid_stream("partial answer that goes on", after_chunks=1))
    stream = client(server).chat(
        model="qwen3:4b", messages=[{"role": "user", "content": "x"}], stream=True, think=False
    )
    with pytest.raises(ollama.ResponseError) as info:
        list(stream)
    assert info.value.status_code == -1


def test_cut_stream_has_no_done_chunk(server: OllamaTestServer) -> None:
    server.script("test", Reply.cut_stream("an answer that is cut short", after_chunks=1))
    parts = list(
        client(server).chat(
            model="qwen3:4b", messages=[{"role": "user", "content": "x"}], stream=True, think=False
        )
    )
    assert parts and not any(p.done for p in parts)


def test_unscripted_json_request_gets_valid_json_for_its_schema(server: OllamaTestServer) -> None:
    schema = {
        "type": "object",
        "properties": {"vote": {"enum": ["ok", "revise"]}, "reason": {"type": "string"}},
    }
    result = client(server).chat(
        model="qwen3:4b", messages=[{"role": "user", "content": "x"}], format=schema, think=False
    )
    assert json.loads(result.message.content) == {"vote": "ok", "reason": "ok"}


def test_scripting_over_http_for_other_processes(server: OllamaTestServer) -> None:
    httpx.post(
        server.url + "/_novaberg/script",
        json={"caller": "test", "replies": [{"content": "scripted over HTTP"}]},
    )
    result = client(server).chat(model="qwen3:4b", messages=[{"role": "user", "content": "x"}])
    assert result.message.content == "scripted over HTTP"
    seen = httpx.get(server.url + "/_novaberg/requests").json()
    assert seen[-1]["caller"] == "test"


@pytest.mark.parametrize("style", ["reasoning", "reasoning_content", "think_tags"])
def test_openai_endpoint_returns_reasoning_in_each_shape(
    server: OllamaTestServer, style: str
) -> None:
    server.script("test", Reply(content="answer", thinking="thoughts", reasoning_style=style))  # type: ignore[arg-type]
    body = httpx.post(
        server.url + "/v1/chat/completions",
        headers={"X-Novaberg-Caller": "test"},
        json={"model": "qwen3:4b", "messages": [{"role": "user", "content": "x"}]},
    ).json()
    message = body["choices"][0]["message"]
    if style == "think_tags":
        assert message["content"] == "<think>thoughts</think>\nanswer"
    else:
        assert message[style] == "thoughts" and message["content"] == "answer"


def test_openai_endpoint_streams_server_sent_events(server: OllamaTestServer) -> None:
    server.script("test", Reply(content="streamed answer here"))
    with httpx.stream(
        "POST",
        server.url + "/v1/chat/completions",
        headers={"X-Novaberg-Caller": "test"},
        json={"model": "qwen3:4b", "stream": True, "messages": [{"role": "user", "content": "x"}]},
    ) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    text = "".join(
        json.loads(line[5:])["choices"][0]["delta"].get("content", "")
        for line in lines[:-1]
        if json.loads(line[5:])["choices"]
    )
    assert text == "streamed answer here"


# -- a prompt longer than the runtime context: cut from the head, silently ------------------
LONG = [{"role": "user", "content": "word " * 600}]


def test_a_prompt_longer_than_num_ctx_is_cut_silently_and_answered_anyway(
    server: OllamaTestServer,
) -> None:
    c = client(server)
    result = c.chat(
        model="qwen3:4b", messages=LONG, think=False, options={"num_ctx": 256}, stream=False
    )
    assert result.message.content and result.done_reason == "stop"  # no error, no notice
    assert result.prompt_eval_count == 256
    [cut] = server.truncations()
    assert (cut.limit, cut.kept, cut.caller) == (256, 256, "test") and cut.prompt > 600
    [loaded] = c.ps().models
    assert loaded.model == "qwen3:4b" and loaded.context_length == 256


def test_without_num_ctx_the_server_default_context_applies(server: OllamaTestServer) -> None:
    server.state.context_length = 512  # as OLLAMA_CONTEXT_LENGTH=512
    parts = list(client(server).chat(model="qwen3:4b", messages=LONG, think=False, stream=True))
    assert parts[-1].done and parts[-1].prompt_eval_count == 512
    short = client(server).chat(model="qwen3:4b", messages=[{"role": "user", "content": "hi"}])
    assert short.prompt_eval_count == 5  # one word and the template: nothing cut
    assert len(server.truncations()) == 1


def test_a_reply_can_cap_the_context_whatever_num_ctx_says(server: OllamaTestServer) -> None:
    server.script("test", Reply.context_cut("answered anyway", context=128))
    result = client(server).chat(
        model="qwen3:4b", messages=LONG, think=False, options={"num_ctx": 8192}
    )
    assert result.message.content == "answered anyway" and result.prompt_eval_count == 128


# -- /v1 as llama-cpp-python's server answers -------------------------------------------------
def test_v1_refuses_unknown_response_formats_like_llama_cpp_python(
    server: OllamaTestServer,
) -> None:
    server.state.v1_json_modes = ("text", "json_object")
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "x"}]}
    refused = httpx.post(
        server.url + "/v1/chat/completions",
        json={
            **body,
            "response_format": {"type": "json_schema", "json_schema": {"schema": schema}},
        },
    )
    assert refused.status_code == 500
    assert "'loc': ('body', 'response_format', 'type')" in refused.json()["error"]["message"]
    taken = httpx.post(
        server.url + "/v1/chat/completions",
        json={**body, "response_format": {"type": "json_object", "schema": schema}},
    )
    message = taken.json()["choices"][0]["message"]
    assert taken.status_code == 200 and json.loads(message["content"]) == {"a": "ok"}


def test_v1_refuses_a_prompt_longer_than_its_context(server: OllamaTestServer) -> None:
    server.state.v1_overflow = "refuse"
    server.state.context_length = 64
    body = {"model": "qwen3:4b", "messages": LONG, "max_tokens": 16}
    whole = httpx.post(server.url + "/v1/chat/completions", json=body)
    assert whole.status_code == 400
    assert whole.json()["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 64 tokens" in whole.json()["error"]["message"]
    streamed = httpx.post(server.url + "/v1/chat/completions", json={**body, "stream": True})
    assert streamed.status_code == 200 and streamed.text == ""  # the error stays in its log
