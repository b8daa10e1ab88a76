"""Retrieval as a turn runs it, the question's vector included: ``recall()`` at 10k and 100k
items of one user, by words and by meaning, on SQLite (sqlite-vec) and PostgreSQL (pgvector).

    python -m benchmarks.recall [--sizes 10000,100000] [--queries 200]
                                [--databases sqlite,pgvector] [--embedder minilm-l6-v2]

The items are ``benchmarks/memory.py``'s noise (salient-looking statements about the user's
people, a third of them near misses sharing the questions' words) and its questions. Every item
has a vector of the in-process embedder: the embedder's vectors of ``--pool`` (2,000) of the
items' texts, each reused for every 2,000th item with a small random change (0.02 per number,
then normalised), so that the similarities are spread as real ones are while the suite does not
spend 5 minutes embedding 100k texts. The search reads every vector either way.

Timed per question, wall clock, through :func:`novaberg.memory.retrieval.recall` on a running
event loop, as the enricher calls it: the question's vector (in a thread), the full-text
candidates, the nearest vectors, the fusion and the budget. ``first_ms`` is the first question
in the process (a large user's vectors are searched by the database then) and ``second_ms``
the second (the database answers it too, while it starts loading them into memory, where
every later search finds them); ``copy_loaded_ms``: from the second search's start until the
copy is loaded (before the timed questions); ``p50_ms``
and ``p95_ms`` are over the questions after three warm-up ones; ``query_vector_p50_ms`` is the
question's vector alone, for comparison. ``in_turn_p50_ms``/``in_turn_p95_ms``: the same
questions with their vector computed beforehand: in a turn the engine starts the whole search
with the turn, and the router's model call hides the vector (``start_recall``).
``words_only_p50_ms``/``words_only_p95_ms``: the same questions without an embedder (full text
alone), and ``p95_over_words_only_p95`` the ratio of the two p95s in the same run, which the
machine's noise moves less than either figure.
Goal: p95 ≤ 20 ms at 100k on SQLite.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.meaning import database  # SQLite, or PostgreSQL with pgvector
from benchmarks.memory import USER, _bulk, _noise, questions_about
from novaberg.config import Settings
from novaberg.embedders import get_embedder
from novaberg.memory.embedding import embed_local
from novaberg.memory.retrieval import recall, vector_index
from novaberg.storage.db import Database

POOL = 2000


def _fill(
    db: Database,
    rng: random.Random,
    count: int,
    base: datetime,
    embedder: str,
    pool: np.ndarray,
    start: int,
) -> None:
    """``count`` noise items with their vectors (pool vectors, slightly changed)."""
    noise_rng = np.random.default_rng(start)
    rows = _noise(rng, count, base, 400)
    rows = [(k, t, i, f"{key}:{start}", v, h) for k, t, i, key, v, h in rows]
    index = vector_index(db)
    for first in range(0, count, 5000):
        chunk = rows[first : first + 5000]
        ids = _bulk(db, chunk)
        picked = pool[[(start + first + n) % len(pool) for n in range(len(chunk))]]
        vectors = picked + 0.02 * noise_rng.standard_normal(picked.shape).astype(np.float32)
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        with db.transaction() as c:
            for memory_id, vec in zip(ids, vectors, strict=True):
                index.upsert(c, memory_id, USER, embedder, vec)
    if db.dialect == "postgres":
        db.conn.execute("ANALYZE memories")
        db.conn.execute("ANALYZE memory_vectors")


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 2)


def recall_latency(
    sizes: list[int], queries: int, kinds: list[str], embedder: str = "minilm-l6-v2"
) -> dict[str, Any]:
    rng = random.Random(7)
    base = datetime.now(UTC) - timedelta(days=400)
    questions = questions_about(rng, queries)
    model = get_embedder(embedder)
    model.load()
    pool_texts = [t for _, t, *_ in _noise(random.Random(99), POOL, base, 400)]
    pool = model.embed(pool_texts).array.astype(np.float32)
    singles = []
    for q in questions[:50]:
        started = time.perf_counter()
        model.embed([q], query=True)
        singles.append(1000 * (time.perf_counter() - started))
    settings = Settings(language="en", memory={"embedder": embedder})
    words_only = Settings(language="en", memory={"embedder": "off"})
    out: dict[str, Any] = {
        "embedder": embedder,
        "query_vector_p50_ms": round(statistics.median(singles), 2),
        "cpus": os.cpu_count(),
        "load_average_1min_before": round(os.getloadavg()[0], 2),
    }
    for kind in kinds:
        for size in sizes:
            with database(kind) as db:  # a fresh one per size: nothing held from before
                _fill(db, rng, size, base, embedder, pool, 0)

                async def timed(
                    db: Database = db,
                ) -> tuple[float, float, float, list[float], list[float], list[float], list[str]]:
                    t0 = time.perf_counter()
                    first = await recall(db, settings, USER, questions[0])
                    first_ms = 1000 * (time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    await recall(db, settings, USER, questions[1])  # starts loading the copy
                    second_ms = 1000 * (time.perf_counter() - t0)
                    await asyncio.to_thread(vector_index(db).settle)
                    loaded_ms = 1000 * (time.perf_counter() - t0)
                    await recall(db, settings, USER, questions[2])
                    times = []
                    for q in questions:
                        t0 = time.perf_counter()
                        await recall(db, settings, USER, q)
                        times.append(1000 * (time.perf_counter() - t0))
                    in_turn = []
                    for q in questions:  # the vector computed before, as a turn does
                        given = embed_local(embedder, [q], query=True, what="bench")
                        t0 = time.perf_counter()
                        await recall(db, settings, USER, q, given=given)
                        in_turn.append(1000 * (time.perf_counter() - t0))
                    words = []
                    for q in questions:  # no embedder: full text alone, for the ratio
                        t0 = time.perf_counter()
                        await recall(db, words_only, USER, q)
                        words.append(1000 * (time.perf_counter() - t0))
                    return first_ms, second_ms, loaded_ms, times, in_turn, words, first.notices

                first_ms, second_ms, loaded_ms, times, in_turn, words, notices = asyncio.run(
                    timed()
                )
                index = vector_index(db)
                out[f"{kind}_{size}"] = {
                    "index": index.mode,
                    "first_ms": round(first_ms, 2),
                    "second_ms": round(second_ms, 2),
                    "copy_loaded_ms": round(loaded_ms, 2),
                    "p50_ms": _pct(times, 0.5),
                    "p95_ms": _pct(times, 0.95),
                    "max_ms": round(max(times), 2),
                    "in_turn_p50_ms": _pct(in_turn, 0.5),
                    "in_turn_p95_ms": _pct(in_turn, 0.95),
                    "words_only_p50_ms": _pct(words, 0.5),
                    "words_only_p95_ms": _pct(words, 0.95),
                    "p95_over_words_only_p95": round(_pct(times, 0.95) / _pct(words, 0.95), 2),
                    "queries": len(times),
                    "notices": notices,
                }
                print(f"recall {kind} {size}: {out[f'{kind}_{size}']}", flush=True)
    out["load_average_1min_after"] = round(os.getloadavg()[0], 2)
    out["goal"] = "p95 <= 20 ms at 100k on SQLite, the question's vector included"
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--databases", default="sqlite,pgvector")
    parser.add_argument("--embedder", default="minilm-l6-v2")
    parser.add_argument("--out", type=Path, default=Path("bench-results/recall.json"))
    args = parser.parse_args()
    result = recall_latency(
        [int(n) for n in args.sizes.split(",")],
        args.queries,
        args.databases.split(","),
        args.embedder,
    )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
