"""A large user's vectors held in memory as int8 codes, on either database and under every
implementation of the index (see :mod:`novaberg.storage.vectors`).

A user with many vectors of one embedder (:data:`CACHE_FROM` on SQLite, :data:`PG_CACHE_FROM`
on PostgreSQL) is searched in an in-memory copy of their vectors, kept current through the
change counts that triggers keep in ``vector_counts`` (m011). The first search of an index asks
for none (a one-off command would never use it); the second starts loading it in a database
worker, and the database answers every search until it is there, so no search waits for the
load (0.6-1 s at 100k). New rows are appended at the next search; a removal loads it again the
same way. The copy holds each unit vector as 384 signed bytes (``round(127 * x)``, a quarter of
float32's memory), scored against the query with simsimd's int8 dot product (SIMD, every core:
about 1 ms at 100k vectors, against 9 ms for numpy's float32 product, which reads four times
the bytes); the best :func:`~novaberg.storage.vectors.numeric.rerank_count` are then scored
again exactly from their float32 rows in ``memory_vectors``, so the order and similarities
returned are the exact ones wherever the rounding did not push a neighbour out of that wider
set.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict
from collections.abc import Collection
from concurrent.futures import Future, wait
from contextlib import suppress
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import numpy.typing as npt

from novaberg.errors import NovabergError, StorageError
from novaberg.storage.db import Database
from novaberg.storage.vectors.numeric import int8_scores, quantize, rerank_count, top_rows, unpack
from novaberg.storage.vectors.spaces import Space

log = logging.getLogger("novaberg")

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

_COUNTS = "SELECT added, removed FROM vector_counts WHERE embedder = ? AND user_id = ?"
_SUPERSEDED = "SELECT id FROM memories WHERE user_id = ? AND valid_to IS NOT NULL"


@dataclass(frozen=True)
class Held:
    """One user's vectors of one space in memory, as of these change counts: unit vectors as
    int8 codes (:func:`~novaberg.storage.vectors.numeric.quantize`), one row per id."""

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


class HeldCopies:
    """The in-memory copies of one index (see the module docstring), least recently used
    dropped first beyond ``cache_bytes``; ``cache_bytes`` 0 holds none."""

    def __init__(self, db: Database, *, cache_from: int | None, cache_bytes: int) -> None:
        self.db = db
        sqlite = db.dialect == "sqlite"
        default = CACHE_FROM if sqlite else PG_CACHE_FROM
        self.cache_from = default if cache_from is None else cache_from
        self.cache_bytes = cache_bytes
        # new rows come after the last one held: SQLite's rowid; on PostgreSQL the memory id
        # (a row committed out of order is caught by the count check in get: a reload)
        self._order = "rowid" if sqlite else "memory_id"
        # the best rows are read back by their key: on SQLite by rowid alone (with the user
        # and embedder in the WHERE clause, its planner walked the user's index instead, 5 ms
        # at 100k), on PostgreSQL by embedder and memory id
        self._by_rowid = sqlite
        self.cache: OrderedDict[tuple[int, str], Held] = OrderedDict()
        self.loading: dict[tuple[int, str], Future[None]] = {}
        self._asked: set[tuple[int, str]] = set()
        self._cache_lock = threading.Lock()
        self._load_locks: dict[tuple[int, str], threading.Lock] = {}

    def get(self, space: Space, user_id: str) -> Held | None:
        """The user's vectors of this space held in memory (int8 codes) and brought up to date
        (new rows appended), or None when the database should answer: a small user, the first
        search in this process, or while the copy loads in the background (from the second
        search, and again after a removal)."""
        if self.cache_bytes <= 0:
            return None
        key = (space.id, user_id)
        row = self.db.one(_COUNTS, (space.embedder, user_id))
        if row is None or int(row["added"]) - int(row["removed"]) < self.cache_from:
            return None
        added, removed = int(row["added"]), int(row["removed"])
        with self._cache_lock:
            held = self.cache.get(key)
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
                held = self.cache.get(key) or held
            if held.removed != removed:
                return None
            if held.added != added:
                held = self.load(space, user_id, added, removed, after=held)
                if len(held.ids) != added - removed:  # rowids renumbered (a VACUUM): reload
                    held = self.load(space, user_id, added, removed, after=None)
            self._keep(key, held)
            return held

    def _keep(self, key: tuple[int, str], held: Held) -> None:
        with self._cache_lock:
            self.cache[key] = held
            self.cache.move_to_end(key)
            total = sum(h.codes.nbytes for h in self.cache.values())
            while total > self.cache_bytes and len(self.cache) > 1:
                _, dropped = self.cache.popitem(last=False)
                total -= dropped.codes.nbytes

    def _load_later(self, space: Space, user_id: str) -> None:
        """Start loading the user's copy in a database worker, unless it is loading (called
        under the cache lock)."""
        key = (space.id, user_id)
        if key in self.loading:
            return
        with suppress(StorageError):  # the database is closing: no search will come
            # (the load's own end takes this lock too, so it cannot finish before this line)
            self.loading[key] = self.db.submit(self._load_now, space, user_id)

    def _load_now(self, space: Space, user_id: str) -> None:
        """Blocking, in a database worker: load the user's copy as the counts are now."""
        key = (space.id, user_id)
        try:
            row = self.db.one(_COUNTS, (space.embedder, user_id))
            if row is not None:
                added, removed = int(row["added"]), int(row["removed"])
                self._keep(key, self.load(space, user_id, added, removed, after=None))
        except NovabergError as exc:  # the database answers instead, as before the copy
            log.info("the in-memory vector copy was not loaded: %s", type(exc).__name__)
        finally:
            with self._cache_lock:
                self.loading.pop(key, None)

    def settle(self, timeout_s: float | None = None) -> None:
        """Wait until the copies loading in the background are loaded (tests, benchmarks)."""
        with self._cache_lock:
            loading = list(self.loading.values())
        wait(loading, timeout=timeout_s)

    def load(
        self, space: Space, user_id: str, added: int, removed: int, after: Held | None
    ) -> Held:
        """The user's copy as of these counts: every row, or those after ``after``'s last
        appended to it."""
        since = -1 if after is None else after.max_rowid
        ids: list[int] = []
        keys: list[int] = []
        parts: list[npt.NDArray[np.int8]] = [] if after is None else [after.codes]
        top = since
        block = 8192  # rows decoded at a time: the float32 copy never exists whole
        order = self._order
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
            matrix = unpack((r["vec"] for r in rows), space.dim).astype(np.float32)
            matrix /= np.maximum(np.linalg.norm(matrix, axis=1, keepdims=True), 1e-12)
            parts.append(quantize(matrix))
        new_ids = np.asarray(ids, dtype=np.int64)
        new_keys = np.asarray(keys, dtype=np.int64)
        all_ids = new_ids if after is None else np.concatenate([after.ids, new_ids])
        all_keys = new_keys if after is None else np.concatenate([after.keys, new_keys])
        codes = np.concatenate(parts) if parts else np.empty((0, space.dim), np.int8)
        return Held(all_ids, np.ascontiguousarray(codes), all_keys, added, removed, top)

    def nearest(
        self, held: Held, space: Space, user_id: str, q: npt.NDArray[np.float32], k: int
    ) -> list[tuple[int, float]]:
        """The user's ``k`` current items nearest to ``q`` by the copy's int8 scores, the best
        :func:`~novaberg.storage.vectors.numeric.rerank_count` of them scored again exactly."""
        n = len(held.ids)
        if n == 0:
            return []
        unit = q / max(float(np.linalg.norm(q)), 1e-12)
        scores = int8_scores(held.codes, quantize(unit))
        superseded = {int(r["id"]) for r in self.db.query(_SUPERSEDED, (user_id,))}
        # superseded facts keep their vectors: their rows are scored out here, so the rows
        # read back stay rerank_count(k, n) however many facts a long life has superseded
        out = held.rows_of(superseded)
        scores[out] = -np.inf
        best = top_rows(scores, min(rerank_count(k, n), n - len(out)))
        keys = [int(held.keys[i]) for i in best]
        # the rows are read back by their key, then checked: a row replaced since the copy
        # was made is scored as what it is now, and one of another user never counts
        found: list[tuple[float, int]] = []
        for start in range(0, len(keys), 500):
            chunk = keys[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = self.db.query(
                "SELECT memory_id AS id, user_id, embedder, vec FROM memory_vectors WHERE "
                + (
                    f"rowid IN ({marks})"
                    if self._by_rowid
                    else f"embedder = ? AND memory_id IN ({marks})"
                ),
                chunk if self._by_rowid else [space.embedder, *chunk],
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
            matrix = unpack((r["vec"] for r in rows), space.dim)
            sims = (matrix @ unit) / np.maximum(np.linalg.norm(matrix, axis=1), 1e-12)
            found.extend((-float(s), int(r["id"])) for s, r in zip(sims, rows, strict=True))
        found.sort()
        return [(i, min(1.0, -s)) for s, i in found[:k]]
