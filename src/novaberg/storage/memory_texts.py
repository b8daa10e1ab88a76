"""The texts of memory items, for computing their vectors again (``novaberg reindex``)."""

from __future__ import annotations

from dataclasses import dataclass

from novaberg.storage.db import Database


@dataclass(frozen=True, slots=True)
class ItemText:
    id: int
    user_id: str
    text: str


def first_text(db: Database) -> str | None:
    """The oldest item's text (to learn an embedder's dimension), or ``None``."""
    found = db.scalar("SELECT text FROM memories ORDER BY id LIMIT 1")
    return None if found is None else str(found)


def texts_of(db: Database, ids: list[int]) -> list[ItemText]:
    """The items of ``ids`` that exist."""
    marks = ", ".join("?" for _ in ids)
    rows = db.query(f"SELECT id, user_id, text FROM memories WHERE id IN ({marks})", ids)
    return [ItemText(int(r["id"]), str(r["user_id"]), str(r["text"])) for r in rows]
