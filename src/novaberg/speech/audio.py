"""Audio in and out through PyAV (FFmpeg's libraries), never by hand: any container and codec
FFmpeg reads (WAV, MP3, Ogg/Opus, WebM from a browser's MediaRecorder, M4A, FLAC, …) is
decoded to 16 kHz mono samples within a bound on its length; speech is encoded to MP3, Opus
(in Ogg), FLAC or WAV.

Every failure of the decoder becomes :class:`~novaberg.errors.BadAudio` with a reason the
client can act on; its own text (which may quote the file) is never passed on.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from novaberg.errors import BadAudio
from novaberg.speech.base import SAMPLE_RATE, Spoken

if TYPE_CHECKING:
    from novaberg.speech.base import Samples


@dataclass(frozen=True)
class Format:
    container: str
    codec: str
    media_type: str
    rate: int | None = None
    """The rate the codec needs (Opus: 48 kHz); ``None``: the speech's own."""


FORMATS: dict[str, Format] = {
    "mp3": Format("mp3", "libmp3lame", "audio/mpeg"),
    "opus": Format("ogg", "libopus", "audio/ogg", rate=48_000),
    "flac": Format("flac", "flac", "audio/flac"),
    "wav": Format("wav", "pcm_s16le", "audio/wav"),
}
"""What ``/v1/audio/speech`` answers in, by its ``response_format``."""


def too_long(max_s: float) -> BadAudio:
    return BadAudio(
        f"The audio is longer than {max_s:g} seconds (speech.max_audio_s); send a shorter "
        "recording.",
        code="audio_too_long",
    )


def unreadable(why: str) -> BadAudio:
    return BadAudio(
        f"The file cannot be read as audio: {why}. Send WAV, MP3, Ogg/Opus, WebM, M4A or FLAC.",
        code="unreadable_audio",
    )


def decode(data: bytes, max_s: float) -> Samples:
    """``data`` as 16 kHz mono float32 samples; :class:`BadAudio` if it is no audio FFmpeg
    can read or lasts longer than ``max_s`` (refused from the container's duration when it
    declares one, else as soon as decoding passes the bound)."""
    import av
    import numpy as np

    limit = int(max_s * SAMPLE_RATE)
    chunks: list[Any] = []
    total = 0
    try:
        with av.open(io.BytesIO(data), mode="r") as container:
            if not container.streams.audio:
                raise unreadable("it has no audio stream")
            stream = container.streams.audio[0]
            if container.duration is not None and container.duration / av.time_base > max_s:
                raise too_long(max_s)
            resampler = av.AudioResampler(format="flt", layout="mono", rate=SAMPLE_RATE)
            for frame in container.decode(stream):
                for out in resampler.resample(frame):
                    chunk = out.to_ndarray().reshape(-1)
                    total += len(chunk)
                    if total > limit:
                        raise too_long(max_s)
                    chunks.append(chunk)
            for out in resampler.resample(None):
                chunks.append(out.to_ndarray().reshape(-1))
    except BadAudio:
        raise
    except (av.FFmpegError, ValueError, OSError, EOFError) as exc:
        raise unreadable(f"the decoder failed ({type(exc).__name__})") from None
    if not chunks:
        raise unreadable("no sound could be decoded from it")
    samples: Samples = np.concatenate(chunks).astype(np.float32, copy=False)
    return samples[:limit]


def encode(spoken: Spoken, fmt: Format) -> bytes:
    """``spoken`` in the container and codec of ``fmt`` (resampled where the codec needs)."""
    import av
    import numpy as np

    pcm = np.frombuffer(spoken.pcm, dtype=np.int16).reshape(1, -1)
    out = io.BytesIO()
    with av.open(out, mode="w", format=fmt.container) as container:
        stream = cast(
            "av.AudioStream", container.add_stream(fmt.codec, rate=fmt.rate or spoken.sample_rate)
        )
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray(pcm, format="s16", layout="mono")
        frame.sample_rate = spoken.sample_rate
        for packet in stream.encode(frame):
            container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)
    return out.getvalue()


def read_pcm(data: bytes) -> tuple[bytes, int]:
    """A whole sound file (an engine's own output) as 16-bit mono PCM at its own rate."""
    import av

    pcm = bytearray()
    with av.open(io.BytesIO(data), mode="r") as container:
        stream = container.streams.audio[0]
        rate = stream.rate
        resampler = av.AudioResampler(format="s16", layout="mono", rate=rate)
        for frame in container.decode(stream):
            for out in resampler.resample(frame):
                pcm += out.to_ndarray().tobytes()
        for out in resampler.resample(None):
            pcm += out.to_ndarray().tobytes()
    return bytes(pcm), rate
