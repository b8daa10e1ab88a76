"""Nova's memory as a tool server of the real Open WebUI (issue 25). The admin adds Nova's
``/mcp`` with the front-end's key as its panel does (*Admin Panel → Settings → External Tools*,
over Open WebUI's own API), *Verify connection* lists Nova's tools, and a chat with another
model (the scripted Ollama server behind Open WebUI's Ollama connection) calls Nova's
``recall`` through Open WebUI's MCP client: each Open WebUI user gets their own memories (the
signed JWT Open WebUI forwards to tool servers names them), never another user's.

The chats use Open WebUI's *legacy* function calling, which runs a tool on the server before
the model answers; in its *native* mode Open WebUI runs tools only for a chat open in its page
(a socket session), which this test does not drive."""

from __future__ import annotations

import json
from typing import Any

import httpx
from tests.server_helpers import Nova

from frontends.nova_side import FRONTEND_USER, JWT_SECRET, EndUser
from frontends.openwebui import Account, OpenWebUI
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.replies import Match

MODEL = "llama3.2:3b"
"""One of the scripted server's models, offered by Open WebUI's Ollama connection."""
EVERYONE = [{"principal_type": "user", "principal_id": "*", "permission": "read"}]


def _connection(nova: Nova) -> dict[str, Any]:
    return {
        "url": f"{nova.url}/mcp",
        "path": "",
        "type": "mcp",
        "auth_type": "bearer",
        "key": nova.keys[FRONTEND_USER],
        "config": {"enable": True, "access_grants": EVERYONE},
        "info": {"id": "nova", "name": "Nova"},
    }


def _token(openwebui: OpenWebUI, account: Account) -> dict[str, str]:
    signin = httpx.post(
        f"{openwebui.url}/api/v1/auths/signin",
        json={"email": account.email, "password": account.password},
        timeout=30,
    )
    assert signin.status_code == 200, signin.text
    return {"Authorization": f"Bearer {signin.json()['token']}"}


def _remember(nova: Nova, end: EndUser, text: str) -> None:
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
    call["params"] = {"name": "remember", "arguments": {"text": text}}
    headers = end.headers() | {"Accept": "application/json, text/event-stream"}
    kept = httpx.post(f"{nova.url}/mcp", json=call, headers=headers, timeout=30)
    assert kept.status_code == 200 and kept.json()["result"]["isError"] is False, kept.text


def test_open_webui_adds_novas_mcp_server_and_each_users_chat_recalls_their_own_memory(
    openwebui: OpenWebUI, nova: Nova, ollama_server: OllamaTestServer
) -> None:
    admin = {"Authorization": f"Bearer {openwebui.admin_token}"}
    connection = _connection(nova)
    saved = httpx.post(
        f"{openwebui.url}/api/v1/configs/tool_servers",
        json={"TOOL_SERVER_CONNECTIONS": [connection]},
        headers=admin,
        timeout=30,
    )
    assert saved.status_code == 200, saved.text
    # Verify connection: the admin's request names no end user; the tool list reads no data
    verified = httpx.post(
        f"{openwebui.url}/api/v1/configs/tool_servers/verify",
        json=connection,
        headers=admin,
        timeout=60,
    )
    assert verified.status_code == 200, verified.text
    assert {"recall", "remember", "talk"} <= {s["name"] for s in verified.json()["specs"]}

    bikes = {"Ada Tools": "a green Gazelle", "Bob Tools": "a red Brompton"}
    accounts = {name: openwebui.add_user(name) for name in bikes}
    for name, account in accounts.items():
        end = EndUser(nova, nova.keys[FRONTEND_USER], JWT_SECRET, account.id)
        _remember(nova, end, f"My bike is {bikes[name]}.")

    for name, account in accounts.items():
        asked = f"Which bike do I ride, {name}?"
        pick = Reply(content=json.dumps({"tool_calls": [
            {"name": "nova_recall", "parameters": {"query": "bike"}}
        ]}))  # fmt: skip
        ollama_server.script("", pick, match=Match(contains="Available Tools"))
        ollama_server.script("", Reply(content="You ride your bike."), match=Match(contains=asked))
        before = len(ollama_server.requests("/api/chat"))
        body = {
            "model": MODEL,
            "messages": [{"role": "user", "content": asked}],
            "tool_ids": ["server:mcp:nova"],
            "params": {"function_calling": "legacy"},
            "stream": False,
        }
        chat = httpx.post(
            f"{openwebui.url}/api/chat/completions",
            json=body,
            headers=_token(openwebui, account),
            timeout=120,
        )
        assert chat.status_code == 200, chat.text
        [source] = [s for s in chat.json().get("sources", []) if s.get("tool_result")]
        assert source["source"]["name"] == "nova_recall"
        # what the other model was given to answer with: this user's memory, no one else's
        answered = ollama_server.requests("/api/chat")[before:]
        final = json.dumps([r.body["messages"] for r in answered if asked in json.dumps(r.body)])
        assert f"My bike is {bikes[name]}." in final
        others = [bike for who, bike in bikes.items() if who != name]
        assert not any(bike in final for bike in others)
        assert not any(bike in json.dumps(source) for bike in others)
