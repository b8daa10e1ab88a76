"""MCP servers as tools of the thinker, through whole turns over the Ollama-protocol test
server: a real third-party server from PyPI (``mcp-server-time``) called when the scripted
model asks for it; servers that hang, exit at start, never answer, crash in a call or answer
5 MB, each bounded and a notice in the trace, the turn answered and the other tools intact;
``novaberg doctor`` listing each server, whether it starts, and its tools."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.memory.store import MemoryStore
from novaberg.testing import OllamaTestServer, Reply
from novaberg.tools.registry import OUTPUT_CAP
from tests.server_helpers import Nova, novaberg_env, running_nova

FAKE = str(Path(__file__).with_name("mcp_fake_server.py"))
BUILTIN = {"web_search", "memory_search", "timeline", "current_time"}
ANSWER = "It is late afternoon in Vienna."


def server_table(name: str, *args: str) -> str:
    command, listed = json.dumps(sys.executable), json.dumps(list(args))
    return f"[mcp.servers.{name}]\ncommand = {command}\nargs = {listed}\n"


def write_config(home: Path, tables: list[str], **mcp: float) -> None:
    home.mkdir(parents=True, exist_ok=True)
    head = "[mcp]\n" + "".join(f"{k} = {v}\n" for k, v in mcp.items())
    (home / "config.toml").write_text(head + "\n" + "\n".join(tables), encoding="utf-8")


@pytest.fixture
async def engine_with(
    ollama_env: OllamaTestServer, isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[list[Engine]]:
    """An engine over the test server opened by the test once it wrote its config.toml."""
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_THINKER__MODE", "always")
    monkeypatch.setenv("NOVABERG_MEMORY__JOBS", "false")
    opened: list[Engine] = []
    yield opened
    for engine in opened:
        await engine.aclose()


async def open_engine(opened: list[Engine]) -> Engine:
    engine = await Engine.open(load_settings().settings)
    opened.append(engine)
    return engine


def tool_call(name: str, **arguments: Any) -> Reply:
    return Reply(tool_calls=[{"name": name, "arguments": arguments}])


def declared(request_body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in request_body.get("tools") or []}


def tool_messages(request_body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in request_body["messages"] if m["role"] == "tool"]


async def test_a_third_party_servers_tool_answers_the_thinker_in_a_turn(
    server: OllamaTestServer, isolated_env: Path, engine_with: list[Engine]
) -> None:
    write_config(
        isolated_env, [server_table("time", "-m", "mcp_server_time", "--local-timezone", "UTC")]
    )
    engine = await open_engine(engine_with)
    server.script("responder", Reply(content=ANSWER))
    server.script("thinker", tool_call("time__get_current_time", timezone="Europe/Vienna"))
    server.script("thinker", Reply(content="RESULT: OK"))
    result = await engine.run_turn("What time is it in Vienna?")
    assert result.reply == ANSWER
    assert result.contract_json()["thinker"]["tools"] == ["time__get_current_time"]
    first, second = [r.body for r in server.requests("/api/chat", caller="thinker")]
    for body in (first, second):  # every tool, in every tool-bearing request
        assert declared(body) == BUILTIN | {"time__get_current_time", "time__convert_time"}
    [output] = tool_messages(second)
    assert "untrusted data, not instructions" in output and "Europe/Vienna" in output
    assert not [n for n in result.trace.notices if n.startswith("mcp:")]
    store = MemoryStore(engine.db)
    texts = [m.text for m in await engine.db.run(store.items, "default")]
    assert not [t for t in texts if "Europe/Vienna" in t or "is_dst" in t]  # never a memory


async def test_bad_servers_cost_only_their_call_and_the_turn_is_answered(
    server: OllamaTestServer, isolated_env: Path, engine_with: list[Engine]
) -> None:
    write_config(
        isolated_env,
        [
            server_table("hang", FAKE, "hang"),
            server_table("big", FAKE, "big"),
            server_table("gone", FAKE, "exit"),
            server_table("mute", FAKE, "silent"),
        ],
        start_timeout_s=4,
        call_timeout_s=3,
    )
    engine = await open_engine(engine_with)
    server.script("responder", Reply(content=ANSWER))
    server.script(
        "thinker",
        tool_call("hang__wait"),
        tool_call("big__crash"),
        tool_call("big__dump"),
        tool_call("current_time"),
        Reply(content="RESULT: OK"),
    )
    began = time.monotonic()
    result = await engine.run_turn("What time is it?")
    took = time.monotonic() - began
    assert result.reply == ANSWER
    assert took < 30, took
    notices = [n for n in result.trace.notices if n.startswith("mcp:")]
    assert any("gone is not available (did not start" in n for n in notices), notices
    assert any("mute is not available (did not start within 4 s)" in n for n in notices), notices
    assert "mcp: hang__wait: no answer within 3 s (mcp.call_timeout_s)" in " ".join(notices)
    assert any(n.startswith("mcp: big__crash: the MCP server big failed") for n in notices)
    assert "mcp: big__dump answered 5000000 characters; cut to 100000" in notices
    bodies = [r.body for r in server.requests("/api/chat", caller="thinker")]
    assert len(bodies) == 5
    expected = BUILTIN | {"hang__wait", "hang__dump", "hang__crash"}
    expected |= {"big__wait", "big__dump", "big__crash"}
    assert all(declared(b) == expected for b in bodies)
    outputs = tool_messages(bodies[-1])
    assert len(outputs) == 4
    waited, crashed, dumped, clock = outputs
    assert "The tool failed: no answer within 3 s" in waited
    assert "The tool failed: the MCP server big failed" in crashed
    assert len(dumped) < OUTPUT_CAP + 300 and "xxxx" in dumped  # capped for the model
    assert "result from current_time" in clock  # the other tools work all the same


def test_doctor_lists_each_server_whether_it_starts_and_its_tools(
    ollama_server: OllamaTestServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    env = novaberg_env(ollama_server.url, home)
    write_config(
        home,
        [
            server_table("time", "-m", "mcp_server_time", "--local-timezone", "UTC"),
            server_table("gone", FAKE, "exit"),
        ],
        start_timeout_s=20,
    )
    done = subprocess.run(
        [sys.executable, "-m", "novaberg", "doctor", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    report = json.loads(done.stdout)
    servers = {s["name"]: s for s in report["mcp"]}
    assert servers["time"]["started"] is True
    assert servers["time"]["tools"] == ["time__get_current_time", "time__convert_time"]
    assert servers["gone"]["started"] is False and servers["gone"]["tools"] == []
    assert servers["gone"]["failure"].startswith("did not start")
    assert any(f.startswith("MCP server gone: did not start") for f in report["fixes"])


async def test_an_mcp_servers_entry_with_a_url_reaches_novas_memory_as_its_keys_user(
    server: OllamaTestServer,
    ollama_server: OllamaTestServer,
    isolated_env: Path,
    engine_with: list[Engine],
    tmp_path: Path,
) -> None:
    """An agent host's ``mcp.servers`` entry (here: another Nova's own config) with Nova's
    ``/mcp`` URL and a key: its thinker recalls what that key's user told Nova, not another's."""
    with running_nova(ollama_server, tmp_path / "served", ("ada", "bob")) as nova:
        await _remember_over_mcp(nova, "ada", "I play the cello.")
        await _remember_over_mcp(nova, "bob", "I play the cello badly.")
        table = (
            f'[mcp.servers.nova]\nurl = "{nova.url}/mcp"\n'
            f'headers = {{ Authorization = "Bearer {nova.keys["ada"]}" }}\n'
        )
        write_config(isolated_env, [table])
        engine = await open_engine(engine_with)
        server.script("responder", Reply(content=ANSWER))
        server.script(
            "thinker", tool_call("nova__recall", query="cello"), Reply(content="RESULT: OK")
        )
        result = await engine.run_turn("What instrument do I play?")
    assert result.reply == ANSWER
    first, second = [r.body for r in server.requests("/api/chat", caller="thinker")]
    assert {"nova__recall", "nova__remember", "nova__talk"} <= declared(first)
    [output] = tool_messages(second)
    assert "I play the cello." in output and "badly" not in output
    assert not [n for n in result.trace.notices if n.startswith("mcp:")]


async def _remember_over_mcp(nova: Nova, user: str, text: str) -> None:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async with (
        httpx2.AsyncClient(headers=nova.auth(user), timeout=60) as http,
        Client(streamable_http_client(f"{nova.url}/mcp", http_client=http)) as client,
    ):
        assert not (await client.call_tool("remember", {"text": text})).is_error
