"""How a front-end's turn flows through the one door (issue 20, parts 2-5), against a real
``novaberg serve`` and the requests in the shapes Open WebUI 0.12.4 and SillyTavern 1.12.6
sent (../shared/data): Stop aborts a turn and the chat goes on, the answer streams before
the bookkeeping, the responder's history is the chat the front-end shows, and what Nova does
not use is said."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, running_nova, wait_for

CONVERSATION = "X-Novaberg-Conversation-Id"
TURN = "X-Novaberg-Turn-Id"
CHAT = "X-OpenWebUI-Chat-Id"


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-flow") / "home"
    with running_nova(ollama_server, home, ("ada", "bob", "cy", "dee", "eve", "fay")) as started:
        yield started


@pytest.fixture(scope="module")
def nova_situation(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-situation") / "home"
    env = {"NOVABERG_SERVER__FRONTEND_SYSTEM_PROMPT": "situation"}
    with running_nova(ollama_server, home, ("ada",), extra_env=env) as started:
        yield started


def user(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, Any]:
    return {"role": "assistant", "content": text}


def chat(
    nova: Nova, messages: list[dict[str, Any]], who: str, headers: dict[str, str] | None = None
) -> httpx.Response:
    response = httpx.post(
        f"{nova.url}/v1/chat/completions",
        json={"model": "nova", "messages": messages},
        headers={**nova.auth(who), **(headers or {})},
        timeout=60,
    )
    assert response.status_code == 200, response.text
    return response


def reply_of(response: httpx.Response) -> str:
    return str(response.json()["choices"][0]["message"]["content"])


def turn_row(nova: Nova, turn_id: int) -> dict[str, Any]:
    db = nova.db()
    try:
        turn = db.turn(turn_id)
    finally:
        db.close()
    assert turn is not None
    return turn


def messages_of(nova: Nova, conversation: int) -> list[tuple[str, str]]:
    db = nova.db()
    try:
        rows = db.query(
            "SELECT m.role, m.content FROM messages m JOIN turns t ON t.id = m.turn_id "
            "WHERE m.conversation_id = ? AND t.status = 'done' ORDER BY m.id",
            (conversation,),
        )
    finally:
        db.close()
    return [(str(r["role"]), str(r["content"])) for r in rows]


def notices_of(nova: Nova, turn_id: int) -> list[str]:
    trace = json.loads(turn_row(nova, turn_id)["trace_json"] or "{}")
    return [str(n) for n in trace.get("notices") or []]


def responder_prompt(server: OllamaTestServer) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = server.requests(caller="responder")[-1].body["messages"]
    return messages


def stop_mid_turn(
    nova: Nova, server: OllamaTestServer, messages: list[dict[str, Any]], who: str, **headers: str
) -> tuple[int, int]:
    """Send ``messages`` streamed and go away while the responder is still writing (Stop):
    (conversation, turn) of the stopped turn, once it is marked."""
    server.script("responder", Reply(content="An answer nobody sees.", delay_s=30))
    body = {"model": "nova", "messages": messages, "stream": True}
    with httpx.stream(
        "POST",
        f"{nova.url}/v1/chat/completions",
        json=body,
        headers={**nova.auth(who), **headers},
        timeout=60,
    ) as response:
        assert response.status_code == 200
        conversation, turn_id = int(response.headers[CONVERSATION]), int(response.headers[TURN])
        wait_for(lambda: bool(server.requests(caller="responder")), "the responder call")
    wait_for(lambda: turn_row(nova, turn_id)["status"] == "aborted", "the turn marked aborted")
    return conversation, turn_id


@pytest.mark.parametrize("named", [True, False], ids=["open-webui-chat-id", "history-only"])
def test_stop_aborts_the_turn_and_the_next_message_continues_the_chat(
    nova: Nova, server: OllamaTestServer, named: bool
) -> None:
    who = "ada" if named else "bob"
    headers = {CHAT: "chat-stop"} if named else {}
    server.script("responder", Reply(content="Bees are busy."))
    first = chat(nova, [user("Tell me about bees")], who, headers)
    conversation = int(first.headers[CONVERSATION])
    history = [user("Tell me about bees"), assistant(reply_of(first))]

    stopped, turn_id = stop_mid_turn(nova, server, [*history, user("And wasps?")], who, **headers)
    assert stopped == conversation
    assert "went away" in str(turn_row(nova, turn_id)["error"])
    assert messages_of(nova, conversation) == [
        ("user", "Tell me about bees"),
        ("assistant", "Bees are busy."),
    ]  # the stopped message is the front-end's to keep; no reply is stored

    # Open WebUI resends the stopped message without an answer (two user messages in a row)
    server.reset()
    server.script("responder", Reply(content="Hornets, then."))
    nxt = chat(nova, [*history, user("And wasps?"), user("Hornets?")], who, headers)  # no 409
    assert int(nxt.headers[CONVERSATION]) == conversation
    assert reply_of(nxt) == "Hornets, then."
    prompt = json.dumps(responder_prompt(server))
    assert "An answer nobody sees." not in prompt and "Bees are busy." in prompt
    assert messages_of(nova, conversation)[-2:] == [
        ("user", "Hornets?"),
        ("assistant", "Hornets, then."),
    ]


def test_the_answer_streams_before_salience_and_the_memory_write(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Streamed before the books are kept."))
    server.script(
        "salience",
        Reply(content=json.dumps({"score": 0.9, "summary": "The user asks."}), delay_s=4),
    )
    body = {"model": "nova", "messages": [user("Quick answer please")], "stream": True}
    with httpx.stream(
        "POST", f"{nova.url}/v1/chat/completions", json=body, headers=nova.auth("cy"), timeout=60
    ) as response:
        turn_id = int(response.headers[TURN])
        content = ""
        lines = response.iter_lines()
        for line in lines:
            if line.startswith("data: {"):
                delta = json.loads(line.removeprefix("data: "))["choices"][0]["delta"]
                content += delta.get("content") or ""
                if content == "Streamed before the books are kept.":
                    break
        # the whole answer is here, and salience's call (4 s) is only now going out
        wait_for(lambda: bool(server.requests(caller="salience")), "salience's call")
        assert turn_row(nova, turn_id)["status"] == "running"  # not stored yet
        rest = list(lines)
    assert "data: [DONE]" in rest
    assert turn_row(nova, turn_id)["status"] == "done"


def test_the_responders_history_is_the_chat_the_front_end_shows(
    nova: Nova, server: OllamaTestServer
) -> None:
    headers = {CHAT: "chat-edit"}
    server.script(
        "responder", Reply(content="Hi Dee."), Reply(content="Cats purr."), Reply(content="Dogs!")
    )
    first = chat(nova, [user("Hello")], "dee", headers)
    conversation = int(first.headers[CONVERSATION])
    chat(nova, [user("Hello"), assistant("Hi Dee."), user("Tell me about cats")], "dee", headers)
    # the user edits the second message: Open WebUI resends the branch it shows now
    edited = chat(
        nova, [user("Hello"), assistant("Hi Dee."), user("Tell me about dogs")], "dee", headers
    )
    assert int(edited.headers[CONVERSATION]) == conversation
    prompt = responder_prompt(server)
    said = [(m["role"], m["content"]) for m in prompt[1:]]
    assert said == [("user", "Hello"), ("assistant", "Hi Dee."), ("user", "Tell me about dogs")]
    # the branch left behind stays stored, but is not sent as history
    assert ("user", "Tell me about cats") in messages_of(nova, conversation)


def test_a_new_conversation_is_said_in_the_trace(nova: Nova, server: OllamaTestServer) -> None:
    server.script("responder", Reply(content="Fresh start."), Reply(content="Still here."))
    resent = [user("an old message Nova never saw"), assistant("an old answer"), user("Hi")]
    first = chat(nova, resent, "eve")
    notices = notices_of(nova, int(first.headers[TURN]))
    assert any("a new conversation" in n and "2 messages" in n for n in notices), notices
    assert "an old answer" in json.dumps(responder_prompt(server))  # the chat as resent
    nxt = chat(nova, [*resent, assistant("Fresh start."), user("Again")], "eve")
    assert nxt.headers[CONVERSATION] == first.headers[CONVERSATION]
    assert not any("new conversation" in n for n in notices_of(nova, int(nxt.headers[TURN])))


def image_message(text: str) -> dict[str, Any]:
    return {
        "role": "user",
        "content": [
            {"type": "text", "text": text},
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}},
        ],
    }


def test_an_image_beside_words_is_said_once_per_conversation(
    nova: Nova, server: OllamaTestServer
) -> None:
    headers = {CHAT: "chat-image"}
    server.script("responder", Reply(content="A fine photo, I am sure."), Reply(content="Yes."))
    first = chat(nova, [image_message("Look at my garden")], "fay", headers)
    answer = reply_of(first)
    assert answer.startswith("A fine photo, I am sure.\n\n(")
    assert "could not see what you attached" in answer
    turn_id = int(first.headers[TURN])
    assert any("image_url" in n and "not read" in n for n in notices_of(nova, turn_id))
    conversation = int(first.headers[CONVERSATION])
    assert messages_of(nova, conversation)[-1] == ("assistant", answer)  # stored as sent
    again = chat(
        nova,
        [image_message("Look at my garden"), assistant(answer), image_message("And now?")],
        "fay",
        headers,
    )
    assert reply_of(again) == "Yes."  # said once per conversation
    assert any("image_url" in n for n in notices_of(nova, int(again.headers[TURN])))


CARD = "You are Seraphina, a forest guardian. Scenario: a glade at dusk."
TOOLS = [{"type": "function", "function": {"name": "web_search", "parameters": {}}}]


def test_the_front_ends_system_prompt_and_tools_are_said_not_used_by_default(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Hello there."))
    response = httpx.post(
        f"{nova.url}/v1/chat/completions",
        json={
            "model": "nova",
            "messages": [{"role": "system", "content": CARD}, user("Who are you?")],
            "tools": TOOLS,
        },
        headers=nova.auth("ada"),
        timeout=60,
    )
    assert response.status_code == 200
    assert "Seraphina" not in json.dumps(responder_prompt(server))
    notices = notices_of(nova, int(response.headers[TURN]))
    assert any("system prompt" in n and "not used" in n for n in notices), notices
    assert any("1 tool definition" in n for n in notices), notices
    assert "Seraphina" not in json.dumps(notices)  # counts, never the text


def test_the_front_ends_system_prompt_as_situation_reaches_the_responder_only(
    nova_situation: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="I am Nova, here in the glade."))
    chat(nova_situation, [{"role": "system", "content": CARD}, user("Where are we?")], "ada")
    system = responder_prompt(server)[0]["content"]
    assert "describes the setting" in system and "forest guardian" in system
    assert system.index("You are Nova") < system.index("forest guardian")  # Nova's first
    judged = [
        json.dumps(r.body["messages"])
        for r in server.requests()
        if r.caller.startswith("judge") or r.caller in ("corrector", "salience", "router")
    ]
    assert judged and all("forest guardian" not in text for text in judged)
