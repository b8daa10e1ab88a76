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
