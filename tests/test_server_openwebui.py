"""Open WebUI- and SillyTavern-shaped requests against a real ``novaberg serve`` process: a
front-end key naming its end users in plain headers (no JWT secret on this server), chat ids,
the whole history resent with every request, regenerate, and CORS off by default."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jwt as pyjwt
import pytest

from novaberg.engine.conversations import history_key
from novaberg.server.errors import ApiProblem
from novaberg.server.frontend import end_user, end_user_name
from novaberg.storage.api_users import UserStore
from novaberg.storage.db import LOOP_GUARD_ENV
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import Nova, running_nova

CONVERSATION = "X-Novaberg-Conversation-Id"
TURN = "X-Novaberg-Turn-Id"
CHAT = "X-OpenWebUI-Chat-Id"
END_USER = "X-OpenWebUI-User-Id"


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nova(
    request: pytest.FixtureRequest,
    ollama_server: OllamaTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Nova]:
    """The server on SQLite, then on PostgreSQL (history matching and regenerate are SQL)."""
    home = tmp_path_factory.mktemp("serve-owui") / "home"
    url = None
    if request.param == "postgres":
        url = create_database(request.getfixturevalue("postgres_server"))
    guard = {LOOP_GUARD_ENV: "1"}  # a database call on the server's event loop raises
    try:
        with running_nova(
            ollama_server, home, ("ada", "bob"), extra_env=guard, database=url
        ) as started:
            db = started.db()
            try:
                started.keys["owui"] = UserStore(db).add("owui", frontend=True)
            finally:
                db.close()
            yield started
    finally:
        if url is not None:
            drop_database(request.getfixturevalue("postgres_server"), url)


def salient(summary: str) -> Reply:
    return Reply(content=json.dumps({"score": 0.9, "summary": summary}))


def chat(
    nova: Nova,
    messages: list[dict[str, str]],
    user: str = "ada",
    headers: dict[str, str] | None = None,
    stream: bool = False,
) -> httpx.Response:
    body: dict[str, Any] = {"model": "nova", "messages": messages, "stream": stream}
    response = httpx.post(
        f"{nova.url}/v1/chat/completions",
        json=body,
        headers={**nova.auth(user), **(headers or {})},
        timeout=60,
    )
    return response


def reply_of(response: httpx.Response) -> str:
    assert response.status_code == 200, response.text
    if response.headers["content-type"].startswith("text/event-stream"):
        lines = [x for x in response.text.splitlines() if x.startswith("data: {")]
        return "".join(
            json.loads(x.removeprefix("data: "))["choices"][0]["delta"].get("content") or ""
            for x in lines
        )
    return str(response.json()["choices"][0]["message"]["content"])


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def assistant(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def stored(nova: Nova, conversation: int) -> list[tuple[str, str]]:
    db = nova.db()
    try:
        rows = db.query(
            "SELECT role, content FROM messages WHERE conversation_id = ? ORDER BY id",
            (conversation,),
        )
    finally:
        db.close()
    return [(r["role"], r["content"]) for r in rows]


def memory_count(nova: Nova, who: str) -> int:
    db = nova.db()
    try:
        return int(db.scalar("SELECT count(*) FROM memories WHERE user_id = ?", (who,)))
    finally:
        db.close()


def owner(nova: Nova, conversation: int) -> str | None:
    db = nova.db()
    try:
        return db.conversation_user(conversation)
    finally:
        db.close()


def test_a_frontend_key_runs_each_end_user_as_their_own_user(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Hi Alice."), Reply(content="Hi Bert."))
    alice = chat(nova, [user("Hi")], "owui", {END_USER: "3f2a-alice", CHAT: "c-1"})
    bert = chat(nova, [user("Hi")], "owui", {END_USER: "9b7c-bert", CHAT: "c-1"})
    assert reply_of(alice) == "Hi Alice." and reply_of(bert) == "Hi Bert."
    a, b = int(alice.headers[CONVERSATION]), int(bert.headers[CONVERSATION])
    assert a != b  # the same chat id, two end users: two conversations
    assert owner(nova, a) == "owui/3f2a-alice" and owner(nova, b) == "owui/9b7c-bert"
    listed = httpx.get(
        f"{nova.url}/api/conversations", headers={**nova.auth("owui"), END_USER: "9b7c-bert"}
    ).json()["items"]
    assert [c["id"] for c in listed] == [b]


def test_a_normal_key_ignores_the_end_user_headers(nova: Nova, server: OllamaTestServer) -> None:
    server.script("responder", Reply(content="Hello."))
    response = chat(nova, [user("Who am I?")], "bob", {END_USER: "someone-else"})
    assert owner(nova, int(response.headers[CONVERSATION])) == "bob"


@pytest.mark.parametrize("bad", ["a/b", "x" * 129, "-lead", "sp ace", ""])
def test_a_malformed_end_user_id_is_refused(nova: Nova, server: OllamaTestServer, bad: str) -> None:
    response = chat(nova, [user("hi")], "owui", {END_USER: bad})
    assert response.status_code == 401, response.text
    assert response.json()["error"]["code"] == "invalid_end_user"
    assert bad not in response.text or not bad


def test_the_resent_history_continues_its_conversation_and_is_never_stored(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Nice to meet you."), Reply(content="Fine, thanks."))
    system = {"role": "system", "content": "You are Nova."}
    first = chat(nova, [system, user("I am Carla")])
    conversation = int(first.headers[CONVERSATION])
    # Open WebUI resends everything, with the reasoning it showed folded into the reply
    shown = '<details type="reasoning" done="true">\nrouter\n</details>\nNice to meet you.'
    second = chat(nova, [system, user("I am Carla"), assistant(shown), user("How are you?")])
    assert reply_of(second) == "Fine, thanks."
    assert int(second.headers[CONVERSATION]) == conversation  # found by its history
    assert stored(nova, conversation) == [
        ("user", "I am Carla"),
        ("assistant", "Nice to meet you."),
        ("user", "How are you?"),
        ("assistant", "Fine, thanks."),
    ]
    # a named conversation with a history that says something else: Nova keeps her own
    server.script("responder", Reply(content="Still me."))
    named = chat(
        nova,
        [user("I am Carla"), assistant("a reply Nova never gave"), user("And now?")],
        headers={CONVERSATION: str(conversation)},
    )
    assert reply_of(named) == "Still me."
    messages = stored(nova, conversation)
    assert ("assistant", "a reply Nova never gave") not in messages
    assert messages[-2:] == [("user", "And now?"), ("assistant", "Still me.")]
    assert len(messages) == 6


def test_a_history_that_matches_nothing_starts_a_new_conversation(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="New."))
    response = chat(nova, [user("never said"), assistant("never answered"), user("so?")])
    conversation = int(response.headers[CONVERSATION])
    assert stored(nova, conversation) == [("user", "so?"), ("assistant", "New.")]


def test_a_greeting_before_the_first_user_message_is_not_novas(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="Ahoy."), Reply(content="Aye."))
    greeting = assistant("*The ship creaks.* Welcome aboard, traveller.")  # SillyTavern
    first = chat(nova, [{"role": "system", "content": "card"}, greeting, user("Ahoy there")])
    again = chat(nova, [greeting, user("Ahoy there"), assistant("Ahoy."), user("Set sail")])
    assert again.headers[CONVERSATION] == first.headers[CONVERSATION]
    assert reply_of(again) == "Aye."


def regenerate_case(
    nova: Nova, server: OllamaTestServer, headers: dict[str, str], who: str, stream: bool
) -> None:
    """Two turns, then the second asked for again: nothing stored twice, the reply replaced."""
    server.script("salience", salient("The user sails."), salient("The user sails fast."))
    server.script("responder", Reply(content="Hello."), Reply(content="Old reply."))
    first = chat(nova, [user("I sail")], who, headers)
    conversation = int(first.headers[CONVERSATION])
    history = [user("I sail"), assistant(reply_of(first)), user("Fast boats?")]
    old = chat(nova, history, who, headers)
    assert reply_of(old) == "Old reply."
    assert int(old.headers[CONVERSATION]) == conversation
    before = stored(nova, conversation)
    memories = memory_count(nova, owner(nova, conversation) or "")
    assert len(before) == 4 and memories == 2

    server.script("salience", salient("The user sails fast (again)."))
    server.script("responder", Reply(content="New reply."))
    again = chat(nova, history, who, headers, stream=stream)  # the same history and message
    assert reply_of(again) == "New reply."
    assert int(again.headers[CONVERSATION]) == conversation
    assert int(again.headers[TURN]) != int(old.headers[TURN])
    after = stored(nova, conversation)
    assert len(after) == len(before)  # the user's message is not stored twice
    assert after[:3] == before[:3] and after[3] == ("assistant", "New reply.")
    assert memory_count(nova, owner(nova, conversation) or "") == memories  # nor its memory
    listed = httpx.get(
        f"{nova.url}/api/conversations/{conversation}/messages",
        headers={**nova.auth(who), **{k: v for k, v in headers.items() if k == END_USER}},
    ).json()
    contents = [m["content"] for m in listed["items"]] if "items" in listed else []
    assert contents == ["I sail", "Hello.", "Fast boats?", "New reply."]
    # the regenerated turn ran without the old exchange in its history
    prompt = json.dumps(server.requests(caller="responder")[-1].body["messages"])
    assert "Old reply." not in prompt and "Hello." in prompt
    # and the next message continues after the new reply
    server.script("responder", Reply(content="Onwards."))
    nxt = chat(
        nova, [*history, assistant("New reply."), user("Onwards?")], who, headers, stream=stream
    )
    assert int(nxt.headers[CONVERSATION]) == conversation
    assert len(stored(nova, conversation)) == 6


def test_regenerate_in_a_named_open_webui_chat(nova: Nova, server: OllamaTestServer) -> None:
    regenerate_case(nova, server, {END_USER: "regen-user", CHAT: "regen-chat"}, "owui", False)


def test_regenerate_found_by_history_alone_streamed(nova: Nova, server: OllamaTestServer) -> None:
    regenerate_case(nova, server, {}, "bob", True)


def test_the_same_message_sent_again_later_is_a_new_turn(
    nova: Nova, server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="One."), Reply(content="Two."))
    headers = {CHAT: "twice"}
    first = chat(nova, [user("ok")], "ada", headers)
    second = chat(nova, [user("ok"), assistant("One."), user("ok")], "ada", headers)
    conversation = int(first.headers[CONVERSATION])
    assert int(second.headers[CONVERSATION]) == conversation
    assert stored(nova, conversation) == [
        ("user", "ok"),
        ("assistant", "One."),
        ("user", "ok"),
        ("assistant", "Two."),
    ]


def test_cors_is_off_by_default(nova: Nova, server: OllamaTestServer) -> None:
    preflight = httpx.options(
        f"{nova.url}/v1/chat/completions",
        headers={
            "Origin": "http://localhost:3000",
            "Access-Control-Request-Method": "POST",
            "Access-Control-Request-Headers": "authorization,content-type",
        },
    )
    assert "access-control-allow-origin" not in preflight.headers
    plain = httpx.get(
        f"{nova.url}/v1/models", headers={**nova.auth(), "Origin": "http://localhost:3000"}
    )
    assert plain.status_code == 200 and "access-control-allow-origin" not in plain.headers


def readme_section() -> str:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Nova in Open WebUI and SillyTavern")
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_readme_examples_for_front_ends_run(
    nova: Nova, server: OllamaTestServer, capsys: pytest.CaptureFixture[str]
) -> None:
    section = readme_section()
    [example] = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    example = example.replace("http://127.0.0.1:8484", nova.url)
    example = example.replace("YOUR_KEY", nova.keys["ada"])
    replies = ("Bees!", "Two hives.", "Start with 2.")
    server.script("responder", *(Reply(content=t) for t in replies))
    exec(compile(example, "README.md", "exec"), {})
    second, third = capsys.readouterr().out.splitlines()
    assert second.split(" ", 1)[1] == "Two hives." and third.split(" ", 1)[1] == "Start with 2."
    conversation = int(second.split()[0])
    assert int(third.split()[0]) == conversation
    assert [c for _, c in stored(nova, conversation)] == [
        "I keep bees",
        "Bees!",
        "How many hives should I start with?",
        "Start with 2.",
    ]

    curl = next(b for b in re.findall(r"```sh\n(.*?)```", section, flags=re.DOTALL) if "curl" in b)
    server.script("responder", Reply(content="Hello Alice."))
    done = subprocess.run(
        ["bash", "-c", curl.replace("http://127.0.0.1:8484", nova.url)],
        env={**os.environ, "WEBUI_KEY": nova.keys["owui"]},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["choices"][0]["message"]["content"] == "Hello Alice."
    db = nova.db()
    try:
        owners = db.query("SELECT user_id FROM conversations WHERE user_id = 'owui/3f2a-alice'")
    finally:
        db.close()
    assert owners


def test_history_keys_ignore_what_front_ends_do_to_replies() -> None:
    stored = [
        ("user", "Hi"),
        ("assistant", "Hello."),
        ("assistant", "By the way, your cat?"),  # a follow-up, its own stored message
        ("user", "Fine"),
        ("assistant", "Good."),
    ]
    shown = [
        ("assistant", "*A greeting the card wrote.*"),  # before the first user message
        ("user", "Hi "),
        ("assistant", '<details type="reasoning" done="true">\nrouter\n</details>\nHello.'),
        ("user", "Fine"),
        ("assistant", "<think>responder</think>By the way, your cat?\n\n---\n\nGood."),
    ]
    assert history_key(shown) == history_key(stored)  # a follow-up shown with the next answer
    assert history_key([*shown[:-1], ("assistant", "Bad.")]) != history_key(stored)
    assert history_key([("user", "Fine"), *shown[1:3]]) != history_key(stored)  # user order


def test_end_user_headers_without_and_with_a_secret() -> None:
    assert end_user({}, None, required=True) is None
    assert end_user({END_USER: " 3f2a-uuid "}, None, required=True) == "3f2a-uuid"
    assert end_user_name("webui", "3f2a-uuid") == "webui/3f2a-uuid"
    assert end_user_name("webui", None) == "webui"
    signed = pyjwt.encode(
        {"sub": "u-1", "iss": "open-webui", "exp": int(time.time()) + 60}, "s" * 32, "HS256"
    )
    assert end_user({"X-OpenWebUI-User-Jwt": signed}, "s" * 32, required=True) == "u-1"
    assert end_user({}, "s" * 32, required=False) is None  # GET /v1/models
    for headers in ({}, {END_USER: "u-1"}, {"X-OpenWebUI-User-Jwt": signed + "x"}):
        with pytest.raises(ApiProblem) as refused:
            end_user(headers, "s" * 32, required=True)
        assert refused.value.status_code == 401
    with pytest.raises(ApiProblem):  # a token nobody here can verify
        end_user({"X-OpenWebUI-User-Jwt": signed}, None, required=True)
