"""The vector index (novaberg.storage.vectors) at scale: nearest() latency at 100k items on
SQLite, the query embedding measured apart, the write cost per item, and the database growth
per 1,000 items.

    python -m benchmarks.vectors [--items 100000] [--queries 200] [--exact]

The items are random unit vectors of 384 numbers (the length of both in-process embedders):
the search reads every vector of the user either way, so the timing does not depend on what
they mean (benchmarks/meaning.py measures what is found). One user holds every item, the worst
case for the per-user partition. ``--exact`` also times the exact scan used without sqlite-vec.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from novaberg.memory.store import MemoryStore
from novaberg.storage.db import Database
from novaberg.storage.vectors import VectorIndex, open_vector_index

DIM = 384
EMBEDDER = "bench-384"
QUESTIONS = [
    "What kind of pet do I own?",
    "Which herb do I dislike?",
    "Wann feiert meine Mama?",
    "Where does my sister live?",
    "What do I do on weekends?",
    "Which sport did I take up this year?",
    "What is my favourite kind of music?",
    "Welche Sprache lerne ich gerade?",
]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.parent.glob(path.name + "*"))


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    m = rng.standard_normal((n, DIM)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def _fill(db: Database, index: VectorIndex, n: int, rng: np.random.Generator) -> dict[str, Any]:
    """``n`` items with a vector each; the time of the items alone and with vectors."""
    path = Path(db.where)
    start_size = _size(path) if db.dialect == "sqlite" else 0
    item_s = vector_s = 0.0
    batch = 1000
    for start in range(0, n, batch):
        count = min(batch, n - start)
        vectors = _unit(rng, count)
        t0 = time.perf_counter()
        with db.transaction() as c:
            ids = [
                MemoryStore.add(
                    c, "bench", "long_term", f"bench item {i} about something", 0.5, f"b:{i}"
                ).id
                for i in range(start, start + count)
            ]
        t1 = time.perf_counter()
        with db.transaction() as c:
            for memory_id, vec in zip(ids, vectors, strict=True):
                index.upsert(c, memory_id, "bench", EMBEDDER, vec)
        t2 = time.perf_counter()
        item_s += t1 - t0
        vector_s += t2 - t1
    if db.dialect == "sqlite":
        db.one("PRAGMA wal_checkpoint(TRUNCATE)")
    return {
        "items": n,
        "write_item_ms_per_item": round(1000 * item_s / n, 3),
        "write_vector_ms_per_item": round(1000 * vector_s / n, 3),
        "bytes_total": (_size(path) - start_size) if db.dialect == "sqlite" else None,
    }


def _vector_bytes_sqlite(db: Database, index: VectorIndex) -> int:
    """What the vectors take: memory_vectors and the vec0 table's shadow tables (dbstat)."""
    space = index.space(EMBEDDER)
    assert space is not None
    rows = db.query(
        "SELECT SUM(pgsize) AS n FROM dbstat WHERE name = 'memory_vectors' "
        "OR name LIKE 'memory_vectors_%' OR name LIKE ?",
        (f"{space.table}%",),
    )
    return int(rows[0]["n"] or 0)


def _timed(fn: Any, queries: np.ndarray) -> tuple[list[float], list[float]]:
    """Wall-clock and CPU milliseconds per call (CPU time is what a busy machine distorts
    least)."""
    wall, cpu = [], []
    for q in queries:
        t0, c0 = time.perf_counter(), time.process_time()
        fn(q)
        wall.append(1000 * (time.perf_counter() - t0))
        cpu.append(1000 * (time.process_time() - c0))
    return wall, cpu


def _figures(name: str, timed: tuple[list[float], list[float]]) -> dict[str, float]:
    wall, cpu = timed
    return {
        f"{name}_p50_ms": _pct(wall, 0.5),
        f"{name}_p95_ms": _pct(wall, 0.95),
        f"{name}_cpu_p50_ms": _pct(cpu, 0.5),
        f"{name}_cpu_p95_ms": _pct(cpu, 0.95),
    }


def nearest_latency(n: int, queries: int, k: int, exact: bool) -> dict[str, Any]:
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="novaberg-vbench-") as tmp:
        path = Path(tmp) / "bench.db"
        db = Database(path)
        try:
            index = open_vector_index(db)
            filled = _fill(db, index, n, rng)
            vector_bytes = _vector_bytes_sqlite(db, index)
            stored = np.frombuffer(
                b"".join(
                    bytes(r["vec"])
                    for r in db.query(
                        "SELECT vec FROM memory_vectors ORDER BY random() LIMIT ?", (queries,)
                    )
                ),
                dtype="<f4",
            ).reshape(-1, DIM)
            qs = (stored + 0.3 * _unit(rng, len(stored))).astype(np.float32)
            vec0 = open_vector_index(db, cache_bytes=0)  # sqlite-vec answers every search
            vec0.nearest("bench", EMBEDDER, qs[0], k)  # warm the page cache
            result: dict[str, Any] = {
                "mode": index.mode,
                **filled,
                "vector_bytes_per_1000_items": round(1000 * vector_bytes / n),
                "total_bytes_per_1000_items": round(1000 * filled["bytes_total"] / n),
                "k": k,
                **_figures(
                    "sqlite_vec", _timed(lambda q: vec0.nearest("bench", EMBEDDER, q, k), qs)
                ),
            }
            # the in-memory copy (a long-lived process from its second search on)
            index.nearest("bench", EMBEDDER, qs[0], k)
            t0 = time.perf_counter()
            index.nearest("bench", EMBEDDER, qs[0], k)  # starts loading the copy
            index.settle()
            result["memory_copy_load_ms"] = round(1000 * (time.perf_counter() - t0))
            result.update(
                _figures(
                    "memory_copy", _timed(lambda q: index.nearest("bench", EMBEDDER, q, k), qs)
                )
            )
            if exact:
                space = index.space(EMBEDDER)
                assert space is not None
                result.update(
                    _figures(
                        "exact_scan",
                        _timed(
                            lambda q: index.scan(space, "bench", q, k),
                            qs[: max(5, queries // 10)],
                        ),
                    )
                )
            return result
        finally:
            db.close()


def query_embedding(rounds: int) -> dict[str, Any]:
    """The query vector's cost per in-process embedder, loaded (first use measured apart)."""
    from novaberg.embedders import NAMES, get_embedder
    from novaberg.errors import EmbedderError

    out: dict[str, Any] = {}
    for name in NAMES:
        embedder = get_embedder(name)
        try:
            t0 = time.perf_counter()
            embedder.load()
            load_ms = 1000 * (time.perf_counter() - t0)
        except EmbedderError as exc:
            out[name] = {"error": str(exc)}
            continue
        texts = np.array([QUESTIONS[i % len(QUESTIONS)] for i in range(rounds)])
        timed = _timed(lambda text, e=embedder: e.embed([str(text)], query=True), texts)
        out[name] = {"load_ms": round(load_ms), **_figures("query", timed)}
    return out


def vectors(
    n: int = 100_000, queries: int = 200, k: int = 50, exact: bool = False, embed: bool = True
) -> dict[str, Any]:
    """Everything above, with the machine's load noted (figures are noisy on shared cores)."""
    load_before = os.getloadavg()[0]
    result = {
        "sqlite": nearest_latency(n, queries, k, exact),
        "query_embedding": query_embedding(max(20, queries // 4)) if embed else {},
        "cpus": os.cpu_count(),
        "load_average_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
    }
    figures = result["sqlite"]
    result["p95_search_plus_query_cpu_ms"] = {
        f"{path} + {name}": round(figures[f"{path}_cpu_p95_ms"] + e["query_cpu_p95_ms"], 2)
        for path in ("sqlite_vec", "memory_copy")
        for name, e in result["query_embedding"].items()
        if "query_cpu_p95_ms" in e
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--items", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=50)
    parser.add_argument("--exact", action="store_true", help="also time the exact scan")
    parser.add_argument("--no-embed", action="store_true", help="leave out the embedders")
    args = parser.parse_args()
    result = vectors(args.items, args.queries, args.k, args.exact, not args.no_embed)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
