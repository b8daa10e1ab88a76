"""A BERT encoder's layers as an ONNX graph, run by onnxruntime on one CPU thread.

It computes what ``minilm.NumpyLayers`` computes, layer for layer, from the same float32
weights, so the vectors agree to float rounding (a test holds them to it) and vectors stored
by either path can be compared with the other's. It is faster because onnxruntime pre-packs
the weights for its matrix kernels once, when the session is made, and runs the whole pass
without Python in between: a question of 16 tokens takes about 5 ms instead of 7 on this
project's 2-core machines, and it stays on one core, leaving the other to the database search
that runs beside it.

The graph is written here with the ``onnx`` package (nothing is downloaded or exported from
torch) and handed to onnxruntime as bytes. Its weights stay in the checkpoint file: each
initializer points at its bytes in ``model.safetensors`` (ONNX's external data), and
onnxruntime reads them itself. The token embeddings (a table lookup) stay in numpy.

The written graph (a few hundred KB without its weights) is kept in
``$NOVABERG_HOME/cache/`` (:func:`model_bytes`), named by a hash of the checkpoint's header
and of how it is written: importing ``onnx`` alone takes about 3 s on this project's 2-core
machines (its C extension), which every process that embeds paid at its first turn; a
process that finds the graph written imports onnxruntime only (issue 21: the embedder's load
fell from about 2.9 s to about 0.4 s).
"""

from __future__ import annotations

import hashlib
import importlib.util
import logging
import math
import os
import struct
from pathlib import Path
from typing import Any

import numpy as np

from novaberg.config import default_home
from novaberg.embedders import safetensors
from novaberg.embedders.base import Matrix
from novaberg.errors import EmbedderError

CHECKPOINT = "model.safetensors"
log = logging.getLogger("novaberg")
THREADS = 1
"""onnxruntime's threads for one pass: a turn's other work (SQLite, the HTTP server) keeps the
machine's other cores."""


GRAPH_VERSION = "bert-layers-1"
"""Part of the cached graph's name: change it whenever :func:`build_model` writes another
graph."""


def available() -> bool:
    """Whether onnxruntime can be imported here and onnx is installed (found, not imported:
    importing onnx takes seconds, and a cached graph needs only onnxruntime)."""
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        return False
    return importlib.util.find_spec("onnx") is not None


def cache_dir() -> Path:
    """Where written graphs are kept: ``$NOVABERG_HOME/cache`` (private, as the home)."""
    home = Path(os.environ.get("NOVABERG_HOME") or default_home()).expanduser()
    return home / "cache"


def model_bytes(
    folder: Path, layers: int, heads: int, hidden: int, eps: float, cache: Path | None = None
) -> bytes:
    """:func:`build_model`'s bytes, read from ``cache`` (default :func:`cache_dir`) when they
    were written before for this checkpoint, else written now and kept there. A cache that
    cannot be read or written only costs the time to write the graph again."""
    with (folder / CHECKPOINT).open("rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = f.read(header_len)
    shape = f"{GRAPH_VERSION}|{layers}|{heads}|{hidden}|{eps!r}|".encode()
    key = hashlib.sha256(shape + header).hexdigest()[:32]
    path = (cache or cache_dir()) / f"{GRAPH_VERSION}-{key}.onnx"
    try:
        return path.read_bytes()
    except OSError:
        pass
    model = build_model(folder, layers, heads, hidden, eps)
    try:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        written = path.with_name(f".{path.name}.{os.getpid()}")
        written.write_bytes(model)
        written.replace(path)  # atomic: a process reading it sees all or nothing
    except OSError as exc:
        log.debug("the encoder's graph could not be cached (%s)", type(exc).__name__)
    return model


def build_model(folder: Path, layers: int, heads: int, hidden: int, eps: float) -> bytes:
    """The serialized ONNX model of the encoder layers of the checkpoint in ``folder``.

    Inputs: ``hidden`` ``(batch, length, hidden)``, the embedded tokens after their layer
    norm, and ``mask_bias`` ``(batch, 1, 1, length)``, 0 for a token and a large negative
    number for padding. Output: ``states``, the last layer's states. The transposed weight
    matrices and the joined query/key/value matrix are nodes over the checkpoint's tensors;
    onnxruntime folds them into constants when it makes the session.
    """
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    specs = safetensors.header(folder / CHECKPOINT)
    head = hidden // heads
    initializers: list[onnx.TensorProto] = []
    nodes: list[onnx.NodeProto] = []

    def const(name: str, value: Any) -> str:
        initializers.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def weight(name: str) -> str:
        """The checkpoint's tensor ``name``, by reference to its bytes in the file."""
        spec = specs.get(name)
        if spec is None or spec.dtype != "<f4":
            raise EmbedderError(f"{folder / CHECKPOINT}: no float32 tensor {name}")
        tensor = TensorProto()
        tensor.name = name
        tensor.data_type = TensorProto.FLOAT
        tensor.dims.extend(spec.shape)
        tensor.data_location = TensorProto.EXTERNAL
        for key, value in (
            ("location", CHECKPOINT),
            ("offset", str(spec.offset)),
            ("length", str(spec.length)),
        ):
            entry = tensor.external_data.add()
            entry.key, entry.value = key, value
        initializers.append(tensor)
        return name

    def op(kind: str, inputs: list[str], **attrs: Any) -> str:
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], name=f"n{len(nodes)}", **attrs))
        return out

    def dense(inp: str, prefix: str) -> str:
        """``inp @ W.T + b``: the checkpoint stores ``W`` as ``(out, in)``."""
        w = op("Transpose", [weight(f"{prefix}.weight")], perm=[1, 0])
        return op("Add", [op("MatMul", [inp, w]), weight(f"{prefix}.bias")])

    def layer_norm(inp: str, prefix: str) -> str:
        return op(
            "LayerNormalization",
            [inp, weight(f"{prefix}.weight"), weight(f"{prefix}.bias")],
            epsilon=eps,
            axis=-1,
        )

    const("split_sizes", np.array([hidden, hidden, hidden], dtype=np.int64))
    const("to_heads", np.array([0, 0, heads, head], dtype=np.int64))
    const("to_hidden", np.array([0, 0, hidden], dtype=np.int64))
    const("scale", np.array(1 / math.sqrt(head), dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))
    const("one", np.array(1.0, dtype=np.float32))
    const("inv_sqrt2", np.array(1 / math.sqrt(2), dtype=np.float32))

    x = "hidden"
    for i in range(layers):
        p = f"encoder.layer.{i}"
        parts = [f"{p}.attention.self.{part}" for part in ("query", "key", "value")]
        qkv_w = op(
            "Transpose",
            [op("Concat", [weight(f"{q}.weight") for q in parts], axis=0)],
            perm=[1, 0],
        )
        qkv_b = op("Concat", [weight(f"{q}.bias") for q in parts], axis=0)
        qkv = op("Add", [op("MatMul", [x, qkv_w]), qkv_b])
        q_out, k_out, v_out = (f"q{i}", f"k{i}", f"v{i}")
        nodes.append(
            helper.make_node(
                "Split", [qkv, "split_sizes"], [q_out, k_out, v_out], name=f"split{i}", axis=-1
            )
        )
        q = op("Transpose", [op("Reshape", [q_out, "to_heads"])], perm=[0, 2, 1, 3])
        k_t = op("Transpose", [op("Reshape", [k_out, "to_heads"])], perm=[0, 2, 3, 1])
        v = op("Transpose", [op("Reshape", [v_out, "to_heads"])], perm=[0, 2, 1, 3])
        scores = op("Add", [op("MatMul", [op("Mul", [q, "scale"]), k_t]), "mask_bias"])
        probs = op("Softmax", [scores], axis=-1)
        context = op(
            "Reshape",
            [op("Transpose", [op("MatMul", [probs, v])], perm=[0, 2, 1, 3]), "to_hidden"],
        )
        attended = op("Add", [dense(context, f"{p}.attention.output.dense"), x])
        x = layer_norm(attended, f"{p}.attention.output.LayerNorm")
        up = dense(x, f"{p}.intermediate.dense")
        erf = op("Erf", [op("Mul", [up, "inv_sqrt2"])])
        gelu = op("Mul", [op("Mul", [up, "half"]), op("Add", [erf, "one"])])
        x = layer_norm(op("Add", [dense(gelu, f"{p}.output.dense"), x]), f"{p}.output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["states"], name="states"))
    graph = helper.make_graph(
        nodes,
        "bert_layers",
        [
            helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["batch", "length", hidden]),
            helper.make_tensor_value_info(
                "mask_bias", TensorProto.FLOAT, ["batch", 1, 1, "length"]
            ),
        ],
        [helper.make_tensor_value_info("states", TensorProto.FLOAT, ["batch", "length", hidden])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return bytes(model.SerializeToString())


class OnnxLayers:
    """The encoder layers in an onnxruntime session; called like ``minilm.NumpyLayers``."""

    runtime = "onnxruntime"

    def __init__(self, folder: Path, layers: int, heads: int, hidden: int, eps: float) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = THREADS
        options.inter_op_num_threads = 1
        # onnxruntime's own warnings go to stderr, past Python's logging: keep them for errors
        options.log_severity_level = 3
        # the folder the model's external data (the checkpoint) is read from
        options.add_session_config_entry(
            "session.model_external_initializers_file_folder_path", str(folder)
        )
        try:
            model = model_bytes(folder, layers, heads, hidden, eps)
        except ImportError as exc:  # onnx is found but cannot be imported
            raise EmbedderError(f"onnx could not be imported to write the encoder ({exc})") from exc
        try:
            self._session = ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])
        except Exception as exc:  # onnxruntime's errors derive from Exception alone
            raise EmbedderError(
                f"onnxruntime could not load the encoder of {folder / CHECKPOINT} "
                f"({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc

    def __call__(self, x: Matrix, mask_bias: Matrix) -> Matrix:
        try:
            (states,) = self._session.run(["states"], {"hidden": x, "mask_bias": mask_bias})
        except Exception as exc:  # onnxruntime's errors derive from Exception alone
            raise EmbedderError(
                f"onnxruntime failed to run the encoder ({type(exc).__name__}: {str(exc)[:200]})"
            ) from exc
        out: Matrix = np.asarray(states, dtype=np.float32)
        return out
