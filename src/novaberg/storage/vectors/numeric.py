"""The numbers the vector index computes with, apart from any database: the float32 bytes
stored, the int8 codes of the in-memory copy and their scores, and how many of the best are
scored again exactly."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from novaberg.errors import StorageError

_simsimd: Any
try:
    import simsimd as _simsimd
except ImportError:  # pragma: no cover - a dependency; numpy scores without it, slower
    _simsimd = None

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


def pack(vec: Sequence[float] | npt.NDArray[Any]) -> bytes:
    """float32, little-endian: what ``memory_vectors.vec`` and sqlite-vec store."""
    return np.asarray(vec, dtype="<f4").tobytes()


def unpack(blobs: Iterable[Any], dim: int) -> npt.NDArray[np.float32]:
    """Stored float32 blobs (each ``dim`` numbers) as one matrix, a row each (read-only: it
    is the joined bytes)."""
    joined = np.frombuffer(b"".join(bytes(b) for b in blobs), dtype="<f4")
    matrix: npt.NDArray[np.float32] = joined.reshape(-1, dim)
    return matrix


def as_query(vec: Sequence[float] | npt.NDArray[Any], what: str) -> npt.NDArray[np.float32]:
    """``vec`` as a flat float32 array; refused when empty or not finite."""
    arr = np.asarray(vec, dtype=np.float32).reshape(-1)
    if arr.size == 0 or not np.all(np.isfinite(arr)):
        raise StorageError(f"{what}: a vector must be non-empty and finite")
    return arr
