"""A slow follow-up in an Open WebUI-shaped chat, end to end through a real ``novaberg serve``
process and the official ``openai`` client: no conversation header, the whole history resent
with each request as Open WebUI does. The turn's self-triggered follow-up takes longer than
``server.followup_wait_s``, so the first response is the answer alone; the follow-up comes at
the start of the next response, and the client then resends it inside that assistant message.
The conversation must continue throughout (history matching copes with where the follow-up
was shown), the follow-up be delivered exactly once, and nothing be stored twice. On SQLite
and on PostgreSQL (one server process per database)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from novaberg.engine.conversations import _matches, _Stored
from novaberg.storage.db import LOOP_GUARD_ENV
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.postgres import create_database, drop_database
from tests.server_helpers import Nova, running_nova

FOLLOWUP_WAIT_S = 1.0
SLOW_S = 2.5
"""The follow-up's model call: longer than FOLLOWUP_WAIT_S, so it misses its response."""
SEPARATOR = "\n\n---\n\n"
CONVERSATION = "X-Novaberg-Conversation-Id"
TURN = "X-Novaberg-Turn-Id"
FOLLOWUP = "The slow second look."
STILL_RUNNING_S = 6.0
"""A follow-up still running when the next message has been answered."""


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def nova(
    request: pytest.FixtureRequest,
    ollama_server: OllamaTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp(f"serve-followup-{request.param}") / "home"
    env = {"NOVABERG_SERVER__FOLLOWUP_WAIT_S": str(FOLLOWUP_WAIT_S), LOOP_GUARD_ENV: "1"}
    url = None
    if request.param == "postgres":
        url = create_database(request.getfixturevalue("postgres_server"))
    try:
        with running_nova(ollama_server, home, ("ada",), extra_env=env, database=url) as started:
            yield started
    finally:
        if url is not None:
            drop_database(request.getfixturevalue("postgres_server"), url)


def slow_last_resort(server: OllamaTestServer, slow_s: float = SLOW_S) -> None:
    """The next turn ends in the thinker's last resort (its reasoning stays prose twice): the
    draft is the answer, and a second pass answers FOLLOWUP after ``slow_s``."""
    server.standing(
        "router",
        Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": True})),
    )
    server.script(
        "responder", Reply(content="Draft answer."), Reply(content=FOLLOWUP, delay_s=slow_s)
    )
    server.script("thinker", Reply.thinking_swallowed_answer("Hmm, prose only."))
    server.script("thinker_nachfass", Reply(content="prose"), Reply(content="more prose"))


def chat(nova: Nova, messages: list[dict[str, str]], stream: bool) -> tuple[str, dict[str, str]]:
    """One Open WebUI-shaped request (the whole history, no conversation header; streamed,
    as Open WebUI asks by default, or not): the reply and the response's headers."""
    with nova.client("ada") as client:
        raw = client.chat.completions.with_raw_response.create(
            model="nova", messages=messages, stream=stream
        )
        if not stream:
            return raw.parse().choices[0].message.content or "", dict(raw.headers)
        chunks = raw.parse()
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        return text, dict(raw.headers)


def followup_done(nova: Nova, parent: int, timeout_s: float = 30.0) -> int:
    """The follow-up turn of ``parent`` once it is stored (read from the event log through
    GET /api/events, as a front-end would)."""
    with httpx.stream(
        "GET", f"{nova.url}/api/events", params={"after": 0}, headers=nova.auth(), timeout=timeout_s
    ) as response:
        assert response.status_code == 200
        data: dict[str, Any] = {}
        event = ""
        for line in response.iter_lines():
            if line.startswith("event:"):
                event = line.partition(":")[2].strip()
            elif line.startswith("data:"):
                data = json.loads(line.partition(":")[2])
            elif line == "" and event == "followup" and data.get("parent_turn_id") == parent:
                return int(data["turn_id"])
    pytest.fail("the follow-up never arrived on /api/events")


def rows(nova: Nova, sql: str, params: tuple[Any, ...]) -> list[dict[str, Any]]:
    db = nova.db()
    try:
        return db.query(sql, params)
    finally:
        db.close()


@pytest.mark.parametrize("stream", [True, False], ids=["streamed", "whole"])
def test_a_late_follow_up_resent_by_open_webui_keeps_one_conversation(
    nova: Nova, server: OllamaTestServer, stream: bool
) -> None:
    slow_last_resort(server)
    history = [{"role": "user", "content": "think hard"}]
    first, headers = chat(nova, history, stream)
    conversation, first_turn = headers[CONVERSATION.lower()], int(headers[TURN.lower()])
    assert first.startswith("Draft answer.") and FOLLOWUP not in first  # it did not wait
    followup_turn = followup_done(nova, first_turn)

    # the next message: the follow-up was not shown yet; it comes first in this response
    server.reset()
    server.script("responder", Reply(content="The next answer."))
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": "and now?"}]
    second, headers = chat(nova, history, stream)
    assert headers[CONVERSATION.lower()] == conversation
    assert second == f"{FOLLOWUP}{SEPARATOR}The next answer."

    # Open WebUI resends that response whole: the follow-up now sits at its start
    server.script("responder", Reply(content="A third answer."))
    history += [{"role": "assistant", "content": second}, {"role": "user", "content": "and then?"}]
    third, headers = chat(nova, history, stream)
    assert headers[CONVERSATION.lower()] == conversation
    assert third == "A third answer."  # the follow-up is not delivered twice

    listed = httpx.get(f"{nova.url}/api/conversations", headers=nova.auth()).json()["items"]
    assert str(listed[0]["id"]) == conversation  # no conversation began after it
    assert listed[0]["turns"] == 4  # the three messages and the follow-up
    stored = httpx.get(
        f"{nova.url}/api/conversations/{conversation}/messages", headers=nova.auth()
    ).json()["items"]
    said = [(m["role"], m["content"]) for m in stored]
    assert [t for r, t in said if r == "user"] == ["think hard", "and now?", "and then?"]
    assistant = [t for r, t in said if r == "assistant"]
    assert assistant.count(FOLLOWUP) == 1
    assert [t for t in assistant if t != FOLLOWUP][1:] == ["The next answer.", "A third answer."]
    deliveries = rows(
        nova, "SELECT channel FROM followup_deliveries WHERE turn_id = ?", (followup_turn,)
    )
    assert deliveries == [{"channel": "openai"}]
    turns = rows(
        nova,
        "SELECT origin, status FROM turns WHERE conversation_id = ? ORDER BY id",
        (int(conversation),),
    )
    assert turns == [
        {"origin": origin, "status": "done"} for origin in ("user", "self_trigger", "user", "user")
    ]  # no regenerate: the resent history was never taken for the same message again


def test_a_stored_follow_up_may_be_missing_or_anywhere_but_nothing_else_may() -> None:
    stored = [
        _Stored("user", "think hard", 1),
        _Stored("assistant", "Draft answer.", 1),
        _Stored("assistant", FOLLOWUP, 2, followup=True),
        _Stored("user", "and now?", 3),
        _Stored("assistant", "The next answer.", 3),
    ]
    user = [("user", "think hard"), ("user", "and now?")]

    def resent(first: str, second: str) -> list[tuple[str, str]]:
        return [user[0], ("assistant", first), user[1], ("assistant", second)]

    assert _matches(stored[:3], [user[0], ("assistant", "Draft answer.")])  # not shown yet
    assert _matches(stored, resent("Draft answer.", f"{FOLLOWUP}{SEPARATOR}The next answer."))
    assert _matches(stored, resent(f"Draft answer.{SEPARATOR}{FOLLOWUP}", "The next answer."))
    assert not _matches(stored, resent("Draft answer.", f"Other.{SEPARATOR}The next answer."))
    assert not _matches(stored, resent("Draft answer.", FOLLOWUP))  # a reply is missing
    assert not _matches(stored, resent(f"{FOLLOWUP}{SEPARATOR}{FOLLOWUP}", "The next answer."))
    assert not _matches(stored, [user[0], ("assistant", "Draft answer.")])  # a user message less


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_a_follow_up_still_running_at_the_next_message_comes_with_the_one_after(
    nova: Nova, server: OllamaTestServer
) -> None:
    slow_last_resort(server, STILL_RUNNING_S)
    history = [{"role": "user", "content": "ponder this"}]
    first, headers = chat(nova, history, True)
    conversation, parent = headers[CONVERSATION.lower()], int(headers[TURN.lower()])
    # the follow-up's model call is out (and held back); the next turns need no second look
    wait_for(lambda: "responder" not in server.pending(), "the follow-up's model call")
    server.standing(
        "router",
        Reply(content=json.dumps({"intent": "question", "tone": "neutral", "needs_check": False})),
    )
    server.script("responder", *(Reply(content=f"Answer {n}.") for n in ("two", "three", "four")))
    history += [{"role": "assistant", "content": first}, {"role": "user", "content": "meanwhile?"}]
    began = time.monotonic()
    second, headers = chat(nova, history, True)
    assert time.monotonic() - began < STILL_RUNNING_S - FOLLOWUP_WAIT_S  # timing held
    assert headers[CONVERSATION.lower()] == conversation
    assert second == "Answer two."  # the follow-up was not ready yet
    followup_turn = followup_done(nova, parent)
    history += [{"role": "assistant", "content": second}, {"role": "user", "content": "and now?"}]
    third, headers = chat(nova, history, True)
    assert headers[CONVERSATION.lower()] == conversation
    assert third == f"{FOLLOWUP}{SEPARATOR}Answer three."
    history += [{"role": "assistant", "content": third}, {"role": "user", "content": "then?"}]
    fourth, headers = chat(nova, history, True)
    assert headers[CONVERSATION.lower()] == conversation
    assert fourth == "Answer four."
    stored = httpx.get(
        f"{nova.url}/api/conversations/{conversation}/messages", headers=nova.auth()
    ).json()["items"]
    said = [(m["role"], m["content"]) for m in stored]
    assert [t for r, t in said if r == "user"] == ["ponder this", "meanwhile?", "and now?", "then?"]
    assert [t for r, t in said if r == "assistant"].count(FOLLOWUP) == 1
    deliveries = rows(
        nova, "SELECT channel FROM followup_deliveries WHERE turn_id = ?", (followup_turn,)
    )
    assert deliveries == [{"channel": "openai"}]
