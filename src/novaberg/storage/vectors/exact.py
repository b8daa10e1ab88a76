"""The vector index without an extension: ``memory_vectors`` on SQLite or PostgreSQL, the
nearest items found by an exact numpy scan over the user's stored vectors (a large user's in
the int8 copy, :mod:`~novaberg.storage.vectors.held`). The other implementations extend it:
the table, the spaces and the copy are theirs too."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from novaberg.storage.db import Database
from novaberg.storage.sql import Connection
from novaberg.storage.vectors import spaces
from novaberg.storage.vectors.held import CACHE_BYTES, HeldCopies
from novaberg.storage.vectors.numeric import as_query, pack, unpack
from novaberg.storage.vectors.protocol import Mode
from novaberg.storage.vectors.spaces import Space, SpaceStats, check_dim


class ExactIndex:
    """Nearest-neighbour search by an exact scan (see the module docstring); ``notice`` says
    why the fast index is not used, and what to do."""

    mode: Mode = "exact"

    def __init__(
        self,
        db: Database,
        *,
        notice: str | None = None,
        cache_from: int | None = None,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.db = db
        self.notice = notice
        self.held = HeldCopies(db, cache_from=cache_from, cache_bytes=cache_bytes)

    # -- what an implementation with a fast index changes --------------------------------
    def _build_index(self, c: Connection, space: Space) -> Space:
        """The fast index of one space, made (or remade) from ``memory_vectors``: none here."""
        return space

    def _drop_index(self, c: Connection, space: Space) -> None:
        """Remove the fast index of a space being dropped: none here."""

    def _nearest_indexed(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]] | None:
        """The fast index's answer, or None where the exact scan answers: always here."""
        return None

    def _build_missing(self) -> None:
        """Build the fast index of every space that lacks one (each in a transaction)."""
        for space in spaces.all_spaces(self.db):
            if not space.indexed:
                with self.db.transaction() as c:
                    self._build_index(c, space)

    def _write(
        self, c: Connection, memory_id: int, user_id: str, embedder: str, arr: npt.NDArray[Any]
    ) -> None:
        if c.dialect == "sqlite":  # a delete and an insert: the vec0 triggers follow both
            c.execute(
                "DELETE FROM memory_vectors WHERE memory_id = ? AND embedder = ?",
                (memory_id, embedder),
            )
            c.execute(
                "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
                "VALUES (?, ?, ?, ?)",
                (memory_id, embedder, user_id, pack(arr)),
            )
        else:
            c.execute(
                "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (memory_id, embedder) DO UPDATE "
                "SET user_id = excluded.user_id, vec = excluded.vec",
                (memory_id, embedder, user_id, pack(arr)),
            )

    # -- spaces ------------------------------------------------------------------------
    def space(self, embedder: str) -> Space | None:
        return spaces.space_named(self.db, embedder)

    def recorded(self) -> dict[str, int]:
        """Embedder name → the vector length recorded for it."""
        return {s.embedder: s.dim for s in spaces.all_spaces(self.db)}

    def stats(self) -> list[SpaceStats]:
        """Per embedder: length, how many vectors, whether the fast index serves it."""
        return spaces.stats(self.db)

    # -- writes ------------------------------------------------------------------------
    def upsert(
        self,
        c: Connection,
        memory_id: int,
        user_id: str,
        embedder: str,
        vec: Sequence[float] | npt.NDArray[Any],
    ) -> None:
        """Store (or replace) the item's vector of this embedder, inside the caller's
        transaction. A vector whose length differs from the recorded one is refused."""
        arr = as_query(vec, f"the vector of memory {memory_id}")
        space = spaces.ensure_space(c, embedder, int(arr.size))
        if not space.indexed:
            self._build_index(c, space)
        self._write(c, memory_id, user_id, embedder, arr)

    def delete(self, c: Connection, memory_ids: Iterable[int]) -> None:
        """Remove every embedder's vector of these items (the fast indexes follow)."""
        ids = sorted({int(i) for i in memory_ids})
        for start in range(0, len(ids), 500):
            chunk = ids[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            c.execute(f"DELETE FROM memory_vectors WHERE memory_id IN ({marks})", chunk)

    def drop(self, embedder: str) -> int:
        """Forget every vector of this embedder and its recorded length (a reindex after
        the model behind the name changed); returns how many vectors went."""
        space = self.space(embedder)
        if space is None:
            return 0
        with self.db.transaction() as c:
            n = c.execute("DELETE FROM memory_vectors WHERE embedder = ?", (embedder,)).rowcount
            self._drop_index(c, space)
            spaces.forget_space(c, space)
        return int(n)

    # -- reads -------------------------------------------------------------------------
    def nearest(
        self,
        user_id: str,
        embedder: str,
        query: Sequence[float] | npt.NDArray[Any],
        k: int,
    ) -> list[tuple[int, float]]:
        """The user's ``k`` current items nearest to ``query`` among the vectors of this
        embedder: (memory id, cosine similarity), best first. Superseded facts (``valid_to``
        set) are left out. Raises :class:`~novaberg.errors.VectorDimensionError` when the
        recorded length of this embedder's vectors differs from the query's."""
        q = as_query(query, "the query vector")
        space = self.space(embedder)
        if space is None or k <= 0:
            return []
        check_dim(space, int(q.size))
        held = self.held.get(space, user_id)
        if held is not None:
            return self.held.nearest(held, space, user_id, q, k)
        if space.indexed:
            found = self._nearest_indexed(space, user_id, q, k)
            if found is not None:
                return found
        return self.scan(space, user_id, q, k)

    def scan(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        """The exact answer, from every stored vector of the user in this space."""
        rows = self.db.query(
            "SELECT v.memory_id AS id, v.vec FROM memory_vectors v "
            "JOIN memories m ON m.id = v.memory_id "
            "WHERE v.embedder = ? AND v.user_id = ? AND m.valid_to IS NULL",
            (space.embedder, user_id),
        )
        width = space.dim * 4
        rows = [r for r in rows if len(r["vec"]) == width]
        if not rows:
            return []
        ids = np.fromiter((int(r["id"]) for r in rows), dtype=np.int64, count=len(rows))
        matrix = unpack((r["vec"] for r in rows), space.dim)
        norms = np.linalg.norm(matrix, axis=1) * max(float(np.linalg.norm(q)), 1e-12)
        sims = (matrix @ q) / np.maximum(norms, 1e-12)
        take = min(k, len(rows))
        best = np.argpartition(-sims, take - 1)[:take]
        order = sorted(best.tolist(), key=lambda i: (-float(sims[i]), int(ids[i])))
        return [(int(ids[i]), min(1.0, float(sims[i]))) for i in order]

    def missing(self, embedder: str, user_id: str | None = None, limit: int = 1000) -> list[int]:
        """Ids of items (oldest first) that have no vector of this embedder yet."""
        params: list[Any] = [embedder]
        where = ""
        if user_id is not None:
            where = "AND m.user_id = ? "
            params.append(user_id)
        params.append(limit)
        rows = self.db.query(
            "SELECT m.id FROM memories m WHERE NOT EXISTS (SELECT 1 FROM memory_vectors v "
            f"WHERE v.memory_id = m.id AND v.embedder = ?) {where}ORDER BY m.id LIMIT ?",
            params,
        )
        return [int(r["id"]) for r in rows]

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait until the copies loading in the background are loaded (tests, benchmarks)."""
        self.held.settle(timeout_s)
