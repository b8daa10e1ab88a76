"""Nova's ears and voice over HTTP (issue 27), against a real ``novaberg serve`` with the real
engines, through the official ``openai`` client: speech made by ``/v1/audio/speech`` is heard
back by ``/v1/audio/transcriptions`` with a bounded word error rate per language; bad audio
and bad requests are clear 4xx answers, fast; a spoken message says so in its turn's trace,
and no audio is kept."""

from __future__ import annotations

import io
import json
import re
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import openai
import pytest

from novaberg.speech.wer import word_error_rate
from novaberg.testing import OllamaTestServer, Reply
from tests.server_helpers import Nova, running_nova

av = pytest.importorskip("av", reason="the voice extra is not installed")
pytest.importorskip("faster_whisper", reason="the voice extra is not installed")

ENGLISH = [
    "Tomorrow I will walk to the park with my sister.",
    "My favourite colour is green and I love the sea.",
    "Please remind me to call my mother this evening.",
    "The weather was cold but the coffee was warm.",
]
GERMAN = [
    "Ich gehe morgen mit meiner Schwester in den Park.",
    "Meine Lieblingsfarbe ist grün und ich liebe das Meer.",
    "Bitte erinnere mich heute Abend an meine Mutter.",
    "Das Wetter war kalt, aber der Kaffee war warm.",
]
MAX_WER = {"en": 0.15, "de": 0.5}
"""Measured here: English (Piper joe, tiny.en) 0.0, German (espeak-ng, Whisper base) 0.03."""
QUICK_S = 10.0
"""A refusal of bad audio comes within this, whatever the file (no hang, no long decode)."""


@pytest.fixture(scope="module")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("serve-audio") / "home"
    env = {"NOVABERG_SERVER__RATE_LIMIT_PER_MINUTE": "0"}
    with running_nova(ollama_server, home, ("ada", "bob"), extra_env=env) as started:
        yield started


@pytest.fixture(scope="module")
def clients(nova: Nova) -> Iterator[dict[str, openai.OpenAI]]:
    """One client per user for the module, closed at its end (no socket left open)."""
    made = {user: nova.client(user) for user in nova.keys}
    yield made
    for client in made.values():
        client.close()


@pytest.fixture
def client(clients: dict[str, openai.OpenAI]) -> openai.OpenAI:
    return clients["ada"]


def speak(client: openai.OpenAI, text: str, voice: str, response_format: str = "wav") -> bytes:
    spoken = client.audio.speech.create(
        model="tts-1", voice=voice, input=text, response_format=response_format
    )
    return spoken.content


def hear(client: openai.OpenAI, audio: bytes, language: str, name: str = "speech.wav") -> str:
    heard = client.audio.transcriptions.create(
        model="whisper-1", file=(name, audio), language=language
    )
    return heard.text


def pcm_wav(samples: np.ndarray, rate: int = 16_000) -> bytes:
    """``samples`` (float, -1..1) as a WAV file, written by PyAV."""
    out = io.BytesIO()
    with av.open(out, mode="w", format="wav") as container:
        stream = container.add_stream("pcm_s16le", rate=rate)
        frame = av.AudioFrame.from_ndarray(
            (samples * 32767).astype(np.int16).reshape(1, -1), format="s16", layout="mono"
        )
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)
    return out.getvalue()


def seconds_of(audio: bytes) -> float:
    with av.open(io.BytesIO(audio)) as container:
        stream = container.streams.audio[0]
        frames = sum(f.samples for f in container.decode(stream))
        return frames / stream.rate


@pytest.mark.parametrize(
    ("language", "voice", "sentences"), [("en", "alloy", ENGLISH), ("de", "nova-de", GERMAN)]
)
def test_what_nova_says_she_hears_back_within_the_word_error_rate_of_the_language(
    client: openai.OpenAI, language: str, voice: str, sentences: list[str]
) -> None:
    pairs = []
    for sentence in sentences:
        audio = speak(client, sentence, voice)
        assert audio[:4] == b"RIFF" and seconds_of(audio) > 1.0
        pairs.append((sentence, hear(client, audio, language)))
    rate = word_error_rate(pairs)
    assert rate <= MAX_WER[language], (rate, pairs)


@pytest.mark.parametrize(
    ("response_format", "media_type", "magic"),
    [("mp3", "audio/mpeg", (b"ID3", b"\xff\xfb", b"\xff\xf3")), ("opus", "audio/ogg", (b"OggS",))],
)
def test_speech_comes_in_the_format_asked_for_and_is_heard_from_it(
    nova: Nova,
    client: openai.OpenAI,
    response_format: str,
    media_type: str,
    magic: tuple[bytes, ...],
) -> None:
    response = httpx.post(
        f"{nova.url}/v1/audio/speech",
        json={
            "model": "tts-1",
            "input": ENGLISH[0],
            "voice": "nova",
            "response_format": response_format,
        },
        headers=nova.auth(),
        timeout=60,
    )
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith(media_type)
    assert response.content.startswith(magic)
    heard = hear(client, response.content, "en", f"speech.{response_format}")
    assert word_error_rate([(ENGLISH[0], heard)]) <= MAX_WER["en"], heard


def test_faster_speech_is_shorter(client: openai.OpenAI) -> None:
    normal = seconds_of(speak(client, ENGLISH[1], "alloy"))
    fast = client.audio.speech.create(
        model="tts-1", voice="alloy", input=ENGLISH[1], response_format="wav", speed=2.0
    )
    assert seconds_of(fast.content) < normal * 0.8


def test_a_transcript_comes_as_text_or_verbose_json(client: openai.OpenAI) -> None:
    audio = speak(client, ENGLISH[2], "alloy")
    text = client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", audio), response_format="text"
    )
    assert isinstance(text, str) and "mother" in text.lower()
    verbose = client.audio.transcriptions.create(
        model="whisper-1", file=("a.wav", audio), response_format="verbose_json"
    )
    assert verbose.language == "en" and verbose.duration == pytest.approx(seconds_of(audio), 0.05)
    assert verbose.segments and "mother" in verbose.text.lower()


def refused(
    client: openai.OpenAI, audio: bytes, name: str = "x.wav", **form: str
) -> openai.APIStatusError:
    started = time.monotonic()
    with pytest.raises(openai.APIStatusError) as caught:
        client.audio.transcriptions.create(
            model=form.pop("model", "whisper-1"),
            file=(name, audio),
            **form,  # type: ignore[arg-type]
        )
    assert time.monotonic() - started < QUICK_S
    return caught.value


def code_of(error: openai.APIStatusError) -> str:
    body = error.body
    assert isinstance(body, dict), body
    return str(body["code"])


def test_silence_and_noise_are_no_speech(client: openai.OpenAI) -> None:
    silence = refused(client, pcm_wav(np.zeros(16_000 * 3)))
    assert silence.status_code == 400 and code_of(silence) == "no_speech"
    noise = np.random.default_rng(7).normal(0, 0.3, 16_000 * 4).clip(-1, 1)
    hiss = refused(client, pcm_wav(noise))
    assert hiss.status_code == 400 and code_of(hiss) == "no_speech"
    assert "No speech was heard" in hiss.message


def test_a_corrupt_or_unsupported_file_is_unreadable_audio(client: openai.OpenAI) -> None:
    audio = speak(client, ENGLISH[3], "alloy", "mp3")
    for junk, name in [
        (audio[: len(audio) // 40][::-1], "cut.mp3"),
        (b"%PDF-1.7 not a sound at all" * 50, "letter.pdf"),
        (b"", "empty.wav"),
    ]:
        error = refused(client, junk, name)
        assert error.status_code == 400 and code_of(error) == "unreadable_audio", name


def test_a_thirty_minute_file_is_refused_at_once(client: openai.OpenAI) -> None:
    out = io.BytesIO()  # 30 minutes of 8 kHz 8-bit PCM: 14 MB, under the size bound
    with av.open(out, mode="w", format="wav") as container:
        stream = container.add_stream("pcm_u8", rate=8000)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(
            np.full((1, 8000 * 60), 128, dtype=np.uint8), format="u8", layout="mono"
        )
        for _minute in range(30):
            frame.sample_rate = 8000
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    error = refused(client, out.getvalue(), "long.wav")
    assert error.status_code == 400 and code_of(error) == "audio_too_long"
    assert "speech.max_audio_s" in error.message


def test_a_file_over_the_size_bound_is_413(client: openai.OpenAI) -> None:
    error = refused(client, b"\0" * (25 * 1024 * 1024 + 10), "big.wav")
    assert error.status_code == 413 and "speech.max_audio_bytes" in error.message


def test_wrong_models_voices_formats_and_languages_are_clear_4xx(client: openai.OpenAI) -> None:
    audio = speak(client, ENGLISH[0], "alloy")
    wrong = refused(client, audio, model="whisper-large-v9")
    assert isinstance(wrong, openai.NotFoundError) and code_of(wrong) == "model_not_found"
    french = refused(client, audio, language="fr")
    assert french.status_code == 400 and code_of(french) == "unsupported_language"
    srt = refused(client, audio, response_format="srt")
    assert srt.status_code == 400 and "response_format" in srt.message
    bad_speech = [
        ({"model": "tts-9"}, 404),
        ({"voice": "darth"}, 400),
        ({"response_format": "aac"}, 400),
        ({"speed": 9.0}, 400),
        ({"input": "   "}, 400),
        ({"input": "x" * 5000}, 400),
    ]
    for change, status in bad_speech:
        ask = {"model": "tts-1", "voice": "alloy", "input": "Hello.", **change}
        with pytest.raises(openai.APIStatusError) as caught:
            client.audio.speech.create(**ask)  # type: ignore[arg-type]
        assert caught.value.status_code == status, change
        assert isinstance(caught.value.body, dict) and caught.value.body["message"], change


def test_the_audio_routes_need_a_key(nova: Nova) -> None:
    for path, kwargs in [
        ("/v1/audio/speech", {"json": {"model": "tts-1", "input": "Hi", "voice": "alloy"}}),
        ("/v1/audio/transcriptions", {"files": {"file": ("a.wav", b"RIFF")}}),
    ]:
        response = httpx.post(f"{nova.url}{path}", timeout=10, **kwargs)  # type: ignore[arg-type]
        assert response.status_code == 401
        assert response.json()["error"]["code"] == "invalid_api_key"


def test_voices_and_models_are_listed(nova: Nova) -> None:
    voices = httpx.get(f"{nova.url}/v1/audio/voices", headers=nova.auth(), timeout=10).json()
    assert {v["id"] for v in voices["voices"]} == {"nova-en", "nova-de"}
    models = httpx.get(f"{nova.url}/v1/audio/models", headers=nova.auth(), timeout=10).json()
    assert {"tts-1", "whisper-1"} <= {m["id"] for m in models["models"]}


def test_a_spoken_message_says_so_in_its_trace_and_no_audio_is_kept(
    nova: Nova, clients: dict[str, openai.OpenAI], server: OllamaTestServer
) -> None:
    server.script("responder", Reply(content="A walk sounds lovely."), Reply(content="Sure."))
    ada, bob = clients["ada"], clients["bob"]
    heard = hear(ada, speak(ada, ENGLISH[0], "alloy"), "en")
    turns = {  # bob types ada's words: they were not spoken by him
        who: client.chat.completions.with_raw_response.create(
            model="nova", messages=[{"role": "user", "content": heard}]
        )
        for who, client in (("bob", bob), ("ada", ada))
    }
    notices = {
        who: trace_notices(nova, int(r.headers["X-Novaberg-Turn-Id"])) for who, r in turns.items()
    }
    line = next(n for n in notices["ada"] if n.startswith("spoken:"))
    assert "faster-whisper tiny.en" in line and "confidence" in line and " s of audio" in line
    assert not any(n.startswith("spoken:") for n in notices["bob"])
    assert not audio_files(nova.home)


def trace_notices(nova: Nova, turn_id: int) -> list[str]:
    db = nova.db()
    try:
        row = db.one("SELECT trace_json FROM turns WHERE id = ?", (turn_id,))
    finally:
        db.close()
    assert row is not None
    return [str(n) for n in json.loads(row["trace_json"] or "{}").get("notices") or []]


def audio_files(home: Path) -> list[Path]:
    kinds = {".wav", ".mp3", ".ogg", ".opus", ".webm", ".flac", ".m4a"}
    return [p for p in home.rglob("*") if p.suffix.lower() in kinds]


def test_the_readmes_voice_example_runs(nova: Nova, capsys: pytest.CaptureFixture[str]) -> None:
    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```python\n(.*?)```", readme, flags=re.DOTALL)
    example = next(b for b in blocks if "audio.transcriptions.create" in b)
    code = example.replace("http://127.0.0.1:8484/v1", f"{nova.url}/v1").replace(
        '"nb-…"', repr(nova.keys["ada"])
    )
    scope: dict[str, object] = {}
    exec(compile(code, "README.md", "exec"), scope)  # the README's own example
    scope["nova"].close()  # type: ignore[attr-defined]
    assert "hello" in capsys.readouterr().out.lower()
