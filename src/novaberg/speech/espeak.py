"""Text to speech with eSpeak NG (Debian's ``espeak-ng`` program): every language, formant
synthesis — clear but robotic. Nova's German voice, since no neural German voice ships in a
package that can be installed here (``jotts`` downloads its model from GitHub at run time).

The text goes to the program on its standard input, never on its command line."""

from __future__ import annotations

import shutil
import subprocess

from novaberg.errors import SpeechError, SpeechUnavailable
from novaberg.speech.audio import read_pcm
from novaberg.speech.base import Spoken

PROGRAM = "espeak-ng"
WORDS_PER_MINUTE = 150
"""Slower than espeak-ng's own 175: its German is easier to follow (and to hear back) so."""
TIMEOUT_S = 60.0


class EspeakSpeaker:
    name = "espeak-ng"
    languages: tuple[str, ...] = ("de", "en")
    note = "robotic formant synthesis (no neural German voice is packaged)"

    def __init__(self, voice: str = "de") -> None:
        self.voice = voice
        self.model = f"voice {voice}"

    def missing(self) -> str | None:
        if shutil.which(PROGRAM) is None:
            return "the espeak-ng program is not installed (Debian: apt-get install espeak-ng)"
        return None

    @property
    def loaded(self) -> bool:
        return self.missing() is None

    def load(self) -> None:
        problem = self.missing()
        if problem is not None:
            raise SpeechUnavailable(f"espeak-ng: {problem}")

    def synthesize(self, text: str, speed: float) -> Spoken:
        self.load()
        rate = str(max(80, min(450, round(WORDS_PER_MINUTE * speed))))
        try:
            done = subprocess.run(
                [PROGRAM, "-v", self.voice, "-s", rate, "-b", "1", "--stdin", "--stdout"],
                input=text.encode("utf-8"),
                capture_output=True,
                timeout=TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise SpeechError(f"espeak-ng did not speak ({type(exc).__name__}).") from None
        if done.returncode != 0 or not done.stdout:
            raise SpeechError(f"espeak-ng failed (exit status {done.returncode}).")
        pcm, sample_rate = read_pcm(done.stdout)
        return Spoken(pcm, sample_rate, f"{self.name} {self.model}")
