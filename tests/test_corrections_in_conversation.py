"""Corrections said in conversation (issue 23, part 1): the router names what was wrong, the
enricher finds the memory it is about, the responder is told what changed (and the old version
is not given as current), and the turn's own transaction applies it, so that it holds before
Nova's next answer. A retraction ends the item; a correction about nothing Nova remembers, or
one that fits several memories, changes nothing and says so. English and German, SQLite and
PostgreSQL, through the real engine and the Ollama test server."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.errors import NovabergError
from novaberg.memory.store import MemoryStore
from novaberg.storage.memories import Statement
from novaberg.testing import OllamaTestServer, Reply

USER = "default"


def route(correction: dict[str, Any] | None) -> Reply:
    return Reply(
        content=json.dumps(
            {"intent": "sharing", "tone": "warm", "needs_check": False, "correction": correction}
        )
    )


PLAIN = Reply(content=json.dumps({"score": 0.1, "summary": ""}))


@pytest.fixture
async def engine(
    ollama_env: OllamaTestServer, database_target: Path | str, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Engine]:
    if isinstance(database_target, str):
        monkeypatch.setenv("NOVABERG_DATABASE_URL", database_target)
    monkeypatch.setenv("NOVABERG_TRIBUNAL__JUDGES", "")
    monkeypatch.setenv("NOVABERG_MEMORY__JOBS", "false")
    monkeypatch.setenv("NOVABERG_MEMORY__EMBEDDER", "off")
    ollama_env.standing("responder", Reply(content="Got it."))
    ollama_env.standing("salience", PLAIN)
    eng = await Engine.open(load_settings().settings)
    try:
        yield eng
    finally:
        await eng.aclose()


def fact(engine: Engine, text: str, key: str) -> int:
    with engine.db.transaction() as c:
        return MemoryStore.add(c, USER, "long_term", text, 0.8, key).id


def system_prompt(server: OllamaTestServer) -> str:
    return str(server.requests(caller="responder")[-1].body["messages"][0]["content"])


async def test_a_correction_takes_effect_before_the_next_answer(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    old = fact(engine, "Ada's sister Quillana moved to Berlin.", "fact:sister")
    store.set_profile(USER, "core", [Statement("Her sister lives in Berlin.", [old])])
    server.script("router", route({"kind": "correct", "wrong": "Berlin", "right": "Munich"}))
    done = await engine.run_turn("No, Munich, not Berlin!")
    system = system_prompt(server)
    assert '"Ada\'s sister Quillana moved to Berlin." no longer holds' in system
    assert '"Ada\'s sister Quillana moved to Munich."' in system
    assert "Her sister lives in Berlin." not in system  # the profile statement went too
    trace = json.loads(str(engine.db.turn(done.turn_id)["trace_json"]))  # type: ignore[index]
    assert trace["correction"] == {"outcome": "correct", "memory_id": old}
    [new] = [v for v in store.history(USER, old) if v.current]
    assert new.text == "Ada's sister Quillana moved to Munich."
    assert new.source_turn_id == done.turn_id  # provenance: the turn that said it
    # the next turn is given the new version only
    await engine.run_turn("Where does Quillana live now?")
    system = system_prompt(server)
    assert "moved to Munich" in system and "moved to Berlin" not in system


async def test_a_retraction_in_german_ends_the_item(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    dog = fact(engine, "Ada hat einen Hund namens Quillobert.", "fact:dog")
    server.script("router", route({"kind": "retract", "wrong": "Hund", "right": None}))
    await engine.run_turn("Ich habe keinen Hund mehr.")
    assert "no longer holds and is ended" in system_prompt(server)
    item = store.get(USER, dog)
    assert item is not None and item.valid_to is not None and item.superseded_by is None


async def test_a_correction_about_nothing_remembered_changes_nothing_and_says_so(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    fact(engine, "Ada likes green tea.", "fact:tea")
    server.script("router", route({"kind": "correct", "wrong": "Quarzburg", "right": "Lyon"}))
    await engine.run_turn("No, Lyon, not Quarzburg.")
    assert "you remember nothing about it" in system_prompt(server)
    assert [i.text for i in store.items(USER)] == ["Ada likes green tea."]


async def test_an_ambiguous_correction_asks_and_changes_nothing(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    fact(engine, "Ada's brother lives in Quarzburg.", "fact:brother")
    fact(engine, "Ada's office is in Quarzburg.", "fact:office")
    server.script("router", route({"kind": "correct", "wrong": "Quarzburg", "right": "Lyon"}))
    done = await engine.run_turn("No, Lyon, not Quarzburg.")
    system = system_prompt(server)
    assert "Ask which one they mean" in system
    assert "Ada's brother lives in Quarzburg." in system and "Ada's office" in system
    assert all(i.current for i in store.items(USER)) and len(store.items(USER)) == 2
    trace = json.loads(str(engine.db.turn(done.turn_id)["trace_json"]))  # type: ignore[index]
    assert trace["correction"] == {"outcome": "ambiguous", "memory_id": None}


async def test_a_turn_that_fails_applies_no_correction(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    old = fact(engine, "Ada's sister moved to Berlin.", "fact:sister")
    server.script("router", route({"kind": "correct", "wrong": "Berlin", "right": "Munich"}))
    server.script("responder", *[Reply(status=500, error="boom")] * 8)  # every retry fails
    with pytest.raises(NovabergError):
        await engine.run_turn("No, Munich, not Berlin!", drain_followups=False)
    item = store.get(USER, old)
    assert item is not None and item.current  # the turn failed: nothing changed


async def test_a_correction_the_message_does_not_make_is_ignored(
    engine: Engine, server: OllamaTestServer
) -> None:
    store = MemoryStore(engine.db)
    old = fact(engine, "Ada's sister moved to Berlin.", "fact:sister")
    # a small model inventing a correction: its words are not in the message
    server.script("router", route({"kind": "correct", "wrong": "Berlin", "right": "Munich"}))
    done = await engine.run_turn("How are you today?")
    assert done.state["router"].correction is None
    item = store.get(USER, old)
    assert item is not None and item.current
    assert "corrected" not in system_prompt(server)
