"""What the memory store, retrieval, reindex and doctor ask of the vector index, whichever
implementation serves the database (:func:`~novaberg.storage.vectors.open_vector_index`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Literal, Protocol

import numpy as np
import numpy.typing as npt

from novaberg.storage.sql import Connection
from novaberg.storage.vectors.spaces import Space, SpaceStats

Mode = Literal["sqlite-vec", "pgvector", "exact"]


class VectorIndex(Protocol):
    """One vector per memory item per embedder, and the nearest items to a query vector
    among one user's current items. Every method is synchronous and queries the database:
    from async code call them through ``await db.run(...)``."""

    @property
    def mode(self) -> Mode:
        """What :meth:`nearest` uses on this database and Python."""
        ...

    @property
    def notice(self) -> str | None:
        """Why the fast index is not used, and what to do (doctor and traces show it); or
        None."""
        ...

    def upsert(
        self,
        c: Connection,
        memory_id: int,
        user_id: str,
        embedder: str,
        vec: Sequence[float] | npt.NDArray[Any],
    ) -> None:
        """Store (or replace) the item's vector of this embedder, inside the caller's
        transaction; a vector whose length differs from the recorded one is refused
        (:class:`~novaberg.errors.VectorDimensionError`)."""
        ...

    def delete(self, c: Connection, memory_ids: Iterable[int]) -> None:
        """Remove every embedder's vector of these items."""
        ...

    def drop(self, embedder: str) -> int:
        """Forget every vector of this embedder and its recorded length; how many went."""
        ...

    def nearest(
        self,
        user_id: str,
        embedder: str,
        query: Sequence[float] | npt.NDArray[Any],
        k: int,
    ) -> list[tuple[int, float]]:
        """The user's ``k`` current items nearest to ``query``: (memory id, cosine
        similarity), best first; superseded facts left out."""
        ...

    def scan(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        """The exact answer from every stored vector of the user (what :meth:`nearest` falls
        back to; benchmarks time it)."""
        ...

    def missing(self, embedder: str, user_id: str | None = None, limit: int = 1000) -> list[int]:
        """Ids of items (oldest first) that have no vector of this embedder yet."""
        ...

    def space(self, embedder: str) -> Space | None:
        """The embedder's recorded space, or None."""
        ...

    def recorded(self) -> dict[str, int]:
        """Embedder name → the vector length recorded for it."""
        ...

    def stats(self) -> list[SpaceStats]:
        """Per embedder: length, how many vectors, whether the fast index serves it."""
        ...

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait until the in-memory copies loading in the background are loaded."""
        ...
