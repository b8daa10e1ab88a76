"""Which engine hears and which speaks each language, each made once per process and
loaded on first use in a worker thread (:func:`asyncio.to_thread`), never on the event loop.
One speech job runs at a time per process (they are CPU-bound, and the turn's model calls
share the cores); ``speech.max_waiting`` more may wait, the next is refused
(:class:`Busy`)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from novaberg.config import Speech
from novaberg.errors import SpeechUnavailable
from novaberg.speech import espeak, piper, whisper
from novaberg.speech.base import EngineInfo, Listener, Speaker

T = TypeVar("T")
LANGUAGES = ("en", "de")


class Busy(Exception):
    """Too many speech requests wait in this process (``speech.max_waiting``)."""


@dataclass
class Engines:
    """The speech engines of one process."""

    settings: Speech
    listeners: dict[str, Listener] = field(default_factory=dict)
    speakers: dict[str, Speaker] = field(default_factory=dict)
    _slot: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(1))
    _waiting: int = 0

    def __post_init__(self) -> None:
        threads = self.settings.threads
        self.listeners = self.listeners or {
            "en": whisper.tiny_en(threads),
            "de": whisper.base(threads),
        }
        self.speakers = self.speakers or {
            "en": piper.PiperSpeaker(threads),
            "de": espeak.EspeakSpeaker("de"),
        }

    def listener(self, language: str) -> Listener:
        return _installed(self.listeners[language], "hear", language)

    def speaker(self, language: str) -> Speaker:
        return _installed(self.speakers[language], "speak", language)

    async def run(self, job: Callable[[], T]) -> T:
        """``job`` in a worker thread, once the process's speech slot is free."""
        if self._waiting >= self.settings.max_waiting + 1:
            raise Busy
        self._waiting += 1
        try:
            async with self._slot:
                return await asyncio.to_thread(job)
        finally:
            self._waiting -= 1

    def describe(self) -> list[EngineInfo]:
        """Every engine, what it serves and what it lacks here (nothing is loaded)."""
        out = []
        for kind, engines in (("listen", self.listeners), ("speak", self.speakers)):
            for language, engine in engines.items():
                out.append(
                    EngineInfo(
                        name=engine.name,
                        kind=kind,
                        language=language,
                        model=engine.model,
                        missing=engine.missing(),
                        note=getattr(engine, "note", ""),
                        loaded=bool(getattr(engine, "loaded", False)),
                    )
                )
        return out


E = TypeVar("E", Listener, Speaker)


def _installed(engine: E, verb: str, language: str) -> E:
    problem = engine.missing()
    if problem is not None:
        raise SpeechUnavailable(
            f"Nova cannot {verb} {language!r} here: {engine.name} ({engine.model}): {problem}."
        )
    return engine
