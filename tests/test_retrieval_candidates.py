"""The words signal's candidates: the user's best-ranked full-text matches, not the newest, and
never fewer because other users have matches too (issue 22; both databases)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from novaberg.memory.retrieval import Retriever
from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database

OLD = datetime(2023, 5, 8, tzinfo=UTC)


def _add(db: Database, user: str, texts: list[str], start: datetime, key: str) -> list[int]:
    ids = []
    with db.transaction() as c:
        for n, text in enumerate(texts):
            stamp = (start + timedelta(minutes=n)).isoformat(timespec="milliseconds")
            added = MemoryStore.add(
                c, user, "short_term", text, 0.5, f"{key}:{n}", valid_from=stamp
            )
            ids.append(added.id)
    return ids


def _found(db: Database, user: str, question: str) -> list[int]:
    retriever = Retriever(MemoryStore(db), budget_tokens=10**6, max_items=10)
    return [r.item.id for r in retriever.retrieve(user, question)]


def test_the_best_matching_old_item_is_found_however_many_newer_items_match(
    db: Database,
) -> None:
    # the old item holds both words of the question; 300 newer ones hold one of them
    [vet] = _add(db, "ada", ["Our vet is called Hanna Okafor"], OLD, "vet")
    _add(
        db,
        "ada",
        [f"The neighbour's cat number {n} went to the vet again today" for n in range(300)],
        OLD + timedelta(days=30),
        "noise",
    )
    found = _found(db, "ada", "What is the name of our vet Hanna?")
    assert found[:1] == [vet]


def test_one_users_word_matches_do_not_depend_on_other_users_newer_items(db: Database) -> None:
    mine = _add(db, "ada", [f"I planted tulips in the garden, bed {n}" for n in range(3)], OLD, "a")
    alone = _found(db, "ada", "What did I plant in the garden?")
    _add(
        db,
        "bob",
        [f"Bob raked leaves in the garden, corner {n}" for n in range(500)],
        OLD + timedelta(days=1),
        "b",
    )
    together = _found(db, "ada", "What did I plant in the garden?")
    assert sorted(alone) == sorted(mine)
    assert together == alone
