"""What every in-process embedder offers: a name, a dimension, and ``embed``.

An embedder is loaded lazily, once per process (the first ``embed`` call pays for it, under a
lock, so concurrent first calls load it once), and its ``embed`` is a plain synchronous call:
callers on the event loop run it with ``asyncio.to_thread``. Vectors are L2-normalised, so a
dot product is their cosine similarity.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

Matrix = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Embedded:
    """Vectors for a batch of texts, in order."""

    array: Matrix
    """Shape ``(len(texts), dim)``, float32, each row of unit length."""
    truncated: tuple[bool, ...]
    """Per text: whether it was longer than the model reads, so only its start was embedded."""

    @property
    def vectors(self) -> list[list[float]]:
        return [[float(x) for x in row] for row in self.array]

    @property
    def any_truncated(self) -> bool:
        return any(self.truncated)


class Embedder(ABC):
    """A sentence embedder that runs inside this process, from files an installed package ships.

    ``query`` marks the texts as search questions rather than stored passages: models trained
    with two prefixes (E5) embed them differently; the others ignore it.
    """

    name: str
    """Stable identifier, recorded beside every stored vector (e.g. ``minilm-l6-v2``)."""
    dim: int
    """Length of every vector."""
    max_tokens: int
    """What the model reads of one text, in its own tokens (special tokens included)."""

    def __init__(self) -> None:
        self._load_lock = threading.Lock()
        self._loaded = False

    def load(self) -> None:
        """Load the model now (otherwise the first ``embed`` does); at most once."""
        if self._loaded:
            return
        with self._load_lock:
            if not self._loaded:
                self._load()
                self._loaded = True

    def embed(self, texts: Sequence[str], *, query: bool = False) -> Embedded:
        """Unit vectors for ``texts`` (an empty batch gives an empty result)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts, not one string")
        self.load()
        if not texts:
            return Embedded(np.zeros((0, self.dim), dtype=np.float32), ())
        return self._embed(list(texts), query)

    @abstractmethod
    def _load(self) -> None: ...

    @abstractmethod
    def _embed(self, texts: list[str], query: bool) -> Embedded: ...


def l2_normalize(matrix: Matrix) -> Matrix:
    norms = np.linalg.norm(matrix, axis=1, keepdims=True)
    out: Matrix = (matrix / np.maximum(norms, 1e-12)).astype(np.float32, copy=False)
    return out
