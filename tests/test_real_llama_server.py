"""Against a real OpenAI-compatible server nobody here wrote: llama-cpp-python's own
``python -m llama_cpp.server`` (its ``server`` extra), serving the embedded GGUF with a small
context. It refuses ``response_format: json_schema`` (HTTP 500), takes ``json_object`` with a
schema, refuses a prompt longer than its context (HTTP 400, or an empty 200 stream): the
backend must learn the first, never retry the second unchanged, and a whole turn must finish in
bounded time with one honest record per request the server saw.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.chain import BackendChain
from novaberg.backends.embedded import default_model_path
from novaberg.backends.openai_compat import OpenAICompatBackend
from novaberg.config import Retries, Timeouts, load_settings
from novaberg.engine import Engine
from novaberg.errors import ContextOverflow
from novaberg.nodes.router import RouterOutput
from novaberg.queue import ModelQueue
from novaberg.structured import schema_of
from novaberg.telemetry import OUTCOMES, CallRecord, Trace

pytestmark = pytest.mark.real_server

N_CTX = 1024
"""The server's context window, small so that an overflow is cheap to provoke."""
TURN_BOUND_S = 240
"""A whole (reduced) turn on 2 CPU cores, at most."""
ALIAS = "local"
_ACCESS = re.compile(r'"POST /v1/chat/completions HTTP/1\.1" (\d{3})')


@dataclass
class RealServer:
    url: str
    log: Path

    def statuses(self, since: int) -> list[int]:
        """The HTTP status of each chat request the server logged after byte ``since``."""
        text = self.log.read_bytes()[since:].decode("utf-8", errors="replace")
        return [int(m.group(1)) for m in _ACCESS.finditer(text)]

    def mark(self) -> int:
        return self.log.stat().st_size


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealServer]:
    """llama-cpp-python's server on the embedded GGUF, started once for this module; ready when
    ``/v1/models`` answers."""
    folder = tmp_path_factory.mktemp("llama-server")
    gguf = default_model_path(folder)
    port = _free_port()
    log = folder / "server.log"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(gguf),
        "--model_alias",
        ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(N_CTX),
        "--n_threads",
        str(min(2, os.cpu_count() or 1)),
    ]
    with log.open("wb") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            if process.poll() is not None:
                pytest.fail(f"llama_cpp.server exited ({process.returncode}): {log.read_text()}")
            try:
                if httpx.get(url + "/models", timeout=1).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"llama_cpp.server did not answer /v1/models: {log.read_text()}")
            time.sleep(0.2)
        yield RealServer(url, log)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture
async def backend(llama_server: RealServer) -> AsyncIterator[OpenAICompatBackend]:
    b = OpenAICompatBackend(llama_server.url, ALIAS, None, Timeouts())
    yield b
    await b.aclose()


def make_queue(backend: OpenAICompatBackend) -> ModelQueue:
    return ModelQueue(
        BackendChain([backend], cooldown_s=30), {"openai": 1}, Retries(attempts=3, backoff_s=0.01)
    )


def router_request() -> ChatRequest:
    return ChatRequest(
        caller="router",
        messages=[
            {"role": "system", "content": "Classify the user's message."},
            {"role": "user", "content": "Wie hoch ist die Zugspitze?"},
        ],
        think=False,
        json_schema=schema_of(RouterOutput),
        temperature=0.0,
        max_tokens=64,
    )


async def test_the_routers_structured_request_succeeds_after_the_step_down(
    backend: OpenAICompatBackend, llama_server: RealServer
) -> None:
    since = llama_server.mark()
    trace = Trace()
    queue = make_queue(backend)
    result = await queue.submit(router_request(), trace=trace)
    assert [(c.json_mode, c.outcome) for c in trace.calls[:1]] == [("json_schema", "error")]
    assert "refused structured output as json_schema" in trace.calls[0].error
    assert [c.json_mode for c in trace.calls[1:]] == ["json_object"]
    assert trace.calls[1].outcome in ("ok", "truncated")
    if trace.calls[1].outcome == "ok":
        json.loads(result.response.content)  # the grammar held: an object came back
    again = Trace()
    await queue.submit(router_request(), trace=again)
    assert [c.json_mode for c in again.calls] == ["json_object"]  # learned once
    assert llama_server.statuses(since) == [500, 200, 200]  # one record per request


async def test_a_prompt_longer_than_the_context_is_refused_and_never_retried_unchanged(
    backend: OpenAICompatBackend, llama_server: RealServer
) -> None:
    since = llama_server.mark()
    long = [{"role": "user", "content": "Tell me about the lake near Novaberg. " * 200}]
    whole, streamed = Trace(), Trace()
    with pytest.raises(ContextOverflow, match="context window"):
        await make_queue(backend).submit(ChatRequest("thinker", long), trace=whole)
    assert [c.outcome for c in whole.calls] == ["error"]
    seen: list[str] = []
    with pytest.raises(ContextOverflow):
        await make_queue(backend).submit(
            ChatRequest("responder", long), trace=streamed, on_token=seen.append
        )
    first, *between, last = streamed.calls
    assert "before sending anything" in first.error  # the empty 200 stream
    assert "context window" in last.error and seen == []
    # after an aborted stream the server may close the kept-alive connection under the next
    # request: that one is sent again whole (never streamed), until the server says why
    assert all("cut the stream" in c.error for c in between), [c.error for c in between]
    assert llama_server.statuses(since) == [400, 200, 400]


def _check_honest(calls: list[CallRecord], statuses: list[int]) -> None:
    """Every record is one request the server logged; no refusal was sent again unchanged."""
    assert len(calls) == len(statuses)
    refused = [c for c in calls if "refused structured output" in c.error]
    assert Counter(statuses)[500] == len(refused)
    assert all(c.outcome in OUTCOMES for c in calls)
    for c in calls:
        if c.outcome == "ok":
            assert c.content_len > 0 or c.tool_calls > 0
        if c.outcome in ("error", "timeout"):
            assert c.error
    for i, c in enumerate(calls):
        later = [d for d in calls[i + 1 :] if d.caller == c.caller]
        if "refused structured output" in c.error and later:
            assert later[0].json_mode != c.json_mode  # only in the new shape
        if "context window" in c.error:
            assert not later  # an overflow is never sent again
    assert [c.json_mode for c in calls].count("json_schema") <= 1  # learned once per server


async def test_a_whole_turn_completes_in_bounded_time_with_honest_records(
    llama_server: RealServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {
        "NOVABERG_BACKEND": "openai",
        "NOVABERG_OPENAI_URL": llama_server.url,
        "NOVABERG_OPENAI_MODEL": ALIAS,
        "NOVABERG_LIMITS__CONTEXT_TOKENS": str(N_CTX),
        "NOVABERG_TRIBUNAL__JUDGES": "legal",  # one judge: bounded time on 2 cores
        "NOVABERG_TRIBUNAL__MAX_CORRECTIONS": "1",
        "NOVABERG_THINKER__MODE": "never",
        "NOVABERG_MEMORY__JOBS": "false",
    }.items():
        monkeypatch.setenv(key, value)
    since = llama_server.mark()
    started = time.monotonic()
    engine = await Engine.open(load_settings().settings)
    try:
        async with asyncio.timeout(TURN_BOUND_S):
            result = await engine.run_turn("Hallo Nova, ich bin Sam. Wie geht es dir heute?")
    finally:
        await engine.aclose()
    elapsed = time.monotonic() - started
    calls = result.trace.calls
    assert result.reply.strip()
    assert elapsed < TURN_BOUND_S
    callers = [c.caller for c in calls]
    assert {"router", "responder", "judge_legal", "salience"} <= set(callers)
    _check_honest(calls, llama_server.statuses(since))
    router = [c for c in calls if c.caller == "router"]
    assert router[0].json_mode == "json_schema" and router[0].outcome == "error"
    assert (router[-1].outcome == "ok") == (result.state["router"].default is False)
    votes = result.state["tribunal"].votes
    judge = [c for c in calls if c.caller == "judge_legal"]
    assert votes[0].malformed == (judge[-1].outcome == "malformed")
