"""The backend chain: fallbacks answer, failed backends cool down, the trace names who answered."""

from __future__ import annotations

import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.chain import BackendChain
from novaberg.backends.ollama import OllamaBackend
from novaberg.backends.openai_compat import OpenAICompatBackend
from novaberg.config import Retries, Timeouts
from novaberg.errors import NoBackendAvailable
from novaberg.queue import ModelQueue
from novaberg.telemetry import Trace
from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import MSG, closed_port_url


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_fallback_answers_when_primary_is_down_then_primary_rests(
    server: OllamaTestServer,
) -> None:
    primary = OllamaBackend(closed_port_url(), "qwen3:4b", Timeouts())
    fallback = OpenAICompatBackend(server.url + "/v1", "qwen3:4b", None, Timeouts())
    clock = Clock()
    chain = BackendChain([primary, fallback], cooldown_s=30, clock=clock)
    queue = ModelQueue(chain, {"ollama": 1, "openai": 1}, Retries(attempts=2, backoff_s=0.01))
    try:
        trace = Trace()
        result = await queue.submit(ChatRequest(caller="responder", messages=MSG), trace=trace)
        assert result.response.backend == "openai"
        assert [(c.backend, c.outcome) for c in trace.calls] == [
            ("ollama", "error"),
            ("ollama", "error"),
            ("openai", "ok"),
        ]
        assert trace.answered_by() == "openai/qwen3:4b"

        second = Trace()
        await queue.submit(ChatRequest(caller="responder", messages=MSG), trace=second)
        assert [c.backend for c in second.calls] == ["openai"]  # the primary is cooling down

        clock.now += 31
        third = Trace()
        await queue.submit(ChatRequest(caller="responder", messages=MSG), trace=third)
        assert [c.backend for c in third.calls] == ["ollama", "ollama", "openai"]  # tried again
    finally:
        await chain.aclose()


async def test_all_backends_failing_lists_each_cause(server: OllamaTestServer) -> None:
    primary = OllamaBackend(closed_port_url(), "qwen3:4b", Timeouts())
    fallback = OpenAICompatBackend(server.url + "/v1", "qwen3:4b", None, Timeouts())
    chain = BackendChain([primary, fallback], cooldown_s=30)
    queue = ModelQueue(chain, {}, Retries(attempts=1, backoff_s=0))
    server.script("router", Reply.http_error(500, "kaputt"))
    try:
        with pytest.raises(NoBackendAvailable) as info:
            await queue.submit(ChatRequest(caller="router", messages=MSG), trace=Trace())
    finally:
        await chain.aclose()
    assert "ollama:" in str(info.value) and "openai:" in str(info.value)
    assert "kaputt" in str(info.value)


async def test_resting_backends_are_still_tried_when_all_rest(server: OllamaTestServer) -> None:
    only = OllamaBackend(server.url, "qwen3:4b", Timeouts())
    chain = BackendChain([only], cooldown_s=30)
    chain.failed(only)
    assert chain.resting(only)
    assert chain.candidates() == [only]
    await only.aclose()
