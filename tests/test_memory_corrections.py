"""Corrections by hand (issue 23, parts 2–3): ``memory correct`` replaces what an item says,
``memory retract`` ends it with no successor, and ``memory show`` gives the chain, newest
first. Retrieval never returns an old or retracted version; its profile statements go; forget
of any version removes the whole chain. The store on SQLite and PostgreSQL, the commands
through the real CLI."""

from __future__ import annotations

import asyncio
import json

import pytest

from novaberg.config import Settings, load_settings
from novaberg.errors import UsageError
from novaberg.memory.retrieval import recall
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.memories import Statement
from tests.test_cli import run
from tests.test_forget_leaves_nothing import places_holding

USER = "default"
BERLIN = "My sister Quillana moved to Berlin"
MUNICH = "My sister Quillana moved to Munich"
SETTINGS = Settings(memory={"embedder": "off"})


def _fact(db: Database, text: str = BERLIN) -> int:
    with db.transaction() as c:
        return MemoryStore.add(c, USER, "long_term", text, 0.8, "fact:sister").id


def _found(db: Database, query: str) -> list[str]:
    found = asyncio.run(recall(db, SETTINGS, USER, query))
    return [r.item.text for r in found.items]


def test_a_correction_supersedes_and_only_the_new_version_is_found(db: Database) -> None:
    store = MemoryStore(db)
    old = _fact(db)
    new = store.correct(USER, old, MUNICH)
    assert new is not None and new.text == MUNICH and new.kind == "long_term" and new.current
    before = store.get(USER, old)
    assert before is not None and before.valid_to is not None and before.superseded_by == new.id
    assert _found(db, "Where does Quillana live?") == [MUNICH]
    chain = store.history(USER, old)
    assert [v.id for v in chain] == [new.id, old]  # newest first, from either version
    assert [v.id for v in store.history(USER, new.id)] == [new.id, old]
    with pytest.raises(UsageError, match=r"no longer current .*superseded by memory"):
        store.correct(USER, old, "My sister moved to Hamburg")
    assert store.correct("someone-else", new.id, "x") is None


def test_a_retraction_ends_the_item_with_no_successor(db: Database) -> None:
    store = MemoryStore(db)
    dog = _fact(db, "I have a dog named Quillobert")
    ended = store.retract(USER, dog)
    assert ended is not None and ended.valid_to is not None and ended.superseded_by is None
    assert _found(db, "Quillobert the dog") == []
    with pytest.raises(UsageError, match="retracted"):
        store.retract(USER, dog)
    assert store.retract("someone-else", dog) is None


def test_profile_statements_resting_on_the_old_fact_are_left_out(db: Database) -> None:
    store = MemoryStore(db)
    old = _fact(db)
    store.set_profile(
        USER, "core", [Statement("Her sister lives in Berlin.", [old]), Statement("Likes tea.", [])]
    )
    store.correct(USER, old, MUNICH)
    assert store.profile(USER)["core"].text == "Likes tea."


def test_forgetting_the_new_version_forgets_the_whole_chain(db: Database) -> None:
    store = MemoryStore(db)
    old = _fact(db)
    new = store.correct(USER, old, MUNICH)
    assert new is not None
    done = store.forget(USER, new.id)
    assert done is not None and sorted(done.ids) == sorted([old, new.id])
    assert store.get(USER, old) is None  # the wrong version does not come back as current
    assert places_holding(db, "Quillana") == []


def test_the_commands_correct_retract_and_show_the_history() -> None:
    db = Database(load_settings().settings.database)
    try:
        old = _fact(db)
    finally:
        db.close()
    done = run("memory", "correct", str(old), MUNICH, "--json")
    assert done.returncode == 0, done.stderr
    new = json.loads(done.stdout)
    assert new["text"] == MUNICH and new["valid_to"] is None
    shown = json.loads(run("memory", "show", str(new["id"]), "--json").stdout)
    assert [(v["id"], v["ended"]) for v in shown["history"]] == [
        (new["id"], None),
        (old, "superseded"),
    ]
    assert shown["history"][0]["why"] == f"corrected by hand (memory {old})"
    again = run("memory", "correct", str(old), "Hamburg")
    assert again.returncode != 0 and "no longer current" in again.stderr
    gone = run("memory", "retract", str(new["id"]), "--json")
    assert gone.returncode == 0, gone.stderr
    assert json.loads(gone.stdout)["valid_to"] is not None
    text = run("memory", "show", str(new["id"])).stdout
    assert "history, newest first:" in text and "(retracted)" in text
    missing = run("memory", "retract", "999999")
    assert missing.returncode != 0 and "there is no memory 999999" in missing.stderr
