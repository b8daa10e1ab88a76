"""Nova's ears and voice in OpenAI's shapes: ``POST /v1/audio/transcriptions`` (a multipart
``file``, ``model``, ``language``, ``response_format`` json, text or verbose_json) and
``POST /v1/audio/speech`` (``input``, ``voice``, ``response_format`` mp3, opus, flac or wav,
``speed``), with ``GET /v1/audio/models`` and ``GET /v1/audio/voices`` for the front-ends
that list them (Open WebUI asks for them without a key and, refused, falls back to OpenAI's
names, which Nova accepts).

The same keys, users, rate limits and error shapes as every ``/v1`` route. OpenAI's model and
voice names choose Nova's engines for ``language`` (the request's for a transcription, the
setting for speech); ``nova-en`` and ``nova-de`` choose a voice's language. Bad audio is a 400
that says what was wrong (``unreadable_audio``, ``audio_too_long``, ``no_speech``), a file
over ``speech.max_audio_bytes`` a 413; an engine that is not installed a 501 naming what to
install; a full speech queue (``speech.max_waiting``) a 503. Audio is never stored; a
transcription is remembered, without its audio, for the trace of the turn it becomes
(:mod:`novaberg.speech.heard`)."""

from __future__ import annotations

import logging
from typing import Annotated, Literal

from fastapi import APIRouter, Depends, File, Form, Request, UploadFile
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from novaberg.engine.voice import FORMATS, LANGUAGES, Busy, Heard, VoiceService
from novaberg.errors import BadAudio, SpeechError, SpeechUnavailable, UsageError
from novaberg.server.auth import engine_of, require_user
from novaberg.server.errors import ApiProblem, openai_errors
from novaberg.text import quoted
from novaberg.validation import validate_message

log = logging.getLogger("novaberg.server")
router = APIRouter(prefix="/v1/audio")

TRANSCRIPTIONS = "/v1/audio/transcriptions"
HEARING_MODELS = ("whisper-1", "gpt-4o-transcribe", "gpt-4o-mini-transcribe", "nova")
SPEAKING_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts", "nova")
OPENAI_VOICES = (
    "alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer",
    "verse", "marin", "cedar",
)  # fmt: skip
"""OpenAI's voice names: each is Nova's voice in ``language``."""
NOVA_VOICES = {f"nova-{language}": language for language in LANGUAGES}
TRANSCRIPT_FORMATS = ("json", "text", "verbose_json")
BUSY_RETRY_S = 2


def voice_of(request: Request) -> VoiceService:
    """The process's voice, made on first use (made cheaply: nothing loads)."""
    state = request.app.state
    if getattr(state, "voice", None) is None:
        state.voice = VoiceService(engine_of(request).settings.speech)
    voice: VoiceService = state.voice
    return voice


def _model(model: str, known: tuple[str, ...]) -> None:
    if model and model not in known:
        raise ApiProblem(
            404,
            f"The model {quoted(model)} does not exist here; use one of {', '.join(known)} "
            "(each is Nova's engine for the language).",
            code="model_not_found",
        )


def _language(given: str | None, default: str) -> str:
    """``en``, ``de``: the request's language (``de-DE`` is ``de``), else Nova's."""
    if given is None or not given.strip():
        return default
    language = given.strip().replace("_", "-").split("-")[0].lower()
    if language not in LANGUAGES:
        raise ApiProblem(
            400,
            f"Nova hears {' and '.join(LANGUAGES)} only, not {quoted(given, 20)}; leave "
            "language out for Nova's own.",
            code="unsupported_language",
        )
    return language


def _problem(exc: SpeechError | Busy) -> ApiProblem:
    if isinstance(exc, Busy):
        return ApiProblem(
            503,
            "Too many speech requests are waiting (speech.max_waiting); try again after the "
            "seconds in Retry-After.",
            code="speech_busy",
            headers={"Retry-After": str(BUSY_RETRY_S)},
        )
    if isinstance(exc, BadAudio):
        return ApiProblem(400, str(exc), code=exc.code)
    if isinstance(exc, SpeechUnavailable):
        return ApiProblem(501, str(exc), code="speech_unavailable")
    log.error("speech failed: %s", type(exc).__name__)
    return ApiProblem(500, "Speech failed; the server log names the error.", code="speech_failed")


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Transcript(_Body):
    """``response_format`` json: OpenAI's transcription."""

    text: str


class TranscriptSegment(_Body):
    id: int
    start: float
    end: float
    text: str


class VerboseTranscript(_Body):
    """``response_format`` verbose_json: OpenAI's verbose transcription, with Nova's
    ``confidence`` (0–1) and the ``engine`` that heard it."""

    task: Literal["transcribe"]
    language: str
    duration: float = Field(description="The audio's length in seconds.")
    text: str
    segments: list[TranscriptSegment]
    confidence: float
    engine: str


class AudioModel(_Body):
    id: str


class AudioModels(_Body):
    models: list[AudioModel]


class Voice(_Body):
    id: str
    name: str


class Voices(_Body):
    voices: list[Voice]


def _transcript(heard: Heard, response_format: str) -> Response:
    if response_format == "text":
        return PlainTextResponse(heard.text + "\n")
    if response_format == "json":
        return JSONResponse({"text": heard.text})
    segments = [
        {"id": i, "start": s.start, "end": s.end, "text": s.text}
        for i, s in enumerate(heard.segments)
    ]
    return JSONResponse(
        {
            "task": "transcribe",
            "language": heard.language,
            "duration": heard.duration_s,
            "text": heard.text,
            "segments": segments,
            "confidence": heard.confidence,
            "engine": heard.engine,
        }
    )


@router.post(
    "/transcriptions",
    response_model=None,
    responses={
        200: {
            "model": Transcript | VerboseTranscript,
            "description": "json: {text}; verbose_json: with segments; text: the words.",
            "content": {"text/plain": {}},
        },
        **openai_errors(
            (400, "Audio that cannot be read (unreadable_audio), is longer than "
             "speech.max_audio_s (audio_too_long) or holds no speech (no_speech); a language "
             "Nova does not hear (unsupported_language); an unknown response_format; a "
             "transcript over max_message_chars (invalid_message)."),
            (404, "An unknown model (model_not_found)."),
            (413, "The file is larger than speech.max_audio_bytes."),
            (500, "Speech failed (speech_failed); the server log names the error."),
            (501, "The engine for the language is not installed (speech_unavailable)."),
            (503, "Too many speech requests wait (speech_busy); Retry-After says how many "
             "seconds to wait."),
        ),
    },
)  # fmt: skip
async def transcriptions(
    request: Request,
    user: Annotated[str, Depends(require_user)],
    file: Annotated[UploadFile, File(description="the audio: WAV, MP3, Ogg, WebM, M4A, FLAC")],
    model: Annotated[str, Form()] = "",
    language: Annotated[str | None, Form()] = None,
    response_format: Annotated[str, Form()] = "json",
) -> Response:
    """The words of ``file``, in ``language`` (ISO 639-1; Nova's language when left out)."""
    settings = engine_of(request).settings
    _model(model, HEARING_MODELS)
    chosen = _language(language, settings.language)
    if response_format not in TRANSCRIPT_FORMATS:
        raise ApiProblem(
            400,
            f"response_format {quoted(response_format, 20)} is not offered; use one of "
            f"{', '.join(TRANSCRIPT_FORMATS)}.",
            code="invalid_request",
        )
    limit = settings.speech.max_audio_bytes
    data = await file.read(limit + 1)
    if len(data) > limit:
        raise ApiProblem(
            413,
            f"The audio file is larger than {limit} bytes (speech.max_audio_bytes).",
            code="request_too_large",
        )
    voice = voice_of(request)
    try:
        heard = await voice.transcribe(data, chosen)
    except (SpeechError, Busy) as exc:
        raise _problem(exc) from None
    try:  # the words are the user's message: the same limits as typed text
        validate_message(heard.text, settings)
    except UsageError as exc:
        problem = f"The transcript cannot be a message: {exc}"
        raise ApiProblem(400, problem, code="invalid_message") from None
    voice.remember(user, heard)
    log.info(
        "heard %.1f s of audio with %s (confidence %.2f)",
        heard.duration_s,
        heard.engine,
        heard.confidence,
    )
    return _transcript(heard, response_format)


class SpeechRequest(BaseModel):
    """OpenAI's speech request; ``instructions`` and ``stream_format`` are accepted and
    ignored (Nova's engines take no instructions and answer whole files)."""

    model_config = ConfigDict(extra="ignore")
    model: str = ""
    input: str
    voice: str = "nova"
    response_format: str = "mp3"
    speed: float = Field(1.0, ge=0.25, le=4.0)


@router.post(
    "/speech",
    response_model=None,
    responses={
        200: {"content": {f.media_type: {} for f in FORMATS.values()}},
        **openai_errors(
            (400, "Empty or oversized input (speech.max_speech_chars), an unknown voice "
             "(invalid_voice) or response_format, a speed outside 0.25–4."),
            (404, "An unknown model (model_not_found)."),
            (500, "Speech failed (speech_failed); the server log names the error."),
            (501, "The engine for the language is not installed (speech_unavailable)."),
            (503, "Too many speech requests wait (speech_busy); Retry-After says how many "
             "seconds to wait."),
        ),
    },
)  # fmt: skip
async def speech(
    body: SpeechRequest, request: Request, user: Annotated[str, Depends(require_user)]
) -> Response:
    """``input`` spoken by Nova's voice for the language, as a file of ``response_format``."""
    settings = engine_of(request).settings
    _model(body.model, SPEAKING_MODELS)
    language = NOVA_VOICES.get(body.voice)
    if language is None and body.voice not in OPENAI_VOICES:
        raise ApiProblem(
            400,
            f"The voice {quoted(body.voice, 40)} does not exist; use one of "
            f"{', '.join(NOVA_VOICES)} or an OpenAI voice name (Nova's voice for her language).",
            code="invalid_voice",
        )
    fmt = FORMATS.get(body.response_format)
    if fmt is None:
        raise ApiProblem(
            400,
            f"response_format {quoted(body.response_format, 20)} is not offered; use one of "
            f"{', '.join(FORMATS)}.",
            code="invalid_request",
        )
    text = _speakable(body.input, settings.speech.max_speech_chars)
    chosen = language or settings.language
    try:
        audio = await voice_of(request).speak(text, chosen, body.speed, fmt)
    except UsageError as exc:
        raise ApiProblem(400, str(exc), code="invalid_request") from None
    except (SpeechError, Busy) as exc:
        raise _problem(exc) from None
    return Response(audio, media_type=fmt.media_type)


def _speakable(text: str, limit: int) -> str:
    if "\x00" in text or any("\ud800" <= ch <= "\udfff" for ch in text):
        raise ApiProblem(400, "input holds a NUL byte or broken UTF-8.", code="invalid_request")
    stripped = text.strip()
    if not any(ch.isalnum() for ch in stripped):
        raise ApiProblem(400, "input has no words: give the text to speak.", code="invalid_request")
    if len(stripped) > limit:
        raise ApiProblem(
            400,
            f"input has {len(stripped)} characters; the limit is {limit} "
            "(speech.max_speech_chars).",
            code="invalid_request",
        )
    return stripped


@router.get("/models")
async def audio_models(user: Annotated[str, Depends(require_user)]) -> AudioModels:
    """The model names the audio routes take (each is Nova's engine for the language)."""
    return AudioModels(
        models=[AudioModel(id=m) for m in (*SPEAKING_MODELS, *HEARING_MODELS) if m != "nova"]
    )


@router.get("/voices")
async def audio_voices(request: Request, user: Annotated[str, Depends(require_user)]) -> Voices:
    """Nova's voices: one per language, with the engine that speaks it."""
    return Voices(
        voices=[
            Voice(id=f"nova-{lang}", name=f"Nova ({lang}, {engine})")
            for lang, engine in voice_of(request).voices().items()
        ]
    )
