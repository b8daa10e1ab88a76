"""The contract every speech engine implements, and the values they return.

A :class:`Listener` turns 16 kHz mono samples into :class:`Heard` words; a :class:`Speaker`
turns text into :class:`Spoken` samples. Both load their model in :meth:`load` (slow: called
once, in a worker thread) and say in :meth:`missing` what keeps them from running here,
without importing anything heavy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    Samples = npt.NDArray[np.float32]
else:
    Samples = object

SAMPLE_RATE = 16_000
"""What every listener hears: 16 kHz mono float32 in [-1, 1] (Whisper's input)."""


@dataclass(frozen=True)
class Segment:
    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Heard:
    """What a listener heard: the words, their language, the audio's length in seconds, and
    how sure it was (0–1: the mean token probability of the kept segments)."""

    text: str
    language: str
    duration_s: float
    confidence: float
    engine: str
    segments: tuple[Segment, ...] = ()


@dataclass(frozen=True)
class Spoken:
    """Speech as 16-bit mono PCM at ``sample_rate``."""

    pcm: bytes
    sample_rate: int
    engine: str

    @property
    def duration_s(self) -> float:
        return len(self.pcm) / 2 / self.sample_rate


@dataclass(frozen=True)
class EngineInfo:
    """One engine as ``doctor`` shows it."""

    name: str
    kind: str  # "listen" or "speak"
    language: str
    model: str
    missing: str | None = None
    """What to install for it to run here; ``None``: it can run."""
    note: str = ""
    loaded: bool = field(default=False, compare=False)


class Listener(Protocol):
    name: str
    model: str
    languages: tuple[str, ...]

    def missing(self) -> str | None: ...

    def load(self) -> None: ...

    def transcribe(self, samples: Samples, language: str) -> Heard: ...


class Speaker(Protocol):
    name: str
    model: str
    languages: tuple[str, ...]
    note: str

    def missing(self) -> str | None: ...

    def load(self) -> None: ...

    def synthesize(self, text: str, speed: float) -> Spoken: ...
