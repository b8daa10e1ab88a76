"""The vector index on SQLite with sqlite-vec loaded (:mod:`novaberg.storage.sql` opens
SQLite through ``sqlean`` for that): each embedder gets a ``vec0`` table ``memory_vec_<space
id>`` partitioned by user, with cosine distance, fed from ``memory_vectors`` by triggers (so
every delete, forget's and the ``ON DELETE CASCADE`` of a memory included, removes the vector
there too). A process that cannot load the extension drops those triggers and marks the
index stale (:mod:`novaberg.storage.sql`); the next one that can rebuilds it from
``memory_vectors``."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from novaberg.storage.db import Database
from novaberg.storage.sql import Connection
from novaberg.storage.vectors import spaces
from novaberg.storage.vectors.exact import ExactIndex
from novaberg.storage.vectors.held import CACHE_BYTES
from novaberg.storage.vectors.numeric import pack
from novaberg.storage.vectors.protocol import Mode
from novaberg.storage.vectors.spaces import Space

KNN_LIMIT = 4096
"""sqlite-vec's largest ``k``: beyond it (a user with thousands of superseded facts) the
search scans exactly instead."""


def unavailable(db: Database) -> str | None:
    """None when this database's connection has sqlite-vec loaded; else why not, and what to
    install (the exact scan's notice)."""
    conn = db.conn
    if getattr(conn, "vec_version", None):
        return None
    why = getattr(conn, "vec_error", None) or "unknown reason"
    return (
        f"sqlite-vec is not loaded ({why}): memory search by meaning scans every stored "
        "vector, exact but slower with many memories; install the sqlean.py and sqlite-vec "
        "packages (they come with Novaberg) to index them"
    )


class SqliteVecIndex(ExactIndex):
    """sqlite-vec's KNN over the user's partition (see the module docstring)."""

    mode: Mode = "sqlite-vec"

    def __init__(
        self, db: Database, *, cache_from: int | None = None, cache_bytes: int = CACHE_BYTES
    ) -> None:
        super().__init__(db, cache_from=cache_from, cache_bytes=cache_bytes)
        self._build_missing()

    def _build_index(self, c: Connection, space: Space) -> Space:
        lit = spaces.literal(space.embedder)
        t = space.table
        c.execute(f"DROP TABLE IF EXISTS {t}")
        c.execute(
            f"CREATE VIRTUAL TABLE {t} USING vec0(user_id text partition key, "
            f"embedding float[{space.dim}] distance_metric=cosine)"
        )
        c.execute(
            f"INSERT INTO {t}(rowid, user_id, embedding) SELECT memory_id, user_id, vec "
            "FROM memory_vectors WHERE embedder = ? AND length(vec) = ?",
            (space.embedder, space.dim * 4),
        )
        add = (
            f"INSERT INTO {t}(rowid, user_id, embedding) "
            "VALUES (new.memory_id, new.user_id, new.vec)"
        )
        c.execute(
            f"CREATE TRIGGER IF NOT EXISTS {t}_insert AFTER INSERT ON memory_vectors "
            f"WHEN new.embedder = {lit} BEGIN {add}; END"
        )
        c.execute(
            f"CREATE TRIGGER IF NOT EXISTS {t}_delete AFTER DELETE ON memory_vectors "
            f"WHEN old.embedder = {lit} BEGIN DELETE FROM {t} WHERE rowid = old.memory_id; END"
        )
        c.execute(
            f"CREATE TRIGGER IF NOT EXISTS {t}_update AFTER UPDATE ON memory_vectors "
            f"WHEN old.embedder = {lit} BEGIN DELETE FROM {t} WHERE rowid = old.memory_id; "
            f"{add}; END"
        )
        return spaces.mark_indexed(c, space)

    def _drop_index(self, c: Connection, space: Space) -> None:
        for suffix in ("insert", "delete", "update"):
            c.execute(f"DROP TRIGGER IF EXISTS {space.table}_{suffix}")
        c.execute(f"DROP TABLE IF EXISTS {space.table}")

    def _nearest_indexed(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]] | None:
        # the KNN runs before the join, so ask for as many more as the user has superseded
        superseded = int(
            self.db.scalar(
                "SELECT COUNT(*) FROM memories WHERE user_id = ? AND valid_to IS NOT NULL",
                (user_id,),
            )
        )
        fetch = k + superseded
        if fetch > KNN_LIMIT:
            return None
        rows = self.db.query(
            "WITH f AS MATERIALIZED (SELECT rowid AS id, distance "
            f"FROM {space.table} WHERE embedding MATCH ? AND k = ? AND user_id = ?) "
            "SELECT f.id, f.distance FROM f JOIN memories m ON m.id = f.id "
            "WHERE m.valid_to IS NULL",
            (pack(q), fetch, user_id),
        )
        found = sorted((float(r["distance"]), int(r["id"])) for r in rows)[:k]
        return [(i, 1.0 - d) for d, i in found]
