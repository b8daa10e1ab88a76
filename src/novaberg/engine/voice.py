"""Nova's voice, one door for every caller that hears or speaks (the server's ``/v1/audio``
routes, and the turn routes that note a spoken message): the process's speech engines
(:mod:`novaberg.speech.engines`, made on first use, loaded in a worker thread) and what each
user said recently (:mod:`novaberg.speech.heard`), so a transcription's words that come back
as a message are marked as spoken in the turn's trace.

Decoding and encoding run in the speech worker thread with the engine, never on the event
loop; a full speech queue raises :class:`Busy`, an engine that is not installed
:class:`~novaberg.errors.SpeechUnavailable`, audio that cannot be read
:class:`~novaberg.errors.BadAudio`."""

from __future__ import annotations

from novaberg.config import Speech
from novaberg.errors import UsageError
from novaberg.speech.audio import FORMATS, Format, decode, encode
from novaberg.speech.base import Heard, Speaker
from novaberg.speech.engines import LANGUAGES, Busy, Engines
from novaberg.speech.heard import RecentlyHeard

__all__ = ["FORMATS", "LANGUAGES", "Busy", "Format", "Heard", "VoiceService"]


class VoiceService:
    """The speech of one process: its engines, made on first use (cheaply: nothing loads
    until a job needs it), and the transcriptions its users were given."""

    def __init__(self, settings: Speech) -> None:
        self.settings = settings
        self._engines: Engines | None = None
        self.heard = RecentlyHeard()

    @property
    def engines(self) -> Engines:
        if self._engines is None:
            self._engines = Engines(self.settings)
        return self._engines

    async def transcribe(self, data: bytes, language: str) -> Heard:
        """The words of the audio file ``data`` in ``language`` (decoded, at most
        ``speech.max_audio_s`` long, and heard in the speech worker thread)."""
        listener = self.engines.listener(language)
        max_s = self.settings.max_audio_s
        return await self.engines.run(lambda: listener.transcribe(decode(data, max_s), language))

    async def speak(self, text: str, language: str, speed: float, fmt: Format) -> bytes:
        """``text`` spoken by Nova's voice for ``language``, encoded as ``fmt``; a
        :class:`~novaberg.errors.UsageError` when nothing in it can be spoken."""
        speaker = self.engines.speaker(language)
        return await self.engines.run(lambda: _say(speaker, text, speed, fmt))

    def voices(self) -> dict[str, str]:
        """Each language's voice, described as ``engine model``."""
        return {lang: f"{s.name} {s.model}" for lang, s in self.engines.speakers.items()}

    def remember(self, user: str, heard: Heard) -> None:
        """``user`` was given ``heard``'s words: a message of exactly them is a spoken one."""
        self.heard.remember(user, heard)

    def notice_for(self, user: str, message: str) -> str | None:
        """The trace notice for ``user``'s ``message`` when it is words they were given by a
        transcription a short while ago, else ``None``."""
        return self.heard.notice_for(user, message)


def _say(speaker: Speaker, text: str, speed: float, fmt: Format) -> bytes:
    """``text`` spoken and encoded (in the speech worker thread)."""
    spoken = speaker.synthesize(text, speed)
    if not spoken.pcm:
        raise UsageError("input has nothing that can be spoken (no words in it).")
    return encode(spoken, fmt)
