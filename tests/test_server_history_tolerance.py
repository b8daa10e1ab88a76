"""A chat without a chat id keeps its conversation when the front-end changes what it resends
(issue 20, part 3): SillyTavern's own context trimming, a stopped reply, a message Nova refused,
an edited earlier message, a group chat's "Name: " replies, swipes of a later and of the first
reply. Requests in the shapes SillyTavern 1.12.6 sent (../shared/data: character card as system
messages, a greeting first), written here; a real ``novaberg serve`` and the ``openai`` client."""

from __future__ import annotations

from collections.abc import Iterator

import openai
import pytest

from novaberg.engine.conversations import _shared
from novaberg.testing import OllamaTestServer
from tests.server_helpers import Nova, running_nova

CARD = [
    {"role": "system", "content": "Write Seraphina's next reply in a fictional chat with Ada."},
    {"role": "system", "content": "[Seraphina's Personality= caring, protective]"},
    {"role": "system", "content": "[Start a new Chat]"},
    {"role": "assistant", "content": "*You wake with a start* Seraphina greets you."},
]
Exchange = tuple[str, str]


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-history") / "home"
    with running_nova(ollama_server, home, ("ada", "bob", "cy", "dee", "eli", "fay")) as started:
        yield started


def messages(exchanges: list[Exchange], new: str, card: bool = True) -> list[dict[str, str]]:
    said = [*CARD] if card else []
    for asked, answered in exchanges:
        said += [{"role": "user", "content": asked}, {"role": "assistant", "content": answered}]
    return [*said, {"role": "user", "content": new}]


def send(nova: Nova, user: str, said: list[dict[str, str]]) -> tuple[int, int, str]:
    """(conversation, turn, reply) of one request."""
    raw = nova.client(user).chat.completions.with_raw_response.create(model="nova", messages=said)
    reply = raw.parse().choices[0].message.content or ""
    return (
        int(raw.headers["X-Novaberg-Conversation-Id"]),
        int(raw.headers["X-Novaberg-Turn-Id"]),
        reply,
    )


def chat(nova: Nova, user: str, asked: list[str]) -> tuple[int, list[Exchange]]:
    """A chat of ``asked`` messages, each resending the whole chat: its conversation."""
    exchanges: list[Exchange] = []
    conversations = set()
    for text in asked:
        conversation, _, reply = send(nova, user, messages(exchanges, text))
        conversations.add(conversation)
        exchanges.append((text, reply))
    assert len(conversations) == 1
    return conversations.pop(), exchanges


def stored_users(nova: Nova, conversation: int) -> list[str]:
    db = nova.db()
    try:
        rows = db.query(
            "SELECT m.content FROM messages m JOIN turns t ON t.id = m.turn_id "
            "WHERE m.conversation_id = ? AND m.role = 'user' AND t.status = 'done' ORDER BY m.id",
            (conversation,),
        )
    finally:
        db.close()
    return [str(r["content"]) for r in rows]


def conversations_of(nova: Nova, user: str) -> int:
    db = nova.db()
    try:
        return int(db.scalar("SELECT COUNT(*) FROM conversations WHERE user_id = ?", (user,)))
    finally:
        db.close()


def test_a_trimmed_head_continues_the_same_conversation(
    nova: Nova, server: OllamaTestServer
) -> None:
    asked = [f"Trim test message number {i}: tell me one more thing" for i in range(1, 6)]
    conversation, exchanges = chat(nova, "ada", asked)
    for keep in (3, 2, 1):  # SillyTavern drops the oldest messages to fit its context
        trimmed = messages(exchanges[-keep:], f"Next after keeping {keep}.", card=False)
        trimmed.insert(0, CARD[0])
        again, _, reply = send(nova, "ada", trimmed)
        assert again == conversation, keep
        exchanges.append((f"Next after keeping {keep}.", reply))
    assert conversations_of(nova, "ada") == 1


def test_a_stopped_reply_and_a_refused_message_keep_the_conversation(
    nova: Nova, server: OllamaTestServer
) -> None:
    conversation, exchanges = chat(nova, "bob", ["Hi, Ada here.", "Tell me about swarming."])
    stopped = [*exchanges[:-1], (exchanges[-1][0], "...")]  # the reply as far as it streamed
    again, _, reply = send(nova, "bob", messages(stopped, "What about after stopping?"))
    assert again == conversation
    with pytest.raises(openai.BadRequestError):  # too long: refused, but it stays in the chat
        send(nova, "bob", messages([*stopped, ("What about after stopping?", reply)], "x" * 9000))
    said = messages([*stopped, ("What about after stopping?", reply)], "x" * 9000)
    said.append({"role": "user", "content": "Sorry, that was long. Are you there?"})
    assert send(nova, "bob", said)[0] == conversation
    assert stored_users(nova, conversation)[-1] == "Sorry, that was long. Are you there?"
    # the refused message is not the responder's history: the exchange before it is
    prompt = server.requests(caller="responder")[-1].body["messages"]
    assert not any("x" * 100 in m["content"] for m in prompt)
    assert any(m["content"] == "What about after stopping?" for m in prompt)


def test_an_edited_earlier_message_and_group_chat_names_keep_the_conversation(
    nova: Nova, server: OllamaTestServer
) -> None:
    conversation, exchanges = chat(
        nova, "cy", ["Hello both!", "Should I get a third hive?", "Why?"]
    )
    edited = [("Hello both of you!", exchanges[0][1]), *exchanges[1:]]
    assert send(nova, "cy", messages(edited, "And honey supers?"))[0] == conversation
    named = [(asked, f"Beekeeper Nova: {answered}") for asked, answered in exchanges]
    assert send(nova, "cy", messages(named, "Thanks, both!"))[0] == conversation
    assert conversations_of(nova, "cy") == 1


def test_swipes_of_a_later_and_of_the_first_reply_are_regenerates(
    nova: Nova, server: OllamaTestServer
) -> None:
    first_said = messages([], "Hi Nova, I'm Ada and I keep bees")
    conversation, first_turn, _ = send(nova, "dee", first_said)
    again, turn, _ = send(nova, "dee", first_said)  # a swipe of the first reply
    assert again == conversation and turn != first_turn
    assert stored_users(nova, conversation) == ["Hi Nova, I'm Ada and I keep bees"]
    _, exchanges = chat(nova, "dee", ["Hi Nova, I'm Ada and I keep bees", "Which hive type?"])
    trimmed = messages(exchanges[-1:], "And which bees?", card=False)
    send(nova, "dee", trimmed)
    swiped, _, _ = send(nova, "dee", trimmed)  # a swipe after trimming: asked again
    assert swiped == conversation
    assert stored_users(nova, conversation).count("And which bees?") == 1


def test_a_new_chat_with_another_greeting_and_the_same_first_message_is_its_own(
    nova: Nova, server: OllamaTestServer
) -> None:
    """SillyTavern's default card, then a card of the user's own, each opened with the same
    words (../shared/data, requests 32 and 33): two chats, not a swipe of the first one."""
    first_said = messages([], "Hi, I'm Ada. Who are you?")
    first, first_turn, first_reply = send(nova, "cy", first_said)
    other_card = [
        {"role": "system", "content": "Write Beekeeper Nova's next reply."},
        {"role": "assistant", "content": "*Bees hum.* Welcome to the apiary!"},
        {"role": "user", "content": "Hi, I'm Ada. Who are you?"},
    ]
    second, _, _ = send(nova, "cy", other_card)
    assert second != first
    db = nova.db()
    try:
        kept = db.query(
            "SELECT content FROM messages WHERE turn_id = ? AND role = 'assistant'", (first_turn,)
        )
    finally:
        db.close()
    assert [r["content"] for r in kept] == [first_reply]  # the first chat's reply stays
    swiped, _, _ = send(nova, "cy", first_said)  # its own swipe still finds the first chat
    assert swiped == first


def test_two_chats_that_share_a_first_message_stay_apart(
    nova: Nova, server: OllamaTestServer
) -> None:
    first, _ = chat(nova, "eli", ["Hello again, it's Ada.", "When should I buy my bees?"])
    second, _ = chat(nova, "eli", ["Hello again, it's Ada.", "Do I need a veil?"])
    assert first != second
    assert stored_users(nova, second) == ["Hello again, it's Ada.", "Do I need a veil?"]


def test_a_history_that_shares_too_little_starts_a_new_conversation(
    nova: Nova, server: OllamaTestServer
) -> None:
    conversation, exchanges = chat(nova, "fay", ["One.", "Two.", "Three.", "Four."])
    foreign = [("Alpha.", "A."), ("Beta.", "B."), ("Gamma.", "C."), exchanges[-1]]
    assert send(nova, "fay", messages(foreign, "Five?"))[0] != conversation


def test_shared_counts_the_resent_messages_held_in_order() -> None:
    assert _shared(["a", "b", "c"], ["x", "a", "b", "c"]) == 3  # a trimmed head
    assert _shared(["a", "B", "c"], ["a", "b", "c"]) == 2  # an edit
    assert _shared(["a", "c"], ["a", "b", "c"]) == 2  # a deletion
    assert _shared(["c", "b", "a"], ["a", "b", "c"]) == 1  # order counts
    assert _shared([], ["a"]) == 0
