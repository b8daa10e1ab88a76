"""Nova's memory as a tool server of the real Open WebUI (issue 25). The admin adds Nova's
``/mcp`` with the front-end's key as its panel does (*Admin Panel → Settings → External Tools*,
over Open WebUI's own API), *Verify connection* lists Nova's tools, and a chat with another
model (the scripted Ollama server behind Open WebUI's Ollama connection) calls Nova's
``recall`` through Open WebUI's MCP client: each Open WebUI user gets their own memories (the
signed JWT Open WebUI forwards to tool servers names them), never another user's.

A chat with Nova herself may use her tools too: Open WebUI's choice of tools is one of its
tasks (no turn), and its answer, the message with the tool's result as its sources, is a turn
whose sources reach the responder as what the app attached.

The chats use Open WebUI's *legacy* function calling, which runs a tool on the server before
the model answers; in its *native* mode Open WebUI runs tools only for a chat open in its page
(a socket session), which these tests do not drive."""

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


def _pick_recall() -> Reply:
    """The tool choice of Open WebUI's legacy function calling, as a model makes it."""
    call = {"name": "nova_recall", "parameters": {"query": "bike"}}
    return Reply(content=json.dumps({"tool_calls": [call]}))


def _chat(openwebui: OpenWebUI, account: Account, model: str, asked: str) -> dict[str, Any]:
    body = {
        "model": model,
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
    found: dict[str, Any] = chat.json()
    return found


def _add_nova(openwebui: OpenWebUI, nova: Nova) -> None:
    admin = {"Authorization": f"Bearer {openwebui.admin_token}"}
    saved = httpx.post(
        f"{openwebui.url}/api/v1/configs/tool_servers",
        json={"TOOL_SERVER_CONNECTIONS": [_connection(nova)]},
        headers=admin,
        timeout=30,
    )
    assert saved.status_code == 200, saved.text


def test_open_webui_adds_novas_mcp_server_and_each_users_chat_recalls_their_own_memory(
    openwebui: OpenWebUI, nova: Nova, ollama_server: OllamaTestServer
) -> None:
    ollama_server.reset()
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
        ollama_server.script("", _pick_recall(), match=Match(contains="Available Tools"))
        ollama_server.script("", Reply(content="You ride your bike."), match=Match(contains=asked))
        before = len(ollama_server.requests("/api/chat"))
        chat = _chat(openwebui, account, MODEL, asked)
        [source] = [s for s in chat.get("sources", []) if s.get("tool_result")]
        assert source["source"]["name"] == "nova_recall"
        # what the other model was given to answer with: this user's memory, no one else's
        answered = ollama_server.requests("/api/chat")[before:]
        final = json.dumps([r.body["messages"] for r in answered if asked in json.dumps(r.body)])
        assert f"My bike is {bikes[name]}." in final
        others = [bike for who, bike in bikes.items() if who != name]
        assert not any(bike in final for bike in others)
        assert not any(bike in json.dumps(source) for bike in others)


def test_a_chat_with_nova_herself_recalls_through_her_mcp_server_and_is_one_turn(
    openwebui: OpenWebUI, nova: Nova, ollama_server: OllamaTestServer
) -> None:
    ollama_server.reset()
    _add_nova(openwebui, nova)
    account = openwebui.add_user("Cleo Tools")
    end = EndUser(nova, nova.keys[FRONTEND_USER], JWT_SECRET, account.id)
    _remember(nova, end, "My bike is a yellow Pashley.")
    asked = "Which bike do I ride again?"
    ollama_server.script("frontend_task", _pick_recall(), match=Match(contains="Available Tools"))
    answer = Reply(content="A yellow Pashley, by your own account.")
    ollama_server.script("responder", answer, match=Match(contains=asked))
    chat = _chat(openwebui, account, "nova", asked)
    assert chat["choices"][0]["message"]["content"].startswith("A yellow Pashley")
    # the choice of tools was a task, the message with the tool's result one turn of its own
    chats = [end.stored(int(c["id"])) for c in end.conversations()]
    assert [c for c in chats if ("user", asked) in c] == [
        [("user", asked), ("assistant", answer.content)]
    ]
    assert not any("Available Tools" in text or "Query:" in text for c in chats for _, text in c)
    [responder] = [
        r for r in ollama_server.requests("/api/chat", caller="responder") if asked in str(r.body)
    ]
    system = responder.body["messages"][0]["content"]
    assert "What the app attached to the user's message" in system
    assert "My bike is a yellow Pashley." in system
    assert responder.body["messages"][-1]["content"] == asked
