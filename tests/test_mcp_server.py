"""Nova as an MCP server through real clients: the SDK's client over stdio (spawning
``novaberg mcp``) and over Streamable HTTP against a real ``novaberg serve`` process, a
client of the 2025-11-25 revision (with ``initialize``), the auth matrix of ``/v1`` on
``/mcp``, ``talk`` as one turn of the engine's turn service, and forget through MCP leaving
no byte of the text. Over the shipped Ollama-protocol test server."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import jsonschema  # type: ignore[import-untyped]
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp_types import CallToolResult, TextResourceContents

from novaberg.storage.api_users import UserStore
from novaberg.storage.db import LOOP_GUARD_ENV, Database
from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, novaberg_env, running_nova, wait_for
from tests.test_forget_leaves_nothing import places_holding

TOOLS = {"recall", "remember", "forget", "correct", "retract", "timeline", "profile", "talk"}
WORD = "Quelliphant"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw-client", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-mcp") / "home"
    with running_nova(
        ollama_server, home, ("ada", "bob"), extra_env={LOOP_GUARD_ENV: "1"}
    ) as started:
        db = started.db()
        try:
            started.keys["owui"] = UserStore(db).add("owui", frontend=True)
        finally:
            db.close()
        yield started


def stdio_params(server: OllamaTestServer, home: Path, user: str) -> StdioServerParameters:
    env = novaberg_env(server.url, home) | {LOOP_GUARD_ENV: "1"}
    args = ["-m", "novaberg", "mcp", "--user", user]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


@asynccontextmanager
async def http_client(
    nova: Nova, user: str | None = "ada", mode: str = "auto", **headers: str
) -> AsyncIterator[Client]:
    sent = dict(headers) | ({} if user is None else nova.auth(user))
    async with (
        httpx2.AsyncClient(headers=sent, timeout=60) as http,
        Client(streamable_http_client(f"{nova.url}/mcp", http_client=http), mode=mode) as client,
    ):
        yield client


def result(called: CallToolResult) -> dict[str, Any]:
    """A tool's result: JSON text, and the same object as structured content."""
    assert not called.is_error, called.content
    [block] = called.content
    assert block.type == "text"
    body: dict[str, Any] = json.loads(block.text)
    assert called.structured_content == body
    return body


def error_text(called: CallToolResult) -> str:
    assert called.is_error
    return " ".join(getattr(b, "text", "") for b in called.content)


def recalled_ids(called: CallToolResult) -> list[int]:
    return [item["id"] for item in result(called)["items"]]


async def test_stdio_client_remembers_recalls_and_forgets_as_the_user_of_novaberg_mcp(
    server: OllamaTestServer, tmp_path: Path
) -> None:
    home = tmp_path / "home"
    async with Client(stdio_params(server, home, "ada")) as client:
        listed = await client.list_tools()
        assert {t.name for t in listed.tools} == TOOLS
        assert all(t.description and t.output_schema for t in listed.tools)
        kept = result(await client.call_tool("remember", {"text": "My sister Lena lives in Graz."}))
        assert kept["created"] is True
        again = result(
            await client.call_tool("remember", {"text": "my sister lena lives in graz."})
        )
        assert again == {"id": kept["id"], "created": False}
        db = Database(home / "novaberg.db")
        try:  # provenance: a turn of origin remember, via MCP and the client's name
            [turn] = db.query("SELECT origin, trace_json, user_text FROM turns")
        finally:
            db.close()
        assert turn["origin"] == "remember" and turn["user_text"] == "My sister Lena lives in Graz."
        assert json.loads(turn["trace_json"])["via"] == "MCP, mcp"
        found = result(await client.call_tool("recall", {"query": "Where does Lena live?"}))
        [item] = found["items"]
        assert item["id"] == kept["id"] and item["text"] == "My sister Lena lives in Graz."
        assert item["reason"] and item["valid_to"] is None
        gone = result(await client.call_tool("forget", {"memory_id": kept["id"]}))
        assert kept["id"] in gone["ids"]
        assert recalled_ids(await client.call_tool("recall", {"query": "Lena Graz"})) == []
        assert "no memory" in error_text(
            await client.call_tool("forget", {"memory_id": kept["id"]})
        )
        empty = error_text(await client.call_tool("remember", {"text": "   "}))
        assert "nothing to remember" in empty


async def test_the_tools_delete_nothing_but_the_one_memory_named(
    server: OllamaTestServer, tmp_path: Path
) -> None:
    async with Client(stdio_params(server, tmp_path / "home", "ada")) as client:
        listed = (await client.list_tools()).tools
    destructive = [t for t in listed if t.annotations and t.annotations.destructive_hint]
    assert [t.name for t in destructive] == ["forget"]
    [forget] = destructive
    assert forget.input_schema["required"] == ["memory_id"]
    assert forget.input_schema["properties"]["memory_id"]["type"] == "integer"


def test_http_without_a_valid_key_is_401(nova: Nova) -> None:
    for headers in ({}, {"Authorization": "Bearer nb-not-a-key-at-all-0000000000"}):
        response = httpx.post(
            f"{nova.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS | headers, timeout=30
        )
        assert response.status_code == 401, response.text
        assert response.headers["www-authenticate"] == "Bearer"
        assert response.json()["detail"]


def test_a_2025_11_25_client_initializes_and_calls_a_tool(nova: Nova) -> None:
    """The previous revision as the desktop clients of this year speak it, by hand: an
    ``initialize`` answered with that version, then ``tools/call`` with its header."""
    headers = MCP_HEADERS | nova.auth("ada")
    started = httpx.post(f"{nova.url}/mcp", json=INITIALIZE, headers=headers, timeout=30)
    assert started.status_code == 200, started.text
    body = _rpc_body(started)
    assert body["result"]["protocolVersion"] == "2025-11-25"
    assert body["result"]["serverInfo"]["name"] == "novaberg"
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call"}
    call["params"] = {"name": "profile", "arguments": {}}
    headers |= {"MCP-Protocol-Version": "2025-11-25"}
    answered = httpx.post(f"{nova.url}/mcp", json=call, headers=headers, timeout=30)
    assert answered.status_code == 200, answered.text
    # one JSON body per answer, not an event stream; its text the same object, compact
    assert answered.headers["content-type"].startswith("application/json")
    profile = answered.json()["result"]
    assert profile["isError"] is False
    assert profile["structuredContent"] == {"core": None, "adaptive": None}
    assert profile["content"][0]["text"] == '{"core":null,"adaptive":null}'


async def test_output_schemas_give_optional_fields_as_nullable_types_and_results_fit_them(
    nova: Nova,
) -> None:
    """A client checks each result against its tool's output schema (the SDK's client does,
    on every call): an optional plain field is ``"type": [..., "null"]``, not an ``anyOf``
    of two schemas, and a real result with nulls in it is valid."""
    async with http_client(nova, "ada") as ada:
        listed = {t.name: t.output_schema for t in (await ada.list_tools()).tools}
        assert not [b for b in _any_ofs(listed) if all(set(s) == {"type"} for s in b)]
        defs = listed["recall"]["$defs"]  # type: ignore[index]
        assert defs["Recalled"]["properties"]["valid_to"]["type"] == ["string", "null"]
        kept = result(await ada.call_tool("remember", {"text": "My bike is a green Brompton."}))
        found = result(await ada.call_tool("recall", {"query": "Brompton bike"}))
    [item] = [i for i in found["items"] if i["id"] == kept["id"]]
    assert item["valid_to"] is None and item["happens_on"] is None
    Draft = jsonschema.validators.validator_for(listed["recall"])
    Draft(listed["recall"]).validate(found)
    with pytest.raises(jsonschema.ValidationError):
        Draft(listed["recall"]).validate({"items": [item | {"valid_to": 3}], "messages": []})


def _any_ofs(node: Any) -> Iterator[list[dict[str, Any]]]:
    if isinstance(node, dict):
        if "anyOf" in node:
            yield node["anyOf"]
        for value in node.values():
            yield from _any_ofs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _any_ofs(value)


def _rpc_body(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response: a JSON body, or the data of an SSE event."""
    if response.headers["content-type"].startswith("application/json"):
        found: dict[str, Any] = response.json()
        return found
    data = [line[5:].strip() for line in response.text.splitlines() if line.startswith("data:")]
    found = json.loads(next(d for d in data if d))
    return found


@pytest.mark.parametrize("mode", ["auto", "legacy"])
async def test_http_memory_is_the_keys_users_and_another_user_finds_nothing(
    nova: Nova, mode: str
) -> None:
    text = f"My cat is called Mitzi ({mode})."
    async with http_client(nova, "ada", mode) as ada:
        kept = result(await ada.call_tool("remember", {"text": text}))
        if mode == "legacy":
            assert ada.session.protocol_version == "2025-11-25"
    async with http_client(nova, "bob", mode) as bob:
        assert kept["id"] not in recalled_ids(await bob.call_tool("recall", {"query": "Mitzi"}))
        refused = await bob.call_tool("forget", {"memory_id": kept["id"]})
        assert error_text(refused).endswith(f"There is no memory {kept['id']}.")
    async with http_client(nova, "ada", mode) as ada:
        assert kept["id"] in recalled_ids(await ada.call_tool("recall", {"query": "Mitzi"}))


async def test_correct_and_retract_over_mcp_are_the_stores_and_end_the_old_version(
    nova: Nova,
) -> None:
    async with http_client(nova, "ada") as ada:
        kept = result(await ada.call_tool("remember", {"text": "My dog is called Brimbo."}))
        async with http_client(nova, "bob") as bob:  # another user's id: missing, whatever
            refused = await bob.call_tool("correct", {"memory_id": kept["id"], "text": "x"})
            assert error_text(refused).endswith(f"There is no memory {kept['id']}.")
        fixed = result(
            await ada.call_tool(
                "correct", {"memory_id": kept["id"], "text": "My dog is called Brimbolt."}
            )
        )
        assert fixed["replaces"] == kept["id"]
        new = fixed["memory"]
        assert new["text"] == "My dog is called Brimbolt." and new["valid_to"] is None
        found = recalled_ids(await ada.call_tool("recall", {"query": "Brimbo Brimbolt dog"}))
        assert new["id"] in found and kept["id"] not in found  # the old one: never current
        again = await ada.call_tool("correct", {"memory_id": kept["id"], "text": "y"})
        assert "no longer current" in error_text(again)
        ended = result(await ada.call_tool("retract", {"memory_id": new["id"]}))
        assert ended["memory"]["id"] == new["id"] and ended["memory"]["valid_to"] is not None
        assert ended["replaces"] is None
        found = recalled_ids(await ada.call_tool("recall", {"query": "Brimbolt"}))
        assert new["id"] not in found


async def test_a_front_end_keys_end_users_are_separated(nova: Nova) -> None:
    async with http_client(nova, "owui", **{"X-OpenWebUI-User-Id": "u-1"}) as first:
        kept = result(await first.call_tool("remember", {"text": "I play the oboe."}))
    async with http_client(nova, "owui", **{"X-OpenWebUI-User-Id": "u-2"}) as second:
        assert recalled_ids(await second.call_tool("recall", {"query": "oboe"})) == []
        assert "no memory" in error_text(
            await second.call_tool("forget", {"memory_id": kept["id"]})
        )
    async with http_client(nova, "owui", **{"X-OpenWebUI-User-Id": "u-1"}) as first:
        assert recalled_ids(await first.call_tool("recall", {"query": "oboe"})) == [kept["id"]]
    async with httpx.AsyncClient(timeout=30) as http:
        response = await http.post(
            f"{nova.url}/mcp", json=INITIALIZE, headers=MCP_HEADERS | nova.auth("owui")
        )
    assert response.status_code == 200  # no end user named: the key's own user, as on /v1
    db = nova.db()
    try:
        owners = {
            r["user_id"]
            for r in db.query("SELECT user_id FROM memories WHERE id = ?", (kept["id"],))
        }
    finally:
        db.close()
    assert owners == {"owui/u-1"}


async def test_talk_is_one_turn_of_the_engine_stored_as_api_turns_stores_it(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Graz is lovely in December."))
    async with http_client(nova, "ada") as ada:
        said = result(await ada.call_tool("talk", {"message": "Tell me about Graz."}))
        assert said["reply"] == "Graz is lovely in December."
        server.script("responder", Reply(content="Still lovely."))
        more = result(
            await ada.call_tool(
                "talk", {"message": "And now?", "conversation_id": said["conversation_id"]}
            )
        )
    assert more["conversation_id"] == said["conversation_id"] and more["turn_id"] > said["turn_id"]
    async with httpx.AsyncClient(timeout=30) as http:
        stored = await http.get(f"{nova.url}/api/turns/{said['turn_id']}", headers=nova.auth("ada"))
    assert stored.status_code == 200 and stored.json()["reply"] == said["reply"]
    [request] = server.requests("/api/chat", caller="responder")[:1]
    assert request.body["messages"][-1]["content"].endswith("Tell me about Graz.")
    async with http_client(nova, "bob") as bob:
        other = {"message": "Hi", "conversation_id": said["conversation_id"]}
        assert "no conversation" in error_text(await bob.call_tool("talk", other))
        assert "empty" in error_text(await bob.call_tool("talk", {"message": " "}))


async def test_forget_through_mcp_leaves_no_byte_of_the_text(
    server: OllamaTestServer, tmp_path: Path
) -> None:
    server.standing(
        "consolidate", Reply(content=json.dumps({"action": "new", "fact": f"Has a {WORD}."}))
    )
    server.standing("profile_adaptive", Reply(content=json.dumps({"statements": []})))
    home = tmp_path / "home"
    path = home / "novaberg.db"
    async with Client(stdio_params(server, home, "ada")) as client:
        kept = result(await client.call_tool("remember", {"text": f"My parrot is a {WORD}."}))
        db = Database(path)
        try:
            wait_for(lambda: _fact_of(db, kept["id"]), "the consolidated fact", timeout_s=60)
            assert places_holding(db, WORD)  # the word is there before forget
        finally:
            db.close()
        gone = result(await client.call_tool("forget", {"memory_id": kept["id"]}))
        assert len(gone["ids"]) == 2  # the item and the fact consolidated from it
    db = Database(path)
    try:
        assert places_holding(db, WORD) == []
    finally:
        db.close()
    raw = b"".join(p.read_bytes().lower() for p in sorted(home.glob("novaberg.db*")))
    assert WORD.lower().encode() not in raw


def _fact_of(db: Database, item_id: int) -> bool:
    row = db.scalar("SELECT consolidated_into FROM memories WHERE id = ?", (item_id,))
    done = db.scalar("SELECT COUNT(*) FROM events WHERE status IN ('pending', 'running')")
    return row is not None and int(done) == 0


def test_novaberg_mcp_help_names_the_tools_and_the_http_door() -> None:
    import subprocess

    shown = subprocess.run(
        [sys.executable, "-m", "novaberg", "mcp", "--help"],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "COLUMNS": "100"},
    ).stdout
    assert "recall, remember, forget, correct, retract, timeline, profile and talk" in " ".join(
        shown.split()
    )
    assert "/mcp" in shown


async def test_the_profile_and_the_timeline_are_resources_read_as_the_keys_user(
    nova: Nova,
) -> None:
    """``nova://profile`` and ``nova://timeline`` are listed and read over ``/mcp`` as the
    key's user: the same JSON as the tools' results; another user's events are not there."""
    from novaberg.memory.store import MemoryStore

    soon = (date.today() + timedelta(days=3)).isoformat()
    db = nova.db()
    try:
        MemoryStore(db).add_event("ada", soon, "Ada's dentist appointment", "ev-ada-dentist")
        MemoryStore(db).add_event("bob", soon, "Bob's choir concert", "ev-bob-choir")
    finally:
        db.close()
    async with http_client(nova, "ada") as ada:
        listed = {str(r.uri): r for r in (await ada.list_resources()).resources}
        assert set(listed) >= {"nova://profile", "nova://timeline"}
        assert all(listed[u].mime_type == "application/json" for u in listed)
        timeline = await _read_json(ada, "nova://timeline")
        assert timeline == result(await ada.call_tool("timeline", {}))
        assert await _read_json(ada, "nova://profile") == {"core": None, "adaptive": None}
    assert [i["text"] for i in timeline["items"]] == ["Ada's dentist appointment"]
    async with http_client(nova, "bob") as bob:
        theirs = await _read_json(bob, "nova://timeline")
    assert [i["text"] for i in theirs["items"]] == ["Bob's choir concert"]


async def _read_json(client: Client, uri: str) -> dict[str, Any]:
    [content] = (await client.read_resource(uri)).contents
    assert isinstance(content, TextResourceContents) and content.mime_type == "application/json"
    found: dict[str, Any] = json.loads(content.text)
    return found
