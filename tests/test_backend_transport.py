"""The model backends' HTTP transport (aiohttp's, under httpx): each way a connection breaks
reads as it did under httpx's own transport (unreachable, timed out, stream cut), through the
real clients against real sockets that misbehave. ``httpx-aiohttp`` alone would call a server
that closed the connection, or refused it, a connect timeout."""

from __future__ import annotations

import asyncio
import socket
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from novaberg.backends.base import Backend, ChatRequest
from novaberg.backends.ollama import OllamaBackend
from novaberg.backends.openai_compat import OpenAICompatBackend
from novaberg.config import Timeouts
from novaberg.errors import BackendTimeout, BackendUnreachable, StreamCut
from tests.conftest import MSG, closed_port_url

Behaviour = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


async def _read_head(reader: asyncio.StreamReader) -> None:
    await reader.readuntil(b"\r\n\r\n")


async def close_at_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_head(reader)
    writer.close()


async def reset(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_head(reader)
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


async def half_a_body(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_head(reader)
    writer.write(
        b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 400\r\n\r\n"
        b'{"model": "m", "message": {"role": "assistant", "content": "an answer cut'
    )
    await writer.drain()
    writer.close()


async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await _read_head(reader)
    await asyncio.sleep(30)


@pytest.fixture
async def misbehaving(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    behaviour: Behaviour = request.param
    tasks: set[asyncio.Task[Any]] = set()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        tasks.add(task)
        try:
            await behaviour(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:  # closed on this loop, not collected after it
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        server.close()
        await server.wait_closed()


def backends(url: str, timeouts: Timeouts) -> list[Backend]:
    return [
        OllamaBackend(url, "qwen3:4b", timeouts),
        OpenAICompatBackend(url + "/v1", "qwen3:4b", None, timeouts),
    ]


async def _each_raises(url: str, timeouts: Timeouts) -> list[Exception]:
    raised: list[Exception] = []
    for backend in backends(url, timeouts):
        try:
            await backend.chat(ChatRequest(caller="router", messages=MSG))
        except Exception as exc:  # collected for the assertions
            raised.append(exc)
        finally:
            await backend.aclose()
    return raised


@pytest.mark.parametrize(
    "misbehaving", [close_at_once, reset, half_a_body], indirect=True, ids=lambda b: b.__name__
)
async def test_a_connection_broken_under_the_answer_is_a_cut_stream_not_a_timeout(
    misbehaving: str,
) -> None:
    raised = await _each_raises(misbehaving, Timeouts())
    assert [type(e) for e in raised] == [StreamCut, StreamCut], raised
    assert all(e.retryable and "cut the stream" in str(e) for e in raised)


async def test_a_refused_connection_is_unreachable_not_a_timeout() -> None:
    raised = await _each_raises(closed_port_url(), Timeouts())
    assert [type(e) for e in raised] == [BackendUnreachable, BackendUnreachable], raised


@pytest.mark.parametrize("misbehaving", [silent], indirect=True, ids=["silent"])
async def test_a_server_that_never_answers_is_a_timeout(misbehaving: str) -> None:
    raised = await _each_raises(misbehaving, Timeouts(first_token_s=0.2, total_s=5))
    assert [type(e) for e in raised] == [BackendTimeout, BackendTimeout], raised


PROXIED: list[bytes] = []
"""The request lines the proxy below was sent."""


async def proxy_that_answers_502(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    PROXIED.append(head.split(b"\r\n")[0])
    writer.write(b"HTTP/1.1 502 Bad Gateway\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    await writer.drain()


@pytest.mark.parametrize("misbehaving", [proxy_that_answers_502], indirect=True, ids=["proxy"])
async def test_requests_go_through_the_proxy_the_environment_names_unless_no_proxy_says_not(
    misbehaving: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = closed_port_url()  # answers nothing: reached only through the proxy
    for name in ("http_proxy", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HTTP_PROXY", misbehaving)
    PROXIED.clear()
    raised = await _each_raises(target, Timeouts())
    # each backend's first request (Ollama's asks for the model's context first) went to the
    # proxy, in absolute form, and the proxy's answer came back
    assert [line.decode().split(" ")[:2] for line in PROXIED] == [
        ["POST", f"{target}/api/show"],
        ["POST", f"{target}/v1/chat/completions"],
    ]
    assert all("502" in str(e) for e in raised), raised
    PROXIED.clear()
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    raised = await _each_raises(target, Timeouts())
    assert PROXIED == []  # straight to the closed port
    assert [type(e) for e in raised] == [BackendUnreachable, BackendUnreachable], raised
