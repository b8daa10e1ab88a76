"""The vector index on PostgreSQL with pgvector: ``CREATE EXTENSION vector`` is run by this
code (never by a migration, which would fail on a server without it), ``memory_vectors`` gets a
``vector`` column ``emb``, and the server computes the exact cosine distance over the user's
rows (an HNSW index missed most facts of the meaning suite; see
:meth:`PgvectorIndex._nearest_indexed`)."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import numpy.typing as npt

from novaberg.errors import StorageError
from novaberg.storage.db import Database
from novaberg.storage.sql import Connection
from novaberg.storage.vectors import spaces
from novaberg.storage.vectors.exact import ExactIndex
from novaberg.storage.vectors.held import CACHE_BYTES
from novaberg.storage.vectors.numeric import pack
from novaberg.storage.vectors.protocol import Mode
from novaberg.storage.vectors.spaces import Space

log = logging.getLogger("novaberg")

PGVECTOR_HINT = (
    "install pgvector on the PostgreSQL server (Debian/Ubuntu: apt-get install "
    "postgresql-<version>-pgvector; see https://github.com/pgvector/pgvector#installation) and "
    "restart Novaberg; it then runs CREATE EXTENSION vector itself (or a superuser runs it "
    "once in this database)"
)


def pg_text(vec: npt.NDArray[np.float32]) -> str:
    """A vector as pgvector's text form."""
    return "[" + ",".join(repr(float(x)) for x in vec) + "]"


def prepare(db: Database) -> str | None:
    """Make pgvector ready in this database (the extension, the ``emb`` column filled, the
    HNSW indexes of the release before dropped): None when it is; else why not, and what to
    do (the exact scan's notice)."""
    have = db.scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
    if have is None:
        offered = db.scalar(
            "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
        )
        if offered is None:
            return (
                "pgvector is not installed on this PostgreSQL server: memory search by "
                f"meaning scans every stored vector, exact but slower; {PGVECTOR_HINT}"
            )
        try:
            with db.transaction() as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except StorageError as exc:
            if db.scalar("SELECT 1 FROM pg_extension WHERE extname = 'vector'") is None:
                log.info("pgvector: CREATE EXTENSION vector failed: %s", exc)
                return (
                    "pgvector is installed on the server but this database user may not "
                    "add it (CREATE EXTENSION vector failed): memory search by meaning "
                    "scans every stored vector; ask a superuser to run CREATE EXTENSION "
                    "vector once in this database"
                )
    leftover = db.query(  # HNSW indexes of the release before: unused, slow writes
        "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
        "AND tablename = 'memory_vectors' AND indexname LIKE 'memory\\_vec\\_%'"
    )
    for r in leftover:
        with db.transaction() as c:
            c.execute(f"DROP INDEX IF EXISTS {spaces.check_name(str(r['indexname']))}")
    has_column = db.scalar(
        "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
        "AND table_name = 'memory_vectors' AND column_name = 'emb'"
    )
    if has_column is None:
        with db.transaction() as c:
            c.execute("ALTER TABLE memory_vectors ADD COLUMN IF NOT EXISTS emb vector")
    _backfill(db)
    return None


def _backfill(db: Database) -> None:
    """Vectors stored while pgvector was missing get their ``emb`` value."""
    while True:
        rows = db.query(
            "SELECT memory_id, embedder, vec FROM memory_vectors WHERE emb IS NULL LIMIT 500"
        )
        if not rows:
            return
        with db.transaction() as c:
            for r in rows:
                arr = np.frombuffer(bytes(r["vec"]), dtype="<f4")
                c.execute(
                    "UPDATE memory_vectors SET emb = ?::vector "
                    "WHERE memory_id = ? AND embedder = ?",
                    (pg_text(arr), r["memory_id"], r["embedder"]),
                )


class PgvectorIndex(ExactIndex):
    """pgvector's exact distance on the server (see the module docstring); made by
    :func:`~novaberg.storage.vectors.open_vector_index` once :func:`prepare` succeeded."""

    mode: Mode = "pgvector"

    def __init__(
        self, db: Database, *, cache_from: int | None = None, cache_bytes: int = CACHE_BYTES
    ) -> None:
        super().__init__(db, cache_from=cache_from, cache_bytes=cache_bytes)
        self._build_missing()

    def _build_index(self, c: Connection, space: Space) -> Space:
        # no HNSW index: the search is exact (see _nearest_indexed); one made by the release
        # before would only slow every write
        c.execute(f"DROP INDEX IF EXISTS {space.table}")
        return spaces.mark_indexed(c, space)

    def _drop_index(self, c: Connection, space: Space) -> None:
        c.execute(f"DROP INDEX IF EXISTS {space.table}")

    def _write(
        self, c: Connection, memory_id: int, user_id: str, embedder: str, arr: npt.NDArray[Any]
    ) -> None:
        c.execute(
            "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec, emb) "
            "VALUES (?, ?, ?, ?, ?::vector) ON CONFLICT (memory_id, embedder) DO UPDATE "
            "SET user_id = excluded.user_id, vec = excluded.vec, emb = excluded.emb",
            (memory_id, embedder, user_id, pack(arr), pg_text(arr)),
        )

    def _nearest_indexed(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]] | None:
        # an exact distance over the user's rows, not an HNSW index: on the meaning suite
        # (20,000 templated items, the table analyzed) HNSW missed most facts even with
        # ef_search 1000 and iterative scans (12 of 30 in its top 50; exact: 21 in the top 5).
        # A user with many vectors is searched in the in-memory copy instead (held.py).
        dist = "(v.emb <=> ?::vector)"
        text = pg_text(q)
        rows = self.db.query(
            f"SELECT v.memory_id AS id, {dist} AS distance FROM memory_vectors v "
            "JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.embedder = {spaces.literal(space.embedder)} AND v.user_id = ? "
            f"AND m.valid_to IS NULL ORDER BY {dist}, v.memory_id LIMIT ?",
            (text, user_id, text, k),
        )
        return [(int(r["id"]), 1.0 - float(r["distance"])) for r in rows]
