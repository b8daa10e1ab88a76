"""Read a ``.safetensors`` file into numpy arrays without the ``safetensors`` package.

The format: 8 bytes of little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian data. The file is memory-mapped, so the
arrays are views of the page cache, not copies.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


def load(path: Path) -> dict[str, npt.NDArray[np.generic]]:
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    (header_len,) = struct.unpack("<Q", bytes(raw[:8]))
    header = json.loads(bytes(raw[8 : 8 + header_len]).decode("utf-8"))
    base = 8 + header_len
    tensors: dict[str, npt.NDArray[np.generic]] = {}
    for name, spec in header.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(spec["dtype"])
        if dtype is None:
            raise ValueError(f"{path.name}: tensor {name} has unsupported dtype {spec['dtype']}")
        start, end = spec["data_offsets"]
        array = raw[base + start : base + end].view(dtype)
        tensors[name] = array.reshape(spec["shape"])
    return tensors
