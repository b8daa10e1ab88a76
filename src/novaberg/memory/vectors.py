"""The vector index: one vector per memory item per embedder, and the nearest items to a
query vector among one user's current items, on SQLite (sqlite-vec) and PostgreSQL
(pgvector), with an exact scan where neither is available.

- ``memory_vectors`` (float32 blobs, one row per item and embedder) is the truth on both
  databases; ``vector_spaces`` records each embedder's name and vector length once. A vector
  of another length is refused (:class:`~novaberg.errors.VectorDimensionError`, naming
  ``novaberg memory reindex``), and two embedders' vectors are never compared.
- SQLite with sqlite-vec loaded (:mod:`novaberg.storage.sql` opens SQLite through
  ``sqlean`` for that): each embedder gets a ``vec0`` table ``memory_vec_<space id>``
  partitioned by user, with cosine distance, fed from ``memory_vectors`` by triggers (so
  every delete, forget's and the ``ON DELETE CASCADE`` of a memory included, removes the
  vector there too). A process that cannot load the extension drops those triggers and marks
  the index stale; the next one that can rebuilds it from ``memory_vectors``.
- PostgreSQL with pgvector: ``CREATE EXTENSION vector`` is run by this code (never by a
  migration, which would fail on a server without it), ``memory_vectors`` gets a ``vector``
  column ``emb``, and the server computes the exact cosine distance over the user's rows (an
  HNSW index missed most facts of the meaning suite; see :meth:`VectorIndex._nearest_pg`).
- Otherwise (``mode == "exact"``): a numpy scan over the user's stored blobs, exact but slower
  at many items; :attr:`VectorIndex.notice` says why and what to install.
- Either database, any mode: a user with many vectors of one embedder (:data:`CACHE_FROM` on
  SQLite, :data:`PG_CACHE_FROM` on PostgreSQL) is searched in an in-memory copy of their
  vectors, kept current through the change counts that triggers keep in ``vector_counts``
  (m011). The first search of this index asks for none (a one-off command would never use it);
  the second starts loading it in a database worker, and the database answers every search
  until it is there, so no search waits for the load (0.6-1 s at 100k). New rows are appended
  at the next search; a removal loads it again the same way. The copy holds each unit vector
  as 384 signed bytes (``round(127 * x)``, a quarter of float32's memory), scored against the
  query with simsimd's int8 dot product (SIMD, every core: about 1 ms at 100k vectors, against
  9 ms for numpy's float32 product, which reads four times the bytes); the best
  :func:`rerank_count` are then scored again exactly from their float32 rows in
  ``memory_vectors``, so the order and similarities returned are the exact ones wherever the
  rounding did not push a neighbour out of that wider set.

Every method is synchronous and queries the database: from async code call them through
``await db.run(...)``; construct the index that way too (it checks the extension).
"""

from __future__ import annotations

import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import Future, wait
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from novaberg.errors import NovabergError, StorageError, VectorDimensionError
from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

_simsimd: Any
try:
    import simsimd as _simsimd
except ImportError:  # pragma: no cover - a dependency; numpy scores without it, slower
    _simsimd = None

log = logging.getLogger("novaberg")

Mode = Literal["sqlite-vec", "pgvector", "exact"]
REINDEX = "novaberg memory reindex"
KNN_LIMIT = 4096
"""sqlite-vec's largest ``k``: beyond it (a user with thousands of superseded facts) the
search scans exactly instead."""
_NAME = re.compile(r"[A-Za-z0-9._:/@+\-]{1,200}")
CACHE_FROM = 10_000
"""A user with at least this many vectors of one embedder is searched, once a process's second
search has loaded it in the background, in a copy of their vectors held in memory (int8
codes, the best re-scored exactly; see the module docstring): sqlite-vec computes its cosine
distances one number at a time, about 85 ms at 100k vectors of 384 on 2 cores, and
PostgreSQL's exact distance reads every row (72 ms at 20k); the copy takes a few. Below it,
the database answers in a few milliseconds on SQLite, tens on PostgreSQL."""
PG_CACHE_FROM = 1_000
"""The same on PostgreSQL, whose exact distance reads every row of the user (about 35 ms at
10k): loading 1,000 vectors takes a few milliseconds once."""
CACHE_BYTES = 512 * 2**20
"""At most this much memory for those copies (least recently used dropped first): about
1.3 million vectors of 384."""
QUANT = 127.0
"""Unit vectors are held as ``round(QUANT * x)`` in int8."""


def rerank_count(k: int, n: int) -> int:
    """How many of the int8 scores' best are scored again exactly for a search of ``k``:
    ``k`` plus 200, or 4 ``k`` when that is more (never more than ``n``). Measured on 100k
    random unit vectors of 384, where neighbours are nearly tied (60 queries): the int8 top 50
    shared 43 to 50 items with the exact top 50, and the exact top 50 always lay within the
    int8 top 109 (``tests/test_vectors.py`` checks the same at 20k)."""
    return min(n, max(k + 200, 4 * k))


def quantize(matrix: npt.NDArray[np.float32]) -> npt.NDArray[np.int8]:
    """Unit rows as int8 codes (see :data:`QUANT`)."""
    codes: npt.NDArray[np.int8] = np.clip(np.rint(matrix * QUANT), -QUANT, QUANT).astype(np.int8)
    return codes


def int8_scores(codes: npt.NDArray[np.int8], query: npt.NDArray[np.int8]) -> npt.NDArray[Any]:
    """The dot product of every row of ``codes`` with ``query`` (integers, as floats):
    simsimd's SIMD kernels on every core, or numpy in blocks where simsimd is missing."""
    if _simsimd is not None:
        scores: npt.NDArray[Any] = np.asarray(
            _simsimd.cdist(query[None, :], codes, metric="dot", threads=0)
        )[0]
        return scores
    q = query.astype(np.float32)
    return np.concatenate(
        [codes[i : i + 8192].astype(np.float32) @ q for i in range(0, len(codes), 8192)]
        or [np.empty(0, np.float32)]
    )


def top_rows(scores: npt.NDArray[Any], take: int) -> npt.NDArray[np.intp]:
    """The positions of the ``take`` highest ``scores``, in no order. A threshold from every
    32nd score first keeps the few above it (about twice ``take``), so the selection sorts
    hundreds of scores, not 100k (0.06 ms instead of 0.7 at 100k); when fewer than ``take``
    pass it, all are selected from."""
    n = len(scores)
    if take <= 0:
        return np.empty(0, dtype=np.intp)
    if take >= n:
        return np.arange(n)
    sample = scores[::32]
    keep = 2 * take // 32 + 1
    if len(sample) > keep:
        threshold = np.partition(sample, len(sample) - keep)[len(sample) - keep]
        above = np.flatnonzero(scores >= threshold)
        if len(above) >= take:
            picked: npt.NDArray[np.intp] = above[np.argpartition(-scores[above], take - 1)[:take]]
            return picked
    everything: npt.NDArray[np.intp] = np.argpartition(-scores, take - 1)[:take]
    return everything


PGVECTOR_HINT = (
    "install pgvector on the PostgreSQL server (Debian/Ubuntu: apt-get install "
    "postgresql-<version>-pgvector; see https://github.com/pgvector/pgvector#installation) and "
    "restart Novaberg; it then runs CREATE EXTENSION vector itself (or a superuser runs it "
    "once in this database)"
)


@dataclass(frozen=True)
class Space:
    """One embedder's vectors: its name, their length, whether its fast index is built."""

    id: int
    embedder: str
    dim: int
    indexed: bool

    @property
    def table(self) -> str:
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


def _literal(embedder: str) -> str:
    return "'" + check_name(embedder).replace("'", "''") + "'"


def pack(vec: Sequence[float] | npt.NDArray[Any]) -> bytes:
    """float32, little-endian: what ``memory_vectors.vec`` and sqlite-vec store."""
    return np.asarray(vec, dtype="<f4").tobytes()


def _pg_text(vec: npt.NDArray[np.float32]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vec) + "]"


def _as_query(vec: Sequence[float] | npt.NDArray[Any], what: str) -> npt.NDArray[np.float32]:
    arr = np.asarray(vec, dtype=np.float32).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise StorageError(f"{what}: a vector must be non-empty and finite")
    return arr


class VectorIndex:
    """Nearest-neighbour search over stored memory vectors (see the module docstring)."""

    mode: Mode
    """What :meth:`nearest` uses on this database and Python."""
    notice: str | None
    """Why the fast index is not used, and what to do (doctor and traces show it); or None."""

    def __init__(
        self,
        db: Database,
        *,
        cache_from: int | None = None,
        cache_bytes: int = CACHE_BYTES,
    ) -> None:
        self.db = db
        default = CACHE_FROM if db.dialect == "sqlite" else PG_CACHE_FROM
        self.cache_from = default if cache_from is None else cache_from
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[int, str], _Held] = OrderedDict()
        self._asked: set[tuple[int, str]] = set()
        self._cache_lock = threading.Lock()
        self._load_locks: dict[tuple[int, str], threading.Lock] = {}
        self._loading: dict[tuple[int, str], Future[None]] = {}
        if db.dialect == "sqlite":
            self.mode, self.notice = self._prepare_sqlite()
        else:
            self.mode, self.notice = self._prepare_postgres()
        if self.mode != "exact":
            for space in self._spaces():
                if not space.indexed:
                    with self.db.transaction() as c:
                        self._build_index(c, space)

    # -- setup -------------------------------------------------------------------------
    def _prepare_sqlite(self) -> tuple[Mode, str | None]:
        conn = self.db.conn
        version = getattr(conn, "vec_version", None)
        if version:
            return "sqlite-vec", None
        why = getattr(conn, "vec_error", None) or "unknown reason"
        return "exact", (
            f"sqlite-vec is not loaded ({why}): memory search by meaning scans every stored "
            "vector, exact but slower with many memories; install the sqlean.py and sqlite-vec "
            "packages (they come with Novaberg) to index them"
        )

    def _prepare_postgres(self) -> tuple[Mode, str | None]:
        have = self.db.scalar("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
        if have is None:
            offered = self.db.scalar(
                "SELECT default_version FROM pg_available_extensions WHERE name = 'vector'"
            )
            if offered is None:
                return "exact", (
                    "pgvector is not installed on this PostgreSQL server: memory search by "
                    f"meaning scans every stored vector, exact but slower; {PGVECTOR_HINT}"
                )
            try:
                with self.db.transaction() as c:
                    c.execute("CREATE EXTENSION IF NOT EXISTS vector")
            except StorageError as exc:
                if self.db.scalar("SELECT 1 FROM pg_extension WHERE extname = 'vector'") is None:
                    log.info("pgvector: CREATE EXTENSION vector failed: %s", exc)
                    return "exact", (
                        "pgvector is installed on the server but this database user may not "
                        "add it (CREATE EXTENSION vector failed): memory search by meaning "
                        "scans every stored vector; ask a superuser to run CREATE EXTENSION "
                        "vector once in this database"
                    )
        leftover = self.db.query(  # HNSW indexes of the release before: unused, slow writes
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() "
            "AND tablename = 'memory_vectors' AND indexname LIKE 'memory\\_vec\\_%'"
        )
        for r in leftover:
            with self.db.transaction() as c:
                c.execute(f"DROP INDEX IF EXISTS {check_name(str(r['indexname']))}")
        has_column = self.db.scalar(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = current_schema() "
            "AND table_name = 'memory_vectors' AND column_name = 'emb'"
        )
        if has_column is None:
            with self.db.transaction() as c:
                c.execute("ALTER TABLE memory_vectors ADD COLUMN IF NOT EXISTS emb vector")
        self._backfill_pg()
        return "pgvector", None

    def _backfill_pg(self) -> None:
        """Vectors stored while pgvector was missing get their ``emb`` value."""
        while True:
            rows = self.db.query(
                "SELECT memory_id, embedder, vec FROM memory_vectors WHERE emb IS NULL LIMIT 500"
            )
            if not rows:
                return
            with self.db.transaction() as c:
                for r in rows:
                    arr = np.frombuffer(bytes(r["vec"]), dtype="<f4")
                    c.execute(
                        "UPDATE memory_vectors SET emb = ?::vector "
                        "WHERE memory_id = ? AND embedder = ?",
                        (_pg_text(arr), r["memory_id"], r["embedder"]),
                    )

    def _build_index(self, c: Connection, space: Space) -> None:
        """The fast index of one space, made (or remade) from ``memory_vectors``."""
        lit = _literal(space.embedder)
        t = space.table
        if self.mode == "sqlite-vec":
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
        elif self.mode == "pgvector":
            # no HNSW index: the search is exact (see _nearest_pg); one made by the release
            # before would only slow every write
            c.execute(f"DROP INDEX IF EXISTS {t}")
        else:
            return
        c.execute("UPDATE vector_spaces SET indexed = 1 WHERE id = ?", (space.id,))

    def _held(self, space: Space, user_id: str) -> _Held | None:
        """The user's vectors of this space held in memory (int8 codes) and brought up to date
        (new rows appended), or None when the database should answer: a small user, the first
        search in this process, or while the copy loads in the background (from the second
        search, and again after a removal)."""
        if self.cache_bytes <= 0:
            return None
        key = (space.id, user_id)
        row = self.db.one(
            "SELECT added, removed FROM vector_counts WHERE embedder = ? AND user_id = ?",
            (space.embedder, user_id),
        )
        if row is None or int(row["added"]) - int(row["removed"]) < self.cache_from:
            return None
        added, removed = int(row["added"]), int(row["removed"])
        with self._cache_lock:
            held = self._cache.get(key)
            if held is None and key not in self._asked:
                self._asked.add(key)  # a one-off search (a command) does not pay for a copy
                return None
            if held is None or held.removed != removed:
                # no copy yet, or rows of it since removed: it is (re)loaded in a database
                # worker, and the database answers until it is there (0.1 s at 100k on
                # SQLite, not the 0.6-1 s the load takes)
                self._load_later(space, user_id)
                return None
            lock = self._load_locks.setdefault(key, threading.Lock())
        with lock:  # new rows since: appended here, a few at a time
            with self._cache_lock:
                held = self._cache.get(key) or held
            if held.removed != removed:
                return None
            if held.added != added:
                held = self._load(space, user_id, added, removed, after=held)
                if len(held.ids) != added - removed:  # rowids renumbered (a VACUUM): reload
                    held = self._load(space, user_id, added, removed, after=None)
            self._keep(key, held)
            return held

    def _keep(self, key: tuple[int, str], held: _Held) -> None:
        with self._cache_lock:
            self._cache[key] = held
            self._cache.move_to_end(key)
            total = sum(h.codes.nbytes for h in self._cache.values())
            while total > self.cache_bytes and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                total -= dropped.codes.nbytes

    def _load_later(self, space: Space, user_id: str) -> None:
        """Start loading the user's copy in a database worker, unless it is loading (called
        under the cache lock)."""
        key = (space.id, user_id)
        if key in self._loading:
            return
        with suppress(StorageError):  # the database is closing: no search will come
            # (the load's own end takes this lock too, so it cannot finish before this line)
            self._loading[key] = self.db.submit(self._load_now, space, user_id)

    def _load_now(self, space: Space, user_id: str) -> None:
        """Blocking, in a database worker: load the user's copy as the counts are now."""
        key = (space.id, user_id)
        try:
            row = self.db.one(
                "SELECT added, removed FROM vector_counts WHERE embedder = ? AND user_id = ?",
                (space.embedder, user_id),
            )
            if row is not None:
                added, removed = int(row["added"]), int(row["removed"])
                self._keep(key, self._load(space, user_id, added, removed, after=None))
        except NovabergError as exc:  # the database answers instead, as before the copy
            log.info("the in-memory vector copy was not loaded: %s", type(exc).__name__)
        finally:
            with self._cache_lock:
                self._loading.pop(key, None)

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait until the copies loading in the background are loaded (tests, benchmarks)."""
        with self._cache_lock:
            loading = list(self._loading.values())
        wait(loading, timeout=timeout_s)

    def _load(
        self, space: Space, user_id: str, added: int, removed: int, after: _Held | None
    ) -> _Held:
        since = -1 if after is None else after.max_rowid
        ids: list[int] = []
        keys: list[int] = []
        parts: list[npt.NDArray[np.int8]] = [] if after is None else [after.codes]
        top = since
        block = 8192  # rows decoded at a time: the float32 copy never exists whole
        # new rows come after the last one held: SQLite's rowid; on PostgreSQL the memory id
        # (a row committed out of order is caught by the count check in _held: a reload)
        order = "rowid" if self.db.dialect == "sqlite" else "memory_id"
        cursor = self.db.query(
            f"SELECT {order} AS r, memory_id, vec FROM memory_vectors "
            f"WHERE embedder = ? AND user_id = ? AND {order} > ? AND length(vec) = ? "
            f"ORDER BY {order}",
            (space.embedder, user_id, since, space.dim * 4),
            binary=True,
        )
        for start in range(0, len(cursor), block):
            rows = cursor[start : start + block]
            ids.extend(int(r["memory_id"]) for r in rows)
            keys.extend(int(r["r"]) for r in rows)
            top = max(top, int(rows[-1]["r"]))
            matrix = np.frombuffer(b"".join(bytes(r["vec"]) for r in rows), dtype="<f4")
            matrix = matrix.reshape(len(rows), space.dim).astype(np.float32)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            parts.append(quantize(matrix))
        new_ids = np.asarray(ids, dtype=np.int64)
        new_keys = np.asarray(keys, dtype=np.int64)
        all_ids = new_ids if after is None else np.concatenate([after.ids, new_ids])
        all_keys = new_keys if after is None else np.concatenate([after.keys, new_keys])
        codes = np.concatenate(parts) if parts else np.empty((0, space.dim), np.int8)
        return _Held(all_ids, np.ascontiguousarray(codes), all_keys, added, removed, top)

    def _nearest_held(
        self, held: _Held, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        n = len(held.ids)
        if n == 0:
            return []
        unit = q / max(float(np.linalg.norm(q)), 1e-12)
        scores = int8_scores(held.codes, quantize(unit))
        superseded = {
            int(r["id"])
            for r in self.db.query(
                "SELECT id FROM memories WHERE user_id = ? AND valid_to IS NOT NULL", (user_id,)
            )
        }
        # superseded facts keep their vectors: their rows are scored out here, so the rows
        # read back stay rerank_count(k, n) however many facts a long life has superseded
        out = held.rows_of(superseded)
        scores[out] = -np.inf
        best = top_rows(scores, min(rerank_count(k, n), n - len(out)))
        keys = [int(held.keys[i]) for i in best]
        # the rows are read back by their key, then checked: a row replaced since the copy
        # was made is scored as what it is now, and one of another user never counts
        # (on SQLite by rowid alone: with the user and embedder in the WHERE clause, its
        # planner walked the user's index instead, 5 ms at 100k)
        sqlite = self.db.dialect == "sqlite"
        found: list[tuple[float, int]] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = self.db.query(
                "SELECT memory_id AS id, user_id, embedder, vec FROM memory_vectors WHERE "
                + (f"rowid IN ({marks})" if sqlite else f"embedder = ? AND memory_id IN ({marks})"),
                chunk if sqlite else [space.embedder, *chunk],
            )
            rows = [
                r
                for r in rows
                if r["user_id"] == user_id
                and r["embedder"] == space.embedder
                and len(r["vec"]) == space.dim * 4
                and int(r["id"]) not in superseded
            ]
            if not rows:
                continue
            matrix = np.frombuffer(b"".join(bytes(r["vec"]) for r in rows), dtype="<f4")
            matrix = matrix.reshape(len(rows), space.dim)
            sims = (matrix @ unit) / np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
            found.extend((-float(s), int(r["id"])) for s, r in zip(sims, rows, strict=True))
        found.sort()
        return [(i, min(1.0, -s)) for s, i in found[:k]]

    # -- spaces ------------------------------------------------------------------------
    @staticmethod
    def _space_of(row: dict[str, Any]) -> Space:
        return Space(int(row["id"]), str(row["embedder"]), int(row["dim"]), bool(row["indexed"]))

    def _spaces(self) -> list[Space]:
        rows = self.db.query("SELECT id, embedder, dim, indexed FROM vector_spaces ORDER BY id")
        return [self._space_of(r) for r in rows]

    def space(self, embedder: str) -> Space | None:
        row = self.db.one(
            "SELECT id, embedder, dim, indexed FROM vector_spaces WHERE embedder = ?", (embedder,)
        )
        return None if row is None else self._space_of(row)

    def _ensure_space(self, c: Connection, embedder: str, dim: int) -> Space:
        check_name(embedder)
        sql = "SELECT id, embedder, dim, indexed FROM vector_spaces WHERE embedder = ?"
        row = c.execute(sql, (embedder,)).one()
        if row is None:
            c.execute(
                "INSERT INTO vector_spaces (embedder, dim, indexed, created_at) "
                "VALUES (?, ?, 0, ?) ON CONFLICT (embedder) DO NOTHING",
                (embedder, dim, now()),
            )
            row = c.execute(sql, (embedder,)).one()
            assert row is not None
        space = self._space_of(row)
        _check_dim(space, dim)
        if not space.indexed and self.mode != "exact":
            self._build_index(c, space)
            space = Space(space.id, space.embedder, space.dim, True)
        return space

    def recorded(self) -> dict[str, int]:
        """Embedder name → the vector length recorded for it."""
        return {s.embedder: s.dim for s in self._spaces()}

    def stats(self) -> list[SpaceStats]:
        """Per embedder: length, how many vectors, whether the fast index serves it."""
        counts = {
            str(r["embedder"]): int(r["n"])
            for r in self.db.query(
                "SELECT embedder, COUNT(*) AS n FROM memory_vectors GROUP BY embedder"
            )
        }
        return [
            SpaceStats(s.embedder, s.dim, counts.get(s.embedder, 0), s.indexed)
            for s in self._spaces()
        ]

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
        arr = _as_query(vec, f"the vector of memory {memory_id}")
        self._ensure_space(c, embedder, int(arr.size))
        if c.dialect == "sqlite":
            c.execute(
                "DELETE FROM memory_vectors WHERE memory_id = ? AND embedder = ?",
                (memory_id, embedder),
            )
            c.execute(
                "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
                "VALUES (?, ?, ?, ?)",
                (memory_id, embedder, user_id, pack(arr)),
            )
        elif self.mode == "pgvector":
            c.execute(
                "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec, emb) "
                "VALUES (?, ?, ?, ?, ?::vector) ON CONFLICT (memory_id, embedder) DO UPDATE "
                "SET user_id = excluded.user_id, vec = excluded.vec, emb = excluded.emb",
                (memory_id, embedder, user_id, pack(arr), _pg_text(arr)),
            )
        else:
            c.execute(
                "INSERT INTO memory_vectors (memory_id, embedder, user_id, vec) "
                "VALUES (?, ?, ?, ?) ON CONFLICT (memory_id, embedder) DO UPDATE "
                "SET user_id = excluded.user_id, vec = excluded.vec",
                (memory_id, embedder, user_id, pack(arr)),
            )

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
            if self.mode == "sqlite-vec":
                for suffix in ("insert", "delete", "update"):
                    c.execute(f"DROP TRIGGER IF EXISTS {space.table}_{suffix}")
                c.execute(f"DROP TABLE IF EXISTS {space.table}")
            elif self.mode == "pgvector":
                c.execute(f"DROP INDEX IF EXISTS {space.table}")
            c.execute("DELETE FROM vector_spaces WHERE id = ?", (space.id,))
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
        set) are left out. Raises :class:`VectorDimensionError` when the recorded length of
        this embedder's vectors differs from the query's."""
        q = _as_query(query, "the query vector")
        space = self.space(embedder)
        if space is None or k <= 0:
            return []
        _check_dim(space, int(q.size))
        held = self._held(space, user_id)
        if held is not None:
            return self._nearest_held(held, space, user_id, q, k)
        if self.mode == "sqlite-vec" and space.indexed:
            found = self._nearest_vec0(space, user_id, q, k)
            if found is not None:
                return found
        elif self.mode == "pgvector" and space.indexed:
            return self._nearest_pg(space, user_id, q, k)
        return self._nearest_exact(space, user_id, q, k)

    def _nearest_vec0(
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

    def _nearest_pg(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        # an exact distance over the user's rows, not an HNSW index: on the meaning suite
        # (20,000 templated items, the table analyzed) HNSW missed most facts even with
        # ef_search 1000 and iterative scans (12 of 30 in its top 50; exact: 21 in the top 5).
        # A user with many vectors is searched in the in-memory copy instead (_held).
        dist = "(v.emb <=> ?::vector)"
        text = _pg_text(q)
        rows = self.db.query(
            f"SELECT v.memory_id AS id, {dist} AS distance FROM memory_vectors v "
            "JOIN memories m ON m.id = v.memory_id "
            f"WHERE v.embedder = {_literal(space.embedder)} AND v.user_id = ? "
            f"AND m.valid_to IS NULL ORDER BY {dist}, v.memory_id LIMIT ?",
            (text, user_id, text, k),
        )
        return [(int(r["id"]), 1.0 - float(r["distance"])) for r in rows]

    def _nearest_exact(
        self, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
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
        matrix = np.frombuffer(b"".join(bytes(r["vec"]) for r in rows), dtype="<f4")
        matrix = matrix.reshape(len(rows), space.dim)
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


@dataclass(frozen=True)
class _Held:
    """One user's vectors of one space in memory, as of these change counts: unit vectors as
    int8 codes (:func:`quantize`), one row per id."""

    ids: npt.NDArray[np.int64]
    codes: npt.NDArray[np.int8]
    keys: npt.NDArray[np.int64]
    """Per row, where its float32 vector is read back: SQLite's rowid in ``memory_vectors``
    (a lookup by the table's own key), on PostgreSQL the memory id."""
    added: int
    removed: int
    max_rowid: int

    @cached_property
    def by_id(self) -> npt.NDArray[np.intp]:
        """The rows in the order of their memory ids (to find ids' rows by bisection); sorted
        once per copy, when first needed (1 ms at 100k in the order the rows come)."""
        order: npt.NDArray[np.intp] = np.argsort(self.ids, kind="stable")
        return order

    def rows_of(self, memory_ids: Collection[int]) -> npt.NDArray[np.intp]:
        """The rows of those of ``memory_ids`` the copy holds."""
        if not memory_ids or not len(self.ids):
            return np.empty(0, dtype=np.intp)
        wanted = np.fromiter(memory_ids, dtype=np.int64, count=len(memory_ids))
        at = np.minimum(np.searchsorted(self.ids, wanted, sorter=self.by_id), len(self.ids) - 1)
        rows: npt.NDArray[np.intp] = self.by_id[at]
        held: npt.NDArray[np.intp] = rows[self.ids[rows] == wanted]
        return held


def _check_dim(space: Space, given: int) -> None:
    if given != space.dim:
        raise VectorDimensionError(
            f"The embedder {space.embedder!r} now gives vectors of {given} numbers, but the "
            f"stored ones have {space.dim}: the model behind that name changed. Run "
            f"`{REINDEX} --embedder {space.embedder}` to compute them again.",
            embedder=space.embedder,
            recorded=space.dim,
            given=given,
        )
