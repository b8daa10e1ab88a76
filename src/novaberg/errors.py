"""The one exception tree of Novaberg.

Every error Novaberg raises on purpose derives from :class:`NovabergError`, and every
message says what happened and what to do about it::

    NovabergError
    ├── ConfigError                  an invalid setting (names it and the allowed values)
    ├── UsageError                   bad input from the user (empty or oversized message, …)
    ├── BackendError                 a backend could not give an answer
    │   ├── BackendUnreachable       connection refused / DNS / reset (retryable)
    │   ├── BackendTimeout           connect, first-token or total timeout
    │   ├── BackendHTTPError         an HTTP error status from the server (5xx and 503 retryable)
    │   ├── ModelNotFound            the model is not installed (lists the installed ones)
    │   ├── CapabilityError          think/tools asked of a model that lacks them
    │   ├── StreamCut                the stream ended or broke before its done chunk
    │   ├── FormatRefused            the server refused the request's structured-output shape
    │   ├── ContextOverflow          the prompt did not fit the model's context window
    │   └── NoBackendAvailable       every backend of the chain failed or is cooling down
    ├── ModelOutputError             the model answered, but nothing usable (e.g. empty every time)
    ├── GraphError                   a turn graph was built or run wrongly
    │   └── UndeclaredChannelWrite   a node wrote a state key that is not a declared channel
    ├── TurnRefused                  a turn not admitted (nothing started, nothing stored)
    │   ├── ConversationBusy         the conversation has a turn running (one at a time)
    │   └── QueueFull                too many model calls wait (``server.max_queue``)
    ├── StorageError                 the database could not be opened, migrated or written
    ├── EmbedderError                an in-process embedder is not installed or could not run
    ├── VectorDimensionError         stored vectors of an embedder have another length (reindex)
    └── SpeechError                  speech in or out failed (:mod:`novaberg.speech`)
        ├── SpeechUnavailable        the voice extra, an engine or its model is not installed
        └── BadAudio                 audio that cannot be heard: unreadable, too long, no speech

Transport errors of the underlying clients (``ollama.ResponseError``, ``httpx`` errors,
``json.JSONDecodeError`` on a truncated stream) are translated into this tree at one choke
point per backend and never leak past it.
"""

from __future__ import annotations

from novaberg.redaction import without_userinfo


class NovabergError(Exception):
    """Root of every error Novaberg raises on purpose."""


class ConfigError(NovabergError):
    """A setting has an invalid value; the message names it and the allowed values."""


class UsageError(NovabergError):
    """The user gave input Novaberg cannot take (empty or oversized message, bad option)."""


class BackendError(NovabergError):
    """A backend failed to answer a call.

    ``retryable`` says whether sending the same request again may succeed (connection
    errors, 5xx, 503). ``outcome`` is the call outcome recorded for it. The message never
    holds a URL's userinfo (:func:`~novaberg.redaction.without_userinfo`), and a backend
    writes it without its address (:func:`~novaberg.redaction.redact`).
    """

    retryable: bool = False
    outcome: str = "error"
    host: str = ""
    """Which server of the backend failed, when it has several (``ollama_hosts``), without
    its userinfo."""

    def __init__(self, message: str, *, backend: str = "", model: str = "") -> None:
        super().__init__(without_userinfo(message))
        self.backend = backend
        self.model = model


class BackendUnreachable(BackendError):
    retryable = True


class BackendTimeout(BackendError):
    outcome = "timeout"


class BackendHTTPError(BackendError):
    def __init__(self, message: str, *, status: int, backend: str = "", model: str = "") -> None:
        super().__init__(message, backend=backend, model=model)
        self.status = status
        # 5xx and 503, and an error line mid-stream (-1): the server failed, not the request
        self.retryable = status >= 500 or status == -1


class ModelNotFound(BackendError):
    def __init__(
        self, message: str, *, installed: list[str], backend: str = "", model: str = ""
    ) -> None:
        super().__init__(message, backend=backend, model=model)
        self.installed = installed


class CapabilityError(BackendError):
    pass


class StreamCut(BackendError):
    retryable = True


class FormatRefused(BackendError):
    """The server refused the request's structured-output shape (``response_format``).

    Sending the same request again cannot succeed, so it is not retryable as is. ``refused``
    names the refused JSON mode; ``stepped_down`` says the backend has learned a simpler mode
    for this server and model, so that a request in the new shape may succeed.
    """

    def __init__(
        self,
        message: str,
        *,
        refused: str,
        stepped_down: bool,
        backend: str = "",
        model: str = "",
    ) -> None:
        super().__init__(message, backend=backend, model=model)
        self.refused = refused
        self.stepped_down = stepped_down


class ContextOverflow(BackendError):
    """The prompt (with the room asked for the answer) exceeded the model's context window.

    Never retried unchanged: the same prompt overflows again.
    """


class NoBackendAvailable(BackendError):
    def __init__(self, message: str, *, causes: list[BackendError]) -> None:
        super().__init__(message)
        self.causes = causes


class ModelOutputError(NovabergError):
    """The model answered, but the answer was unusable even after the retry."""


class GraphError(NovabergError):
    """The turn graph was built or run wrongly."""


class UndeclaredChannelWrite(GraphError):
    """A node returned a key that is not a declared channel of the turn state.

    LangGraph drops such a write silently; Novaberg refuses it loudly.
    """


class TurnRefused(NovabergError):
    """A turn was not admitted (:mod:`novaberg.engine.service`): nothing was started or
    stored, and the message says when to try again."""


class ConversationBusy(TurnRefused):
    """The conversation has a turn running in this process; one runs at a time."""

    def __init__(self, conversation: int) -> None:
        super().__init__(
            f"Conversation {conversation} has a turn running; send the next message when it "
            "has finished."
        )
        self.conversation = conversation


class QueueFull(TurnRefused):
    """``limit`` model calls already wait for a slot (``server.max_queue``)."""

    retry_after_s = 5
    """A hint for when to try again: a turn is several calls."""

    def __init__(self, waiting: int, limit: int) -> None:
        super().__init__(
            f"{waiting} model calls are waiting (server.max_queue is {limit}); try again "
            f"in about {self.retry_after_s} seconds."
        )
        self.waiting = waiting
        self.limit = limit


class StorageError(NovabergError):
    """The database could not be opened, migrated or written."""


class EmbedderError(NovabergError):
    """An in-process embedder is not installed, or its model could not be loaded or run; the
    message says which package to install."""


class VectorDimensionError(NovabergError):
    """A vector's length differs from the one recorded for its embedder (the model behind the
    name changed); the message names ``novaberg memory reindex``."""

    def __init__(self, message: str, *, embedder: str, recorded: int, given: int) -> None:
        super().__init__(message)
        self.embedder = embedder
        self.recorded = recorded
        self.given = given


def error_kind(exc: BaseException) -> str:
    """The kind of a failure in a few words that carry no server, model or user text.

    Log lines at WARNING and above, notices and stored reasons use this instead of ``str(exc)``:
    an error's message may quote a server's error body, which may quote the prompt.
    """
    if isinstance(exc, NoBackendAvailable):
        return "no backend could answer"
    if isinstance(exc, ContextOverflow):
        return "the prompt exceeded the context window"
    if isinstance(exc, BackendTimeout):
        return "timeout"
    if isinstance(exc, BackendHTTPError):
        return f"HTTP {exc.status}" if exc.status > 0 else "an error in the stream"
    if isinstance(exc, BackendUnreachable):
        return "server unreachable"
    if isinstance(exc, StreamCut):
        return "the stream was cut"
    return type(exc).__name__


class SpeechError(NovabergError):
    """Speech in or out failed (:mod:`novaberg.speech`)."""


class SpeechUnavailable(SpeechError):
    """The engine a language needs is not installed here; the message says what to install."""


class BadAudio(SpeechError):
    """Audio that cannot be turned into words, with the reason as a ``code``:
    ``unreadable_audio`` (corrupt, not audio, no audio stream), ``audio_too_long``
    (``speech.max_audio_s``) or ``no_speech`` (silence, noise)."""

    def __init__(self, message: str, *, code: str) -> None:
        super().__init__(message)
        self.code = code
