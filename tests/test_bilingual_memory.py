"""A user who writes two languages is served by both (issue 22, part 4): with the default
``memory.embedder = auto`` each text gets the embedder of its own language — an English item
MiniLM's vector, a German one E5's, a question the vectors of its language's embedder — so a
German question that shares no word with a German fact finds it by meaning while the
``language`` setting stays English. Through the real store, index, catch-up and reindex."""

from __future__ import annotations

import asyncio
import json

import pytest

from novaberg.config import load_settings
from novaberg.memory.embedding import choose
from novaberg.memory.language import language_of
from novaberg.memory.retrieval import catch_up_now, recall
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from tests.test_cli import run

USER = "default"
EN_FACT = "I adopted a dog named Bruno last spring"
DE_FACT = "Ich habe eine Katze namens Mimi"
NOISE = [
    "My colleague Lena bought new curtains",
    "Ich war gestern mit meinem Bruder im Kino",
    "My sister Clara lives in Lisbon",
    "Meine Kollegin fährt jeden Tag mit dem Rad zur Arbeit",
]


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("What kind of pet do I own?", "en"),
        ("Welches Haustier besitze ich?", "de"),
        ("Wie heißt meine Katze?", "de"),
        ("My sister lives in München", "en"),
        ("Ich liebe New York", "de"),
        ("Bruno", None),
        ("42", None),
    ],
)
def test_a_texts_language_is_told_by_its_function_words(text: str, language: str | None) -> None:
    assert language_of(text) == language


def test_auto_picks_each_texts_own_embedder_and_the_setting_where_a_text_does_not_tell(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    settings = load_settings().settings  # language = en
    assert choose(settings, DE_FACT).name == "e5-small-q4"
    assert choose(settings, EN_FACT).name == "minilm-l6-v2"
    assert choose(settings, "Bruno").name == "minilm-l6-v2"  # undecided: the setting
    monkeypatch.setenv("NOVABERG_LANGUAGE", "de")
    assert choose(load_settings().settings, "Bruno").name == "e5-small-q4"
    monkeypatch.setenv("NOVABERG_MEMORY__EMBEDDER", "minilm-l6-v2")  # named: every text
    assert choose(load_settings().settings, DE_FACT).name == "minilm-l6-v2"


def _store_items(db: Database) -> dict[str, int]:
    ids = {}
    with db.transaction() as c:
        for n, text in enumerate([EN_FACT, DE_FACT, *NOISE]):
            ids[text] = MemoryStore.add(c, USER, "long_term", text, 0.7, f"fact:{n}").id
    return ids


def _vectors(db: Database) -> dict[str, set[str]]:
    rows = db.query(
        "SELECT m.text, v.embedder FROM memory_vectors v JOIN memories m ON m.id = v.memory_id"
    )
    out: dict[str, set[str]] = {}
    for r in rows:
        out.setdefault(str(r["text"]), set()).add(str(r["embedder"]))
    return out


def test_one_user_in_two_languages_finds_each_fact_by_meaning() -> None:
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        ids = _store_items(db)
        assert catch_up_now(db, USER, settings, what="test") == []
        vectors = _vectors(db)
        assert vectors[EN_FACT] == {"minilm-l6-v2"}
        assert vectors[DE_FACT] == {"e5-small-q4"}
        assert vectors[NOISE[1]] == {"e5-small-q4"} and vectors[NOISE[0]] == {"minilm-l6-v2"}

        async def ask(question: str) -> list[tuple[int, str]]:
            found = await recall(db, settings, USER, question, what="test")
            return [(r.item.id, r.reason) for r in found.items]

        german = asyncio.run(ask("Welches Haustier besitze ich?"))  # no word in common
        assert german[0][0] == ids[DE_FACT] and "meaning: " in german[0][1]
        english = asyncio.run(ask("What kind of pet do I own?"))
        assert english[0][0] == ids[EN_FACT] and "meaning: " in english[0][1]
    finally:
        db.close()


def test_reindex_gives_each_item_the_vector_of_its_language() -> None:
    settings = load_settings().settings
    db = Database(settings.database)
    try:
        _store_items(db)
    finally:
        db.close()
    done = run("memory", "reindex", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["computed"] == 2 + len(NOISE)
    assert summary["embedder"] == "minilm-l6-v2+e5-small-q4"
    db = Database(settings.database)
    try:
        vectors = _vectors(db)
    finally:
        db.close()
    assert vectors[EN_FACT] == {"minilm-l6-v2"} and vectors[DE_FACT] == {"e5-small-q4"}
    again = json.loads(run("memory", "reindex", "--json").stdout)
    assert again["computed"] == 0
