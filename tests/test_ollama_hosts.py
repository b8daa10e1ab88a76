"""One Ollama backend over two servers (``ollama_hosts``), each a real Ollama-protocol test
server: calls go to the least busy healthy one, each server holds its own concurrency limit,
a failing server rests while the other answers, and each call record — in the trace and in
``llm_calls`` — names the server that answered (the backend stays ``ollama``)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator

import pytest

from novaberg.backends.base import ChatRequest
from novaberg.backends.ollama_pool import OllamaPool
from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.errors import BackendError
from novaberg.telemetry import Trace
from novaberg.testing import OllamaTestServer, Reply
from tests.conftest import MSG, closed_port_url


@pytest.fixture
def second() -> Iterator[OllamaTestServer]:
    with OllamaTestServer() as other:
        yield other


def hosts_env(monkeypatch: pytest.MonkeyPatch, *urls: str, limit: int = 1) -> None:
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
    monkeypatch.setenv("NOVABERG_OLLAMA_HOSTS", ",".join(urls))
    monkeypatch.setenv("NOVABERG_CONCURRENCY__OLLAMA", str(limit))
    monkeypatch.setenv("NOVABERG_BREAKER_COOLDOWN_S", "60")


@pytest.fixture
async def pooled(
    monkeypatch: pytest.MonkeyPatch, server: OllamaTestServer, second: OllamaTestServer
) -> AsyncIterator[Engine]:
    hosts_env(monkeypatch, server.url, second.url)
    engine = await Engine.open(load_settings().settings)
    try:
        yield engine
    finally:
        await engine.aclose()


def chat(caller: str) -> ChatRequest:
    return ChatRequest(caller=caller, messages=MSG)


async def test_the_backend_is_one_ollama_over_both_servers(pooled: Engine) -> None:
    backend = pooled.chain.primary
    assert isinstance(backend, OllamaPool) and backend.name == "ollama"
    assert pooled.queue.depth()["ollama"] == (0, 0)
    status = await backend.status()
    assert status.reachable and "2 of 2 Ollama servers answer" in status.detail


async def test_calls_go_to_the_least_busy_server_each_within_its_limit(
    pooled: Engine, server: OllamaTestServer, second: OllamaTestServer
) -> None:
    server.standing("*", Reply(content="from a", delay_s=0.3))
    second.standing("*", Reply(content="from b", delay_s=0.3))
    pool = pooled.chain.primary
    assert isinstance(pool, OllamaPool)
    trace = Trace()
    seen: list[dict[str, int]] = []

    async def watch() -> None:
        while len(trace.calls) < 4:
            seen.append(pool.busy())
            await asyncio.sleep(0.02)

    watcher = asyncio.create_task(watch())
    results = await asyncio.gather(
        *(pooled.queue.submit(chat(f"c{i}"), trace=trace) for i in range(4))
    )
    await watcher
    # one slot per server: never two at once on one server, both busy together
    assert max(max(b.values()) for b in seen) == 1
    assert any(list(b.values()) == [1, 1] for b in seen)
    assert len(server.requests("/api/chat")) == 2 and len(second.requests("/api/chat")) == 2
    by_host = {r.record.host: r.response.content for r in results}
    assert by_host == {"ollama_hosts[0]": "from a", "ollama_hosts[1]": "from b"}
    assert {c.backend for c in trace.calls} == {"ollama"}


async def test_a_failing_server_rests_and_the_other_answers(
    pooled: Engine, server: OllamaTestServer, second: OllamaTestServer
) -> None:
    server.standing("*", Reply.http_error(500))
    second.standing("*", Reply(content="b answers"))
    trace = Trace()
    first = await pooled.queue.submit(chat("one"), trace=trace)
    assert first.response.content == "b answers"
    # the first request went to the first server (both idle), failed, and was retried on b
    assert [(c.host, c.outcome) for c in trace.calls] == [
        ("ollama_hosts[0]", "error"),
        ("ollama_hosts[1]", "ok"),
    ]
    # while it rests, every call goes to b
    for i in range(3):
        await pooled.queue.submit(chat(f"more{i}"), trace=trace)
    assert len(server.requests("/api/chat")) == 1
    assert [c.host for c in trace.calls[2:]] == ["ollama_hosts[1]"] * 3


async def test_an_unreachable_server_is_skipped_and_the_record_names_who_answered(
    monkeypatch: pytest.MonkeyPatch, server: OllamaTestServer
) -> None:
    dead = closed_port_url()
    hosts_env(monkeypatch, dead, server.url)
    engine = await Engine.open(load_settings().settings)
    try:
        server.script("responder", Reply(content="Hello from the live one."))
        result = await engine.run_turn("Hello")
        assert result.reply == "Hello from the live one."
        calls = [(c.caller, c.host, c.outcome) for c in result.trace.calls]
        assert ("responder", "ollama_hosts[1]", "ok") in calls  # by its place, no address
        assert all(host in ("ollama_hosts[0]", "ollama_hosts[1]") for _, host, _ in calls)
        assert {c.backend for c in result.trace.calls} == {"ollama"}
        stored = await engine.db.run(
            engine.db.query,
            "SELECT caller, host, outcome FROM llm_calls WHERE turn_id = ? ORDER BY seq",
            (result.turn_id,),
        )
        assert [(r["caller"], r["host"], r["outcome"]) for r in stored] == calls
        assert result.contract_json()["calls"][0]["host"] in ("ollama_hosts[0]", "ollama_hosts[1]")
    finally:
        await engine.aclose()


async def test_when_every_server_fails_the_call_fails_naming_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    first, other = closed_port_url(), closed_port_url()
    hosts_env(monkeypatch, first, other)
    monkeypatch.setenv("NOVABERG_RETRIES__ATTEMPTS", "2")
    engine = await Engine.open(load_settings().settings)
    try:
        trace = Trace()
        with pytest.raises(BackendError):
            await engine.queue.submit(chat("nobody"), trace=trace)
        assert [(c.host, c.outcome) for c in trace.calls] == [
            ("ollama_hosts[0]", "error"),
            ("ollama_hosts[1]", "error"),
        ]
    finally:
        await engine.aclose()


def test_one_host_listed_is_a_plain_ollama_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    from novaberg.backends.ollama import OllamaBackend
    from novaberg.backends.select import make_backend

    hosts_env(monkeypatch, "http://127.0.0.1:1")
    backend = make_backend("ollama", load_settings().settings)
    assert type(backend) is OllamaBackend and backend.host == "http://127.0.0.1:1"
