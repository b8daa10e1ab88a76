"""What was heard lately, so that the turn its words become records how they came: the
engine, the audio's duration and the confidence — never the audio, never kept past
:data:`KEEP_S` and never written anywhere but the turn's trace.

A transcription (``POST /v1/audio/transcriptions``) is remembered under its user and its
words; the next turn of that user whose message is those words (Open WebUI and the page send
the transcript as the message; the page lets the user edit it first, which makes it typed
text) takes it (:meth:`RecentlyHeard.notice_for`)."""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from novaberg.speech.base import Heard

KEEP_S = 600.0
"""How long a transcription waits for the turn it becomes."""
MOST = 256
"""Transcriptions remembered at most, across users (the oldest go first)."""


def _key(user: str, text: str) -> tuple[str, str]:
    return user, " ".join(text.split()).casefold()


@dataclass(frozen=True)
class _Entry:
    heard: Heard
    at: float


class RecentlyHeard:
    def __init__(self, keep_s: float = KEEP_S, most: int = MOST) -> None:
        self.keep_s = keep_s
        self.most = most
        self._entries: OrderedDict[tuple[str, str], _Entry] = OrderedDict()

    def remember(self, user: str, heard: Heard) -> None:
        key = _key(user, heard.text)
        self._entries.pop(key, None)
        self._entries[key] = _Entry(heard, time.monotonic())
        while len(self._entries) > self.most:
            self._entries.popitem(last=False)

    def take(self, user: str, message: str) -> Heard | None:
        """The transcription ``message`` came from (removed), if ``user`` had one lately."""
        entry = self._entries.pop(_key(user, message), None)
        if entry is None or time.monotonic() - entry.at > self.keep_s:
            return None
        return entry.heard

    def forget(self, user: str) -> None:
        for key in [k for k in self._entries if k[0] == user]:
            del self._entries[key]

    def notice_for(self, user: str, message: str) -> str | None:
        """The trace's line for a spoken message (engine, duration, confidence), if it was."""
        heard = self.take(user, message)
        if heard is None:
            return None
        return (
            f"spoken: heard by {heard.engine} ({heard.language}) from {heard.duration_s:.1f} s "
            f"of audio, confidence {heard.confidence:.2f}; the audio was not kept"
        )
