"""The vector index: one vector per memory item per embedder, and the nearest items to a
query vector among one user's current items. :class:`VectorIndex` (``protocol.py``) is what
its callers use; :func:`open_vector_index` chooses the implementation a database gets:

- ``memory_vectors`` (float32 blobs, one row per item and embedder) is the truth on both
  databases; ``vector_spaces`` records each embedder's name and vector length once
  (``spaces.py``). A vector of another length is refused
  (:class:`~novaberg.errors.VectorDimensionError`, naming ``novaberg memory reindex``), and two
  embedders' vectors are never compared.
- SQLite with sqlite-vec loaded: ``vec0`` tables fed by triggers (``sqlite_vec.py``).
- PostgreSQL with pgvector: a ``vector`` column and the server's exact cosine distance
  (``pgvector.py``).
- Otherwise (``mode == "exact"``): a numpy scan over the user's stored blobs, exact but slower
  at many items (``exact.py``, which the other two extend); :attr:`VectorIndex.notice` says why
  and what to install.
- Either database, any of the three: a user with many vectors of one embedder is searched in an
  in-memory int8 copy of their vectors, the best re-scored exactly (``held.py``; the numbers in
  ``numeric.py``).

Every method is synchronous and queries the database: from async code call them through
``await db.run(...)``; open the index that way too (it checks the extension).
"""

from __future__ import annotations

from novaberg.storage.db import Database
from novaberg.storage.vectors import pgvector, sqlite_vec
from novaberg.storage.vectors.exact import ExactIndex
from novaberg.storage.vectors.held import CACHE_BYTES, CACHE_FROM, PG_CACHE_FROM
from novaberg.storage.vectors.numeric import (
    int8_scores,
    pack,
    quantize,
    rerank_count,
    top_rows,
)
from novaberg.storage.vectors.pgvector import PgvectorIndex
from novaberg.storage.vectors.protocol import Mode, VectorIndex
from novaberg.storage.vectors.spaces import REINDEX, Space, SpaceStats, check_name
from novaberg.storage.vectors.sqlite_vec import SqliteVecIndex

__all__ = [
    "CACHE_BYTES",
    "CACHE_FROM",
    "PG_CACHE_FROM",
    "REINDEX",
    "ExactIndex",
    "Mode",
    "PgvectorIndex",
    "Space",
    "SpaceStats",
    "SqliteVecIndex",
    "VectorIndex",
    "check_name",
    "int8_scores",
    "open_vector_index",
    "pack",
    "quantize",
    "rerank_count",
    "top_rows",
]


def open_vector_index(
    db: Database, *, cache_from: int | None = None, cache_bytes: int = CACHE_BYTES
) -> VectorIndex:
    """The index this database gets: sqlite-vec on SQLite where the connection loaded it,
    pgvector on PostgreSQL where the extension is (or can be) added, else the exact scan with
    the notice that says why and what to do. Builds the fast index of any space that lacks
    one. ``cache_from`` (vectors of one user before the in-memory copy is used; default by
    database) and ``cache_bytes`` (0: no copy) tune the copy (``held.py``). Blocking."""
    why = sqlite_vec.unavailable(db) if db.dialect == "sqlite" else pgvector.prepare(db)
    if why is not None:
        return ExactIndex(db, notice=why, cache_from=cache_from, cache_bytes=cache_bytes)
    if db.dialect == "sqlite":
        return SqliteVecIndex(db, cache_from=cache_from, cache_bytes=cache_bytes)
    return PgvectorIndex(db, cache_from=cache_from, cache_bytes=cache_bytes)
