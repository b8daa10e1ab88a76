"""Nova's MCP server used by the MCP Inspector's CLI (issue 25): over Streamable HTTP against
the session's ``novaberg serve`` (the key decides the user; a front-end key's end user from its
signed token) and over stdio, spawning ``novaberg mcp``. What the Inspector printed is checked,
and what Nova stored is read through her own doors."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import httpx
from tests.server_helpers import Nova, novaberg_env

from frontends.inspector import inspect
from frontends.nova_side import FRONTEND_USER, JWT_SECRET, EndUser
from novaberg.testing import OllamaTestServer

TOOLS = {"recall", "remember", "forget", "correct", "retract", "timeline", "profile", "talk"}


def structured(printed: dict[str, Any]) -> dict[str, Any]:
    assert printed.get("isError") is not True, printed
    body: dict[str, Any] = printed["structuredContent"]
    assert json.loads(printed["content"][0]["text"]) == body
    return body


def test_the_inspector_lists_the_tools_and_remembers_as_the_keys_user(nova: Nova) -> None:
    url, key = f"{nova.url}/mcp", f"Authorization: Bearer {nova.keys['ada']}"
    listed = inspect(url, "--transport", "http", "--header", key, "--method", "tools/list")
    assert {t["name"] for t in listed["tools"]} == TOOLS
    kept = structured(
        inspect(
            url, "--transport", "http", "--header", key, "--method", "tools/call",
            "--tool-name", "remember", "--tool-arg", "text=My bike is a green Gazelle.",
        )
    )  # fmt: skip
    found = httpx.get(
        f"{nova.url}/api/memory/{kept['id']}", headers=nova.auth("ada"), timeout=30
    ).json()
    assert found["text"] == "My bike is a green Gazelle."


def test_the_inspector_as_a_front_ends_end_user_finds_only_theirs(nova: Nova) -> None:
    url = f"{nova.url}/mcp"
    first = EndUser(nova, nova.keys[FRONTEND_USER], JWT_SECRET, "inspector-1")
    second = EndUser(nova, nova.keys[FRONTEND_USER], JWT_SECRET, "inspector-2")

    def call(who: EndUser, tool: str, *args: str) -> dict[str, Any]:
        headers = [f"{k}: {v}" for k, v in who.headers().items()]
        return inspect(
            url, "--transport", "http", "--header", *headers, "--method", "tools/call",
            "--tool-name", tool, *(("--tool-arg", *args) if args else ()),
        )  # fmt: skip

    kept = structured(call(first, "remember", "text=I keep bees on the roof."))
    assert [i["id"] for i in structured(call(first, "recall", "query=bees"))["items"]] == [
        kept["id"]
    ]
    assert structured(call(second, "recall", "query=bees"))["items"] == []


def test_the_inspector_over_stdio_spawns_novaberg_mcp_and_reads_its_resources(
    ollama_server: OllamaTestServer, tmp_path: Path
) -> None:
    env = novaberg_env(ollama_server.url, tmp_path / "home")
    settings = [f"{k}={v}" for k, v in env.items() if k.startswith(("NOVABERG_", "OLLAMA_"))]
    spawn = [sys.executable, "-m", "novaberg", "mcp", "--user", "ada"]
    flags = [arg for pair in settings for arg in ("-e", pair)]
    listed = inspect(*flags, "--method", "tools/list", "--", *spawn)
    assert {t["name"] for t in listed["tools"]} == TOOLS
    resources = inspect(*flags, "--method", "resources/list", "--", *spawn)
    assert {r["uri"] for r in resources["resources"]} >= {"nova://profile", "nova://timeline"}
    read = inspect(*flags, "--method", "resources/read", "--uri", "nova://timeline", "--", *spawn)
    [content] = read["contents"]
    assert content["mimeType"] == "application/json"
    assert set(json.loads(content["text"])) == {"start", "end", "items"}
