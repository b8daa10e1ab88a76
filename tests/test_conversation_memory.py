"""The conversation is memory too (issue 22, part 3): every stored message, the user's and
Nova's, is found by its words beside the memory items, dated and marked with whose it was —
by the enricher (into the responder's prompt), ``memory search`` and the Why panel. Never
found: another user's messages, a regenerated reply, an aborted turn's message, a forgotten
turn's; forget reaches a later turn that was given such a message. SQLite and PostgreSQL,
against the Ollama test server, through the real engine."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.engine.why import turn_why
from novaberg.errors import NovabergError
from novaberg.memory.retrieval import Heed, recall
from novaberg.memory.store import MemoryStore
from novaberg.testing import OllamaTestServer, Reply
from tests.test_forget_leaves_nothing import places_holding

VET = "Okonkwoville"


def said(obj: object) -> Reply:
    return Reply(content=json.dumps(obj))


PLAIN = said({"score": 0.1, "summary": ""})  # salience: not worth a memory item


@pytest.fixture
async def engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_RETRIES__ATTEMPTS", "1")
    monkeypatch.setenv("NOVABERG_MEMORY__JOBS", "false")
    ollama_env.standing("responder", Reply(content="Noted."))  # not an echo of the message
    eng = await Engine.open(load_settings().settings)
    try:
        yield eng
    finally:
        await eng.aclose()


async def search(engine: Engine, query: str, user: str = "default") -> list[tuple[str, str]]:
    """(role, text) of the stored messages ``memory search`` lists for ``query``."""
    found = await recall(
        engine.db, engine.settings, user, query, what="memory search", messages=Heed(10)
    )
    return [(h.message.role, h.message.text) for h in found.heard]


def responder_system(server: OllamaTestServer) -> str:
    return str(server.requests(caller="responder")[-1].body["messages"][0]["content"])


async def test_an_unsalient_message_of_another_conversation_reaches_the_responder_dated(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", PLAIN)
    first = await engine.run_turn(f"Our vet is the one in {VET}, the practice by the river.")
    assert first.memory_id is None  # salience kept no item: the message alone remembers it
    server.script("salience", PLAIN)
    later = await engine.run_turn(f"Remind me, which vet in {VET} did I mention?")
    assert later.conversation_id != first.conversation_id
    day = str(engine.db.scalar("SELECT created_at FROM messages ORDER BY id LIMIT 1"))[:10]
    [given] = [g.view() for g in later.state["context"].retrieval if g.message_id is not None]
    assert given.reason.startswith("conversation: you said on ")
    assert f"'{VET.lower()}'" in given.reason
    system = responder_system(server)
    assert f"(the user said this on {day}) Our vet is the one in {VET}" in system
    # the trace keeps the message's id and reason, not its words (forget must find them)
    assert VET not in "".join(g.view().model_dump_json() for g in later.state["context"].retrieval)
    why = await engine.db.run(turn_why, engine.db, later.turn_id, "default")
    assert why is not None
    [shown] = [m for m in why.model_dump()["retrieved"] if m.get("kind") == "message"]
    assert shown["text"] == f"Our vet is the one in {VET}, the practice by the river."


async def test_novas_own_reply_is_found_and_marked_as_hers(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", PLAIN)
    server.script("responder", Reply(content=f"I'd suggest the trail to {VET} on Sunday."))
    await engine.run_turn("Any idea for a walk this weekend?")
    assert await search(engine, f"the trail to {VET}") == [
        ("assistant", f"I'd suggest the trail to {VET} on Sunday.")
    ]
    found = await recall(
        engine.db, engine.settings, "default", VET, what="memory search", messages=Heed(3)
    )
    assert found.heard[0].reason.startswith("conversation: Nova said on ")


async def test_the_history_a_turn_is_sent_is_not_given_again_as_found_messages(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", PLAIN)
    first = await engine.run_turn(f"The vet in {VET} was kind.")
    server.script("salience", PLAIN)
    same = await engine.run_turn(f"Was {VET} far?", conversation_id=first.conversation_id)
    assert not [g.view() for g in same.state["context"].retrieval if g.message_id is not None]
    history = [m.content for m in same.state["context"].history]
    assert f"The vet in {VET} was kind." in history  # it came as history, once


async def test_another_users_messages_are_never_found(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", PLAIN)
    await engine.run_turn(f"My vet is in {VET}.", user="alice")
    assert await search(engine, VET, user="bob") == []
    assert await search(engine, VET, user="alice") == [("user", f"My vet is in {VET}.")]


async def test_a_regenerated_reply_and_an_aborted_turn_are_not_found(
    engine: Engine, server: OllamaTestServer
) -> None:
    server.script("salience", PLAIN)
    server.script("responder", Reply(content=f"Try the {VET} bakery."))
    first = await engine.run_turn("Where should I get bread?")
    server.script("responder", Reply(content="Try the market hall."))
    await engine.run_turn(
        "Where should I get bread?", conversation_id=first.conversation_id, regenerate=first.turn_id
    )
    assert await search(engine, VET) == []
    assert await search(engine, "market hall") == [("assistant", "Try the market hall.")]
    # a turn that fails stores no message: its words are not found
    server.script("router", Reply(status=500, error="boom"))
    server.script("responder", Reply(status=500, error="boom"))
    with pytest.raises(NovabergError):
        await engine.run_turn(f"Is the Quarkelberg near {VET}?", drain_followups=False)
    assert await search(engine, "Quarkelberg") == []


async def test_forget_reaches_a_later_turn_that_was_given_a_message_of_the_forgotten_turn(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    server.script("salience", said({"score": 0.9, "summary": "The user has a dog."}))
    server.script("responder", Reply(content=f"A dog! The {VET} meadow is perfect for dogs."))
    first = await engine.run_turn("I got a dog last week.")
    assert first.memory_id is not None
    server.script("salience", PLAIN)
    server.script("responder", Reply(content=f"Yes, {VET} meadow, as I said."))
    later = await engine.run_turn("Which meadow did you recommend?")
    assert [g.view() for g in later.state["context"].retrieval if g.message_id is not None]
    done = store.forget("default", first.memory_id)
    assert done is not None and done.later_turns == 1
    # Nova's later reply repeated the forgotten turn's words: erased with it
    assert places_holding(engine.db, VET) == []
    # the later turn is never sent as history again, and not found either (its user message
    # stays in the database, as the user's own later words do)
    assert await search(engine, "meadow") == []
