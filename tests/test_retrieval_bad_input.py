"""Bad input to retrieval (issue 22): a question of only stop words, emoji only, a
10,000-word message, a script the embedder does not read — no error; where a signal is
skipped for the message's sake (the script, the length), a notice says so."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from novaberg.config import Settings
from novaberg.memory.embedding import embed_now
from novaberg.memory.retrieval import NO_CONTENT, Recall, recall, vector_index
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database

USER = "default"
SETTINGS = Settings(language="en", memory={"embedder": "minilm-l6-v2"})
FACTS = ["I adopted a dog named Bruno last spring", "私の犬の名前はブルーノです"]


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[tuple[Database, list[int]]]:
    db = Database(tmp_path / "novaberg.db")
    vectors = embed_now(SETTINGS, FACTS, query=False)
    index = vector_index(db)
    ids = []
    with db.transaction() as c:
        for n, text in enumerate(FACTS):
            added = MemoryStore.add(c, USER, "long_term", text, 0.5, f"fact:{n}")
            index.upsert(c, added.id, USER, vectors.embedder, vectors.vectors[n])
            ids.append(added.id)
    try:
        yield db, ids
    finally:
        db.close()


def _recall(db: Database, message: str) -> Recall:
    return asyncio.run(recall(db, SETTINGS, USER, message))


def test_a_question_of_only_stop_words_is_searched_by_neither_signal_without_error(
    memory: tuple[Database, list[int]],
) -> None:
    found = _recall(memory[0], "What was it that you were?")
    assert found.items == [] and found.embedder is None
    assert found.notices == [f"retrieval: {NO_CONTENT}"]  # the trace says why


def test_an_emoji_only_message_is_searched_by_neither_signal_without_error(
    memory: tuple[Database, list[int]],
) -> None:
    found = _recall(memory[0], "🐶🐶🎉")
    assert found.items == [] and found.embedder is None
    assert found.notices == [f"retrieval: {NO_CONTENT}"]


def test_a_ten_thousand_word_message_is_searched_with_a_notice_that_it_was_cut(
    memory: tuple[Database, list[int]],
) -> None:
    db, ids = memory
    message = "Tell me about my dog Bruno. " + " ".join(["weather"] * 10_000)
    found = _recall(db, message)
    assert found.embedder == "minilm-l6-v2"
    assert ids[0] in [r.item.id for r in found.items]
    assert any("longer than the embedder" in n for n in found.notices)


def test_japanese_with_the_english_embedder_is_searched_by_words_only_and_says_so(
    memory: tuple[Database, list[int]],
) -> None:
    db, ids = memory
    found = _recall(db, "私の犬の名前はブルーノです")
    assert found.embedder is None  # meaning skipped
    assert [r.item.id for r in found.items] == [ids[1]]  # found by its words
    assert any("does not read" in n and "hiragana" in n for n in found.notices)


def test_a_multilingual_embedder_reads_every_script() -> None:
    from novaberg.memory.embedding import unread_script

    assert unread_script("e5-small-q4", "私の犬の名前は何ですか") is None
    assert unread_script("minilm-l6-v2", "Mein Hund heißt Bruno") is None
    assert unread_script("minilm-l6-v2", "私の犬の名前は何ですか") == "HIRAGANA"
    assert unread_script("minilm-l6-v2", "🐶🐶🎉") is None  # no letters: no content words
