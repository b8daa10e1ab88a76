"""``vector_spaces``: each embedder's name and vector length, recorded once, and whether its
fast index is built; the checks that keep two embedders' vectors apart."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from novaberg.errors import VectorDimensionError
from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

REINDEX = "novaberg memory reindex"
_NAME = re.compile(r"[A-Za-z0-9._:/@+\-]{1,200}")
_COLUMNS = "SELECT id, embedder, dim, indexed FROM vector_spaces"


@dataclass(frozen=True)
class Space:
    """One embedder's vectors: its name, their length, whether its fast index is built."""

    id: int
    embedder: str
    dim: int
    indexed: bool

    @property
    def table(self) -> str:
        """The name of its fast index (sqlite-vec's vec0 table; an HNSW index of the release
        before on PostgreSQL)."""
        return f"memory_vec_{self.id}"


@dataclass(frozen=True)
class SpaceStats:
    embedder: str
    dim: int
    vectors: int
    indexed: bool


def check_name(embedder: str) -> str:
    """Embedder names go into index names and SQL literals: word characters and ``.:/@+-``."""
    if not _NAME.fullmatch(embedder):
        raise ValueError(f"invalid embedder name {embedder!r}")
    return embedder


def literal(embedder: str) -> str:
    """The embedder's name as an SQL string literal (checked first)."""
    return "'" + check_name(embedder).replace("'", "''") + "'"


def check_dim(space: Space, given: int) -> None:
    """Refuse a vector whose length is not the one recorded for its embedder."""
    if given != space.dim:
        raise VectorDimensionError(
            f"The embedder {space.embedder!r} now gives vectors of {given} numbers, but the "
            f"stored ones have {space.dim}: the model behind that name changed. Run "
            f"`{REINDEX} --embedder {space.embedder}` to compute them again.",
            embedder=space.embedder,
            recorded=space.dim,
            given=given,
        )


def _space_of(row: dict[str, Any]) -> Space:
    return Space(int(row["id"]), str(row["embedder"]), int(row["dim"]), bool(row["indexed"]))


def all_spaces(db: Database) -> list[Space]:
    """Every recorded embedder, oldest first."""
    return [_space_of(r) for r in db.query(f"{_COLUMNS} ORDER BY id")]


def space_named(db: Database, embedder: str) -> Space | None:
    row = db.one(f"{_COLUMNS} WHERE embedder = ?", (embedder,))
    return None if row is None else _space_of(row)


def ensure_space(c: Connection, embedder: str, dim: int) -> Space:
    """The embedder's space, recorded with this length when it is new (in the caller's
    transaction); a length other than the recorded one is refused."""
    check_name(embedder)
    sql = f"{_COLUMNS} WHERE embedder = ?"
    row = c.execute(sql, (embedder,)).one()
    if row is None:
        c.execute(
            "INSERT INTO vector_spaces (embedder, dim, indexed, created_at) "
            "VALUES (?, ?, 0, ?) ON CONFLICT (embedder) DO NOTHING",
            (embedder, dim, now()),
        )
        row = c.execute(sql, (embedder,)).one()
        assert row is not None
    space = _space_of(row)
    check_dim(space, dim)
    return space


def mark_indexed(c: Connection, space: Space) -> Space:
    c.execute("UPDATE vector_spaces SET indexed = 1 WHERE id = ?", (space.id,))
    return Space(space.id, space.embedder, space.dim, True)


def forget_space(c: Connection, space: Space) -> None:
    c.execute("DELETE FROM vector_spaces WHERE id = ?", (space.id,))


def stats(db: Database) -> list[SpaceStats]:
    """Per embedder: length, how many vectors, whether the fast index serves it."""
    counts = {
        str(r["embedder"]): int(r["n"])
        for r in db.query("SELECT embedder, COUNT(*) AS n FROM memory_vectors GROUP BY embedder")
    }
    return [
        SpaceStats(s.embedder, s.dim, counts.get(s.embedder, 0), s.indexed) for s in all_spaces(db)
    ]
