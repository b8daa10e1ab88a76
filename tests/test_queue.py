"""The model queue: retries, records, priorities and concurrency limits, on real requests."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.chain import BackendChain
from novaberg.backends.ollama import OllamaBackend
from novaberg.config import Retries, Timeouts
from novaberg.errors import BackendHTTPError, ModelNotFound
from novaberg.queue import BACKGROUND, CALL_OWNER, FOREGROUND, ModelQueue, PrioritySlots
from novaberg.telemetry import Trace
from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import MSG, TOOLS


@pytest.fixture
async def backend(server: OllamaTestServer) -> AsyncIterator[OllamaBackend]:
    b = OllamaBackend(server.url, "qwen3:4b", Timeouts())
    await b.capabilities()
    yield b
    await b.aclose()


def make_queue(backend: OllamaBackend, limit: int = 2, attempts: int = 3) -> ModelQueue:
    return ModelQueue(
        BackendChain([backend], cooldown_s=30),
        {"ollama": limit},
        Retries(attempts=attempts, backoff_s=0.01),
    )


async def test_503_then_success_is_retried_and_each_request_recorded(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("router", Reply.http_error(503), Reply.http_error(500), Reply(content="fine"))
    trace = Trace()
    result = await make_queue(backend).submit(
        ChatRequest(caller="router", messages=MSG), trace=trace
    )
    assert result.response.content == "fine"
    assert [c.outcome for c in trace.calls] == ["error", "error", "ok"]
    assert [c.attempt for c in trace.calls] == [1, 2, 3]
    assert [r.caller for r in server.requests("/api/chat")] == [
        "router"
    ] * 3  # retries keep the caller


async def test_retries_are_bounded(backend: OllamaBackend, server: OllamaTestServer) -> None:
    server.standing("router", Reply.http_error(503))
    trace = Trace()
    with pytest.raises(BackendHTTPError):
        await make_queue(backend, attempts=3).submit(
            ChatRequest(caller="router", messages=MSG), trace=trace
        )
    assert len(server.requests("/api/chat")) == 3
    assert len(trace.calls) == 3


async def test_client_errors_are_not_retried(server: OllamaTestServer) -> None:
    missing = OllamaBackend(server.url, "missing:1b", Timeouts())
    trace = Trace()
    try:
        with pytest.raises(ModelNotFound):
            await make_queue(missing).submit(
                ChatRequest(caller="router", messages=MSG), trace=trace
            )
    finally:
        await missing.aclose()
    assert len(trace.calls) == 1 and trace.calls[0].outcome == "error"


async def test_no_retry_after_a_token_was_passed_on(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script(
        "responder",
        Reply.error_mid_stream("the first part streams out", after_chunks=1),
        Reply(content="a second answer the user must not see glued on"),
    )
    seen: list[str] = []
    trace = Trace()
    with pytest.raises(BackendHTTPError):
        await make_queue(backend).submit(
            ChatRequest(caller="responder", messages=MSG), trace=trace, on_token=seen.append
        )
    assert seen and len(server.requests("/api/chat")) == 1
    assert server.pending() == {"responder": 1}


async def test_same_failure_without_streaming_is_retried(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script(
        "responder",
        Reply.error_mid_stream("the first part", after_chunks=1),
        Reply(content="complete answer"),
    )
    trace = Trace()
    result = await make_queue(backend).submit(
        ChatRequest(caller="responder", messages=MSG), trace=trace
    )
    assert result.response.content == "complete answer"
    assert [c.outcome for c in trace.calls] == ["error", "ok"]


async def test_timeout_is_recorded_as_timeout(server: OllamaTestServer) -> None:
    slow = OllamaBackend(server.url, "qwen3:4b", Timeouts(first_token_s=0.1, total_s=2))
    await slow.capabilities()
    server.script("router", Reply(content="late", delay_s=0.5))
    trace = Trace()
    try:
        with pytest.raises(Exception):  # noqa: B017 - the class is checked through the record
            await make_queue(slow, attempts=1).submit(
                ChatRequest(caller="router", messages=MSG), trace=trace
            )
    finally:
        await slow.aclose()
    assert trace.calls[0].outcome == "timeout"


async def test_foreground_jobs_overtake_waiting_background_jobs(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    queue = make_queue(backend, limit=1)
    server.script("first", Reply(content="holds the only slot", delay_s=0.3))
    trace = Trace()
    first = asyncio.create_task(
        queue.submit(ChatRequest(caller="first", messages=MSG), trace=trace)
    )
    await asyncio.sleep(0.1)
    background = asyncio.create_task(
        queue.submit(
            ChatRequest(caller="consolidation", messages=MSG), trace=trace, priority=BACKGROUND
        )
    )
    await asyncio.sleep(0.02)
    foreground = asyncio.create_task(
        queue.submit(
            ChatRequest(caller="responder", messages=MSG), trace=trace, priority=FOREGROUND
        )
    )
    await asyncio.gather(first, background, foreground)
    assert [r.caller for r in server.requests("/api/chat")] == [
        "first",
        "responder",
        "consolidation",
    ]
    waits = {c.caller: c.queue_wait_ms for c in trace.calls}
    assert waits["consolidation"] > waits["responder"] > 100


async def test_a_background_call_that_waited_its_time_goes_before_later_foreground_ones() -> None:
    slots = PrioritySlots(1, aging_s=0.05)
    await slots.acquire(FOREGROUND)  # the one slot, taken
    order: list[str] = []

    async def wait(name: str, priority: int) -> None:
        await slots.acquire(priority)
        order.append(name)

    job = asyncio.create_task(wait("job", BACKGROUND))
    typed = asyncio.create_task(wait("typed", FOREGROUND))
    await asyncio.sleep(0)  # both wait
    slots.release()  # the job has not waited its time: the typed call first
    await typed
    later = asyncio.create_task(wait("later typed", FOREGROUND))
    await asyncio.sleep(0.06)  # the job has waited longer than aging_s now
    slots.release()
    await job
    assert order == ["typed", "job"]  # before the later typed call: a busy server never starves it
    slots.release()
    await later
    assert order == ["typed", "job", "later typed"]


async def test_one_users_burst_does_not_starve_another_users_call(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    queue = make_queue(backend, limit=1)
    server.set_delay(0.05)
    trace = Trace()

    async def as_user(user: str, caller: str) -> None:
        CALL_OWNER.set(user)  # as a turn or memory job of that user does
        await queue.submit(ChatRequest(caller=caller, messages=MSG), trace=trace)

    burst = [asyncio.create_task(as_user("ada", f"ada{i}")) for i in range(6)]
    await asyncio.sleep(0.02)  # ada's first call runs, five wait
    late = asyncio.create_task(as_user("bob", "bob"))
    await asyncio.gather(*burst, late)
    order = [r.caller for r in server.requests("/api/chat")]
    # bob came last but waits for one of ada's calls, not all five
    assert order == ["ada0", "ada1", "bob", "ada2", "ada3", "ada4", "ada5"]


async def test_per_backend_concurrency_limit_is_respected(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    queue = make_queue(backend, limit=2)
    server.set_delay(0.2)
    trace = Trace()
    await asyncio.gather(
        *(queue.submit(ChatRequest(caller=f"job{i}", messages=MSG), trace=trace) for i in range(5))
    )
    waits = sorted(c.queue_wait_ms for c in trace.calls)
    assert waits[0] < 100 and waits[1] < 100  # two start at once
    assert waits[2] > 150 and waits[3] > 150  # two wait one round
    assert waits[4] > 350  # the fifth waits two rounds


async def test_cancelled_waiter_gives_its_place_back(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    queue = make_queue(backend, limit=1)
    server.script("first", Reply(content="slow", delay_s=0.2))
    trace = Trace()
    first = asyncio.create_task(
        queue.submit(ChatRequest(caller="first", messages=MSG), trace=trace)
    )
    await asyncio.sleep(0.05)
    waiting = asyncio.create_task(
        queue.submit(ChatRequest(caller="gone", messages=MSG), trace=trace)
    )
    await asyncio.sleep(0.02)
    waiting.cancel()
    await first
    later = await queue.submit(ChatRequest(caller="later", messages=MSG), trace=trace)
    assert later.record.queue_wait_ms < 50
    assert "gone" not in [r.caller for r in server.requests("/api/chat")]


async def test_a_dropped_tool_call_is_recorded_and_retried_once(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script(
        "thinker",
        Reply.dropped_tool_call("timeline"),  # not in tools: swallowed
        Reply.dropped_tool_call("web_search", {"query": "x"}),
    )
    trace = Trace()
    result = await make_queue(backend).submit(
        ChatRequest(caller="thinker", messages=MSG, tools=TOOLS, think=False), trace=trace
    )
    assert [c.outcome for c in trace.calls] == ["dropped_tool_call", "ok"]
    assert trace.calls[0].eval_count > 0 and trace.calls[0].content_len == 0
    assert [t.name for t in result.response.tool_calls] == ["web_search"]
    bodies = [r.body for r in server.requests("/api/chat")]
    assert all(b["tools"] == TOOLS for b in bodies)  # the retry carries the full tool list


async def test_dropped_twice_with_thinking_tries_once_more_without_thinking(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script(
        "thinker",
        Reply.dropped_tool_call("timeline"),
        Reply.dropped_tool_call("timeline"),
        Reply(content="RESULT: OK"),
    )
    trace = Trace()
    result = await make_queue(backend).submit(
        ChatRequest(caller="thinker", messages=MSG, tools=TOOLS, think=True), trace=trace
    )
    assert [c.outcome for c in trace.calls] == ["dropped_tool_call", "dropped_tool_call", "ok"]
    assert [r.body["think"] for r in server.requests("/api/chat")] == [True, True, False]
    assert result.response.content == "RESULT: OK"


async def test_the_same_shape_without_tools_is_an_empty_answer_not_retried(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="", eval_count=12))
    trace = Trace()
    await make_queue(backend).submit(ChatRequest(caller="responder", messages=MSG), trace=trace)
    assert [c.outcome for c in trace.calls] == ["empty_answer"]


async def test_a_prompt_the_server_cut_is_recorded_truncated_and_warned_without_text(
    server: OllamaTestServer, caplog: pytest.LogCaptureFixture
) -> None:
    small = OllamaBackend(server.url, "qwen3:4b", Timeouts(), num_ctx=512)
    secret = "Marzipanwolke"
    messages = [{"role": "system", "content": f"{secret} is my cat. " * 200}, *MSG]
    trace = Trace()
    try:
        with caplog.at_level(logging.INFO, logger="novaberg"):
            result = await make_queue(small).submit(
                ChatRequest(caller="responder", messages=messages), trace=trace
            )
    finally:
        await small.aclose()
    assert result.response.content  # answered anyway, and used: but not as "ok"
    assert [c.outcome for c in trace.calls] == ["truncated"]  # not retried: it would be cut again
    assert trace.calls[0].prompt_eval_count == 512
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "the prompt was cut" in warnings[0].getMessage()
    assert all(secret not in r.getMessage() for r in caplog.records)


async def test_an_answer_stopped_at_its_output_limit_is_truncated(
    backend: OllamaBackend, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="a reply that ran into its li", done_reason="length"))
    trace = Trace()
    await make_queue(backend).submit(ChatRequest(caller="responder", messages=MSG), trace=trace)
    assert [c.outcome for c in trace.calls] == ["truncated"]
