"""Read a ``.safetensors`` file into numpy arrays without the ``safetensors`` package.

The format: 8 bytes of little-endian header length, a JSON header naming each tensor's dtype,
shape and byte range, then the raw little-endian data. The file is memory-mapped, so the
arrays are views of the page cache, not copies.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

_DTYPES = {"F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4"}


@dataclass(frozen=True)
class Spec:
    """Where one tensor lies in the file: its numpy dtype, shape and absolute byte range."""

    dtype: str
    shape: tuple[int, ...]
    offset: int
    length: int


def header(path: Path) -> dict[str, Spec]:
    """Every tensor's :class:`Spec`, read from the file's header alone."""
    with path.open("rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        raw = json.loads(f.read(header_len).decode("utf-8"))
    base = 8 + header_len
    specs: dict[str, Spec] = {}
    for name, spec in raw.items():
        if name == "__metadata__":
            continue
        dtype = _DTYPES.get(spec["dtype"])
        if dtype is None:
            raise ValueError(f"{path.name}: tensor {name} has unsupported dtype {spec['dtype']}")
        start, end = spec["data_offsets"]
        specs[name] = Spec(dtype, tuple(int(n) for n in spec["shape"]), base + start, end - start)
    return specs


def load(path: Path) -> dict[str, npt.NDArray[np.generic]]:
    raw = np.memmap(path, dtype=np.uint8, mode="r")
    return {
        name: raw[s.offset : s.offset + s.length].view(s.dtype).reshape(s.shape)
        for name, s in header(path).items()
    }
