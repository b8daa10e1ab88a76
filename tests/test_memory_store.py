"""The memory store and retrieval, on SQLite and on PostgreSQL (the ``db`` fixture runs each
test on both)."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import pytest

from novaberg.memory.retrieval import Retriever, query_terms
from novaberg.memory.store import MemoryStore
from novaberg.memory.transfer import export_user, import_user, parse_export
from novaberg.storage.db import Database
from novaberg.storage.memories import FORGOTTEN, MemoryItem, Statement
from novaberg.trace_document import SalienceTrace, TraceDocument

USER = "ada"


def days_ago(n: float) -> str:
    return (datetime.now(UTC) - timedelta(days=n)).isoformat(timespec="milliseconds")


def add(
    store: MemoryStore,
    text: str,
    key: str,
    *,
    kind: str = "short_term",
    importance: float = 0.7,
    age_days: float = 0.0,
    derived_from: tuple[int, ...] = (),
    user: str = USER,
) -> int:
    with store.db.transaction() as c:
        return MemoryStore.add(
            c,
            user,
            kind,  # type: ignore[arg-type]
            text,
            importance,
            key,
            derived_from=derived_from,
            valid_from=days_ago(age_days),
        ).id


@pytest.fixture
def store(db: Database) -> MemoryStore:
    return MemoryStore(db)


def test_a_repeated_write_with_the_same_key_stores_nothing_twice(store: MemoryStore) -> None:
    first = add(store, "Ada's sister is called Lena.", "turn:1:short_term")
    again = add(store, "Ada's sister is called Lena.", "turn:1:short_term")
    assert again == first
    assert [m.id for m in store.items(USER)] == [first]


def test_text_with_nul_bytes_or_bad_utf8_is_stored_cleaned(store: MemoryStore) -> None:
    memory_id = add(store, "Ada likes\x00 tea \udcff", "k")
    stored = store.get(USER, memory_id)
    assert stored is not None and stored.text == "Ada likes tea \ufffd"


def test_retrieval_finds_the_relevant_fact_and_says_why(store: MemoryStore) -> None:
    for n in range(30):
        add(store, f"Ada had lunch at a cafe on day {n}.", f"noise:{n}", age_days=n + 2)
    target = add(store, "Ada's sister Lena lives in Lisbon.", "fact:1", age_days=20)
    found = Retriever(store).retrieve(USER, "Where does my sister live?")
    assert found[0].item.id == target
    assert "'sister'" in found[0].reason and "importance 0.70" in found[0].reason


def test_retrieval_is_per_user(store: MemoryStore) -> None:
    add(store, "Bob's sister is called Maria.", "k", user="bob")
    assert Retriever(store).retrieve(USER, "sister") == []


def test_a_superseded_fact_is_kept_but_never_retrieved_as_current(store: MemoryStore) -> None:
    old = add(store, "Ada lives in Hamburg.", "fact:1", kind="long_term", age_days=30)
    new = add(store, "Ada lives in Berlin now.", "fact:2", kind="long_term")
    with store.db.transaction() as c:
        MemoryStore.supersede(c, old, new)
    found = [r.item.id for r in Retriever(store).retrieve(USER, "Where does Ada live? Hamburg?")]
    assert found == [new]
    kept = store.get(USER, old)
    assert kept is not None and kept.valid_to is not None and kept.superseded_by == new


def test_short_term_items_covered_by_a_fact_are_not_retrieved_twice(store: MemoryStore) -> None:
    item = add(store, "Ada adopted a cat named Miso.", "turn:1:short_term")
    fact = add(store, "Ada has a cat named Miso.", "fact:1", kind="long_term")
    with store.db.transaction() as c:
        MemoryStore.cover(c, item, fact)
    assert [r.item.id for r in Retriever(store).retrieve(USER, "my cat Miso")] == [fact]
    covered = store.get(USER, fact)
    assert covered is not None and covered.derived_from == [item]


def test_retrieval_stays_within_its_token_budget(store: MemoryStore) -> None:
    for n in range(40):
        add(store, f"Ada talked about sailing trip number {n} " + "and the wind " * 10, f"s:{n}")
    found = Retriever(store, budget_tokens=200).retrieve(USER, "sailing trip")
    assert found and sum(r.tokens for r in found) <= 200
    assert len(Retriever(store, budget_tokens=200, max_items=2).retrieve(USER, "sailing")) == 2


def test_an_unrelated_old_item_is_not_retrieved_but_a_fresh_important_one_is(
    store: MemoryStore,
) -> None:
    add(store, "Ada collects stamps.", "old", importance=0.5, age_days=60)
    fresh = add(store, "Ada is very stressed about her exam.", "fresh", importance=0.9)
    assert [r.item.id for r in Retriever(store).retrieve(USER, "Good morning!")] == [fresh]


def test_query_terms_drop_stopwords_and_punctuation() -> None:
    assert query_terms("What's the name of my sister, Nova?") == ["name", "sister"]
    assert query_terms("Weißt du, wo meine Schwester wohnt?") == ["schwester", "wohnt"]


def test_forget_removes_the_item_what_was_derived_from_it_and_its_words(
    store: MemoryStore,
) -> None:
    db = store.db
    conversation = db.new_conversation(USER)
    turn = db.start_turn(conversation, "My sister Lena moved to Lisbon.")

    def remember(c: object, message_id: int | None) -> int:
        return MemoryStore.add(
            c,  # type: ignore[arg-type]
            USER,
            "short_term",
            "Ada's sister Lena moved to Lisbon.",
            0.8,
            f"turn:{turn}:short_term",
            source_turn_id=turn,
            source_message_id=message_id,
        ).id

    item = db.finish_turn(
        turn,
        conversation_id=conversation,
        user_text="My sister Lena moved to Lisbon.",
        reply="Lisbon! Lena must love it.",
        trace=TraceDocument(salience=SalienceTrace(summary="Ada's sister Lena moved to Lisbon.")),
        calls=[],
        also=remember,
    )
    assert item is not None
    fact = add(store, "Ada's sister Lena lives in Lisbon.", "fact:x", kind="long_term")
    with db.transaction() as c:
        MemoryStore.cover(c, item, fact)
    other = add(store, "Ada plays the cello.", "other", importance=0.5)
    store.set_profile(
        USER,
        "core",
        [Statement("Has a sister in Lisbon.", [fact]), Statement("Plays the cello.", [other])],
    )

    done = store.forget(USER, item)

    assert done is not None and sorted(done.ids) == sorted([item, fact])
    assert [m.id for m in store.items(USER)] == [other]
    assert store.profile(USER)["core"].text == "Plays the cello."
    assert [r.item.id for r in Retriever(store).retrieve(USER, "Lena Lisbon sister")] == []
    contents = [r["content"] for r in db.query("SELECT content FROM messages")]
    assert contents == [FORGOTTEN, FORGOTTEN]
    everything = json.dumps(
        [db.query(f"SELECT * FROM {t}") for t in ("memories", "profiles", "turns", "messages")],
        default=str,
    )
    assert "Lisbon" not in everything
    assert store.forget(USER, item) is None  # gone for good


def test_forgetting_the_newer_fact_makes_the_older_one_current_again(
    store: MemoryStore,
) -> None:
    old = add(store, "Ada works at the bakery.", "f1", kind="long_term", age_days=10)
    new = add(store, "Ada works at the library.", "f2", kind="long_term")
    with store.db.transaction() as c:
        MemoryStore.supersede(c, old, new)
    store.forget(USER, new)
    kept = store.get(USER, old)
    assert kept is not None and kept.current


def test_sqlite_forget_leaves_no_trace_of_the_text_in_the_files(
    tmp_path: object,
) -> None:
    from pathlib import Path

    path = Path(str(tmp_path)) / "f.db"
    db = Database(path)
    store = MemoryStore(db)
    for n in range(50):
        add(store, f"Ada went hiking, trip {n}.", f"n:{n}")
    secret = add(store, "Ada's secret word is zanzibarquokka.", "secret")
    store.forget(USER, secret)
    db.close()
    raw = b"".join(p.read_bytes() for p in path.parent.iterdir() if p.name.startswith("f.db"))
    assert b"zanzibarquokka" not in raw


def test_export_then_import_restores_items_links_validity_and_profile(
    store: MemoryStore, database_target: object
) -> None:
    old = add(store, "Ada lives in Hamburg.", "f1", kind="long_term", age_days=30)
    new = add(store, "Ada lives in Berlin.", "f2", kind="long_term")
    with store.db.transaction() as c:
        MemoryStore.supersede(c, old, new)
    store.add_event(USER, "2026-12-24", "Christmas with Lena", "ev:1")
    store.set_profile(USER, "core", [Statement("Lives in Berlin.", [new])])
    exported = export_user(store.db, USER).model_dump(mode="json")

    other = MemoryStore(store.db)
    for m in other.items(USER):
        other.forget(USER, m.id)
    assert other.items(USER) == []

    counts = import_user(store.db, parse_export(json.dumps(exported), USER))
    assert counts == {"memories": 3, "profile": 1, "truncated": 0, "invalid_utf8": 0}
    items = {m.text: m for m in store.items(USER)}
    assert items["Ada lives in Hamburg."].superseded_by == items["Ada lives in Berlin."].id
    assert items["Christmas with Lena"].happens_on == "2026-12-24"
    profile = store.profile(USER)["core"]
    assert profile.statements == [Statement("Lives in Berlin.", [items["Ada lives in Berlin."].id])]
    again = import_user(store.db, parse_export(json.dumps(exported), USER))
    assert again["memories"] == again["profile"] == 0  # importing twice adds nothing


def test_events_between_returns_dated_entries_in_order(store: MemoryStore) -> None:
    store.add_event(USER, "2026-12-03", "Dentist", "e1")
    store.add_event(USER, "2026-12-01", "Exam", "e2")
    store.add_event(USER, "2027-02-01", "Far away", "e3")
    found = store.events_between(USER, "2026-11-30", "2026-12-14")
    assert [(e.happens_on, e.text) for e in found] == [
        ("2026-12-01", "Exam"),
        ("2026-12-03", "Dentist"),
    ]


def test_an_export_imported_back_into_its_own_database_adds_nothing(
    store: MemoryStore,
) -> None:
    add(store, "Ada keeps bees.", "turn:1:short_term")
    first = export_user(store.db, USER).model_dump(mode="json")
    assert import_user(store.db, parse_export(json.dumps(first), USER))["memories"] == 0
    again = export_user(store.db, USER).model_dump(mode="json")  # one taken after that import
    assert import_user(store.db, parse_export(json.dumps(again), USER))["memories"] == 0
    assert [m.text for m in store.items(USER)] == ["Ada keeps bees."]


def test_import_truncates_long_texts_and_replaces_invalid_utf8_with_counts(
    store: MemoryStore,
) -> None:
    add(store, "Ada keeps bees.", "k1")
    add(store, "Ada sings.", "k2")
    store.set_profile(USER, "core", [Statement("Keeps bees.", [])])
    exported = export_user(store.db, USER).model_dump(mode="json")
    exported["memories"][0]["text"] = "x" * 2001
    exported["memories"][1]["text"] = "Ada sings BADBYTE."
    exported["profile"][0]["statements"][0]["text"] = "Keeps BADBYTE bees."
    raw = json.dumps(exported, ensure_ascii=False).encode().replace(b"BADBYTE", b"\xff\xfe")
    for m in store.items(USER):
        store.forget(USER, m.id)

    counts = import_user(store.db, parse_export(raw, USER))

    assert counts == {"memories": 2, "profile": 1, "truncated": 1, "invalid_utf8": 2}
    texts = sorted(m.text for m in store.items(USER))
    assert texts == ["Ada sings \ufffd\ufffd.", "x" * 2000]
    assert store.profile(USER)["core"].text == "Keeps \ufffd\ufffd bees."


def test_an_items_view_is_every_field_as_a_copy() -> None:
    """What the API and the CLI print of an item: each of its fields, its list of sources a
    copy of its own (a caller that changes it changes no item)."""
    item = MemoryItem(
        7, "long_term", "Ada has a dog.", 0.8, "k7", 3, 11, [1, 2], None,
        "2026-01-01T00:00:00+00:00", None, None, None, "2026-01-01T00:00:00+00:00",
    )  # fmt: skip
    view = item.view()
    assert view == dataclasses.asdict(item)
    assert list(view) == [f.name for f in dataclasses.fields(MemoryItem)]
    view["derived_from"].append(3)
    assert item.derived_from == [1, 2]
