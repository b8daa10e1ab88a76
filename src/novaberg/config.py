"""Settings: the contract's environment variables, a TOML file in ``NOVABERG_HOME``, defaults.

Precedence, highest first: environment variables, ``$NOVABERG_HOME/config.toml``, defaults.
:func:`load_settings` returns the settings together with where each value came from, which
``novaberg config`` prints. An invalid value raises :class:`~novaberg.errors.ConfigError`
naming the variable (or file key) and what it accepts.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, get_args, get_origin

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    StringConstraints,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from novaberg.errors import ConfigError
from novaberg.text import escape_char, invisible_at, is_blank

BackendName = Literal["ollama", "openai", "embedded"]
BackendMode = Literal["auto", "ollama", "openai", "embedded"]
EmbeddedModel = Literal["smollm2-135m", "gemma3-270m"]
CONFIG_FILE_NAME = "config.toml"
ENV_PREFIX = "NOVABERG_"
SECRET_SETTINGS = frozenset({"openai_key", "database_url", "frontend_jwt_secret"})
"""Settings whose value an error message never repeats."""
MIN_SECRET_BYTES = 32
"""The shortest frontend_jwt_secret accepted (HS256 wants a key as long as its hash)."""


def default_home() -> Path:
    return Path.home() / ".novaberg"


class Timeouts(BaseModel):
    """Per-request timeouts in seconds for every backend."""

    model_config = ConfigDict(extra="forbid")
    connect_s: float = Field(
        5.0,
        gt=0,
        description="seconds to open a connection to a backend before giving up (and, at "
        "start, to read the model's capabilities before leaving that to the first call)",
    )
    first_token_s: float = Field(
        120.0,
        gt=0,
        description="seconds from a request to its first streamed chunk (a model that is "
        "still loading counts against it)",
    )
    total_s: float = Field(
        600.0, gt=0, description="seconds for a whole model call, streaming included"
    )
    database_s: float = Field(
        5.0,
        gt=0,
        description="seconds to wait for a database another process has locked, or to "
        "connect to PostgreSQL",
    )


class Retries(BaseModel):
    """Bounded retries with exponential backoff on connection errors, 5xx and 503."""

    model_config = ConfigDict(extra="forbid")
    attempts: int = Field(
        3,
        ge=1,
        le=10,
        description="requests per model call, the first included (connection errors, HTTP "
        "5xx and cut streams are retried)",
    )
    backoff_s: float = Field(
        0.5, ge=0, description="seconds to wait before the second request; doubles after each"
    )


class Concurrency(BaseModel):
    """How many calls each backend serves at once; the rest wait in the model queue."""

    model_config = ConfigDict(extra="forbid")
    ollama: int = Field(
        3,
        ge=1,
        le=64,
        description="calls Ollama serves at once (3 lets the judges vote together; set "
        "OLLAMA_NUM_PARALLEL to match)",
    )
    openai: int = Field(
        4, ge=1, le=64, description="calls the OpenAI-compatible server serves at once"
    )
    embedded: int = Field(
        1, ge=1, le=8, description="calls the embedded model serves at once (each needs memory)"
    )
    background_wait_s: float = Field(
        10.0,
        gt=0,
        le=3600,
        description="seconds a background call (a memory job, a message Nova writes first) "
        "waits behind the calls of turns people type before it is served in turn with them: "
        "a busy server delays it, but never starves it",
    )


BUILTIN_JUDGE_NAMES = ("legal", "psychology", "persona")


class CustomJudge(BaseModel):
    """A judge defined without code: what it looks at, and what is NOT a problem."""

    model_config = ConfigDict(extra="forbid")
    focus: str = Field(min_length=10, description="the judge's perspective, as an instruction")
    not_a_problem: list[str] = Field(default_factory=list, description="negative examples")


class Tribunal(BaseModel):
    """The judges that vote on every answer, and how often the corrector may rewrite it."""

    model_config = ConfigDict(extra="forbid")
    judges: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(BUILTIN_JUDGE_NAMES),
        description="the judges that vote on every answer, by name: legal, psychology, "
        "persona, or one defined under tribunal.custom (empty: no tribunal)",
    )
    max_corrections: int = Field(
        2, ge=0, le=5, description="times the corrector may rewrite an answer, at most"
    )
    on_embedded: bool = Field(
        False,
        description="let the tribunal judge on the embedded model too (slow, and the model is "
        "too small to judge well)",
    )
    custom: dict[str, CustomJudge] = Field(
        default_factory=dict,
        description="judges defined without code, in config.toml as tables "
        "tribunal.custom.NAME with focus (the judge's perspective) and not_a_problem "
        "(negative examples)",
    )

    @field_validator("judges", mode="before")
    @classmethod
    def _split_judges(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @model_validator(mode="after")
    def _known_judges(self) -> Tribunal:
        known = set(BUILTIN_JUDGE_NAMES) | set(self.custom)
        unknown = [j for j in self.judges if j not in known]
        if unknown:
            raise ValueError(
                f"unknown judge(s) {', '.join(unknown)}; known: {', '.join(sorted(known))} "
                "(define more under [tribunal.custom.NAME])"
            )
        if len(set(self.judges)) != len(self.judges):
            raise ValueError("a judge is named twice")
        return self


class Thinker(BaseModel):
    """When the thinker checks the draft, and how long it may reason."""

    model_config = ConfigDict(extra="forbid")
    mode: Literal["auto", "always", "never"] = Field(
        "auto",
        description="when the thinker checks the draft: auto (when the router says "
        "needs_check; never on the embedded model), always, never",
    )
    max_iterations: int = Field(
        5,
        ge=1,
        le=20,
        description="the thinker's reasoning calls per turn at most (its follow-up calls "
        "not counted)",
    )


class Memory(BaseModel):
    """What the enricher retrieves, and the background jobs that keep memory in shape."""

    model_config = ConfigDict(extra="forbid")
    budget_tokens: int = Field(
        400,
        ge=50,
        le=8000,
        description="memory retrieved per turn, in tokens (about 4 characters each)",
    )
    max_items: int = Field(8, ge=1, le=50, description="memory items retrieved per turn, at most")
    messages: int = Field(
        3,
        ge=0,
        le=20,
        description="earlier messages of any conversation (the user's and Nova's) found by "
        "their words and given to a turn beside the memory items, at most; 0: none",
    )
    half_life_days: float = Field(
        14.0, gt=0, description="days in which the recency score of a short-term item halves"
    )
    fact_half_life_days: float = Field(
        180.0,
        gt=0,
        description="days in which the recency score of a long-term fact or event halves",
    )
    embed_model: str | None = Field(
        None,
        description="an embedding model on the primary backend (e.g. nomic-embed-text) for "
        "finding memory by meaning; set, it replaces memory.embedder",
    )
    embedder: Literal["auto", "minilm-l6-v2", "e5-small-q4", "off"] = Field(
        "auto",
        description="the embedder inside Novaberg that finds memory by meaning (no server, no "
        "download) when memory.embed_model is unset: auto picks minilm-l6-v2 for English and "
        "e5-small-q4 (multilingual) for German; off: full text only",
    )
    core_every: int = Field(
        5, ge=1, description="rewrite the core (stable) profile after every N new memory items"
    )
    jobs: bool = Field(
        True,
        description="run the background memory jobs: consolidation, profile, timeline (on "
        "the embedded model only with memory.on_embedded)",
    )
    on_embedded: bool = Field(
        False, description="run the memory jobs on the embedded model too (slow, often wrong)"
    )


class Limits(BaseModel):
    """How much text a turn may carry: the context window every prompt is sized to, the
    longest reply kept from a model, and what each node is sent of history and background."""

    model_config = ConfigDict(extra="forbid")
    context_tokens: int = Field(
        4096,
        ge=512,
        le=1_048_576,
        description="the model's context window; every prompt is sized to it (sent to Ollama "
        "as num_ctx; on the embedded model the smaller of this and embedded_ctx)",
    )
    reply_chars: int = Field(
        4000, ge=200, description="longest reply kept from a model; longer is cut with a notice"
    )
    history_tokens: int = Field(
        1200, ge=0, description="earlier conversation sent to the responder, at most"
    )
    situation_tokens: int = Field(
        800, ge=0, description="background (memory, profile, timeline) sent to a node, at most"
    )


class Telemetry(BaseModel):
    """What OpenTelemetry spans carry (exported only when OTEL_EXPORTER_OTLP_ENDPOINT is set)."""

    model_config = ConfigDict(extra="forbid")
    export_text: bool = Field(
        False,
        description="put message text into the exported spans (the prompts sent to each model, "
        "its answers, the user's message and the reply); off: only counts, names and outcomes",
    )


class Server(BaseModel):
    """``novaberg serve``: what the HTTP server accepts and what it streams."""

    model_config = ConfigDict(extra="forbid")
    max_body_bytes: int = Field(
        1_048_576,
        ge=1024,
        description="the largest request body accepted, in bytes; larger is refused with 413",
    )
    max_import_bytes: int = Field(
        67_108_864,
        ge=1024,
        le=1_073_741_824,
        description="the largest chat export POST /api/conversations/import takes, in bytes "
        "(read whole, and parsed in memory at several times its size); larger is refused "
        "with 413 (novaberg import-chats has no limit)",
    )
    stream_progress: bool = Field(
        True,
        description="stream the pipeline's progress (the node running) as reasoning_content "
        "while a turn runs; off: only the answer streams",
    )
    stream_chunk_chars: int = Field(
        48, ge=1, description="characters per streamed content chunk of the finished answer"
    )
    frontend_system_prompt: Literal["ignore", "situation"] = Field(
        "ignore",
        description="what a /v1 request's own system messages (a front-end's system prompt, "
        "character card, persona) become: ignore (a notice in the turn's trace), or situation "
        "(the responder is given them as the setting, never as Nova's instructions; no judge "
        "sees them)",
    )
    followup_wait_s: float = Field(
        10.0,
        ge=0,
        description="seconds a response waits after the answer for the turn's self-triggered "
        "follow-up; later ones come at the start of the conversation's next /v1 response and "
        "always on /api/events",
    )
    events_poll_s: float = Field(
        2.0,
        gt=0,
        description="seconds between reads of the event log by each /api/events stream (events "
        "of this process wake it at once; this finds those of other processes)",
    )
    readiness_timeout_s: float = Field(
        5.0, gt=0, description="seconds /readyz waits for the database and the primary backend"
    )
    shutdown_grace_s: float = Field(
        30.0,
        ge=0,
        description="on SIGTERM: seconds running turns may take to finish before they are "
        "cancelled and stored as aborted",
    )
    poll_s: float = Field(
        2.0,
        gt=0,
        description="seconds between looks for work no request brings (memory jobs and second "
        "passes other processes left, turns of a dead process), in serve and worker",
    )
    rate_limit_per_minute: int = Field(
        120,
        ge=0,
        description="requests per minute each user may send to /v1, /api and /mcp (a token bucket "
        "holding a minute's worth; more is refused with 429 and Retry-After); 0: no limit",
    )
    max_queue: int = Field(
        64,
        ge=0,
        description="model calls that may wait for a slot; a new turn while this many wait is "
        "refused with 503 and Retry-After",
    )
    cors_origins: list[str] = Field(
        default_factory=list,
        description="origins a browser may call the server from (CORS), e.g. "
        '["http://localhost:3000"] for Open WebUI\'s direct connections; empty: CORS off',
    )
    allowed_hosts: list[str] = Field(
        default_factory=list,
        description="the names the server answers to in the Host header (e.g. "
        '["nova.lan", "192.168.1.5"]; "*.example.org" for subdomains, ["*"] for any); a '
        "request for another is refused with 400; empty: localhost, 127.0.0.1 and [::1], "
        "plus --host when it is one address (any name when it is 0.0.0.0 or ::)",
    )
    max_streams: int = Field(
        8,
        ge=1,
        description="GET /api/events streams one user may hold open at once in this process; "
        "one more is refused with 429",
    )
    max_connections: int = Field(
        512,
        ge=1,
        description="open connections and running requests this process takes at once "
        "(uvicorn's limit_concurrency); past it, new requests are answered 503",
    )
    header_timeout_s: float = Field(
        10.0,
        gt=0,
        description="seconds a client has to send a request's line and headers after it "
        "connects (or after its first byte on a kept-alive connection); then it is closed",
    )
    body_timeout_s: float = Field(
        30.0,
        gt=0,
        description="seconds a client has to send a request's body after its headers; then "
        "the connection is closed",
    )


class Speech(BaseModel):
    """Speech in and out (``POST /v1/audio/transcriptions`` and ``/v1/audio/speech``, the
    page's voice): the bounds on what is heard and said. The engines come with the ``voice``
    extra; ``language`` chooses them (:mod:`novaberg.speech`)."""

    model_config = ConfigDict(extra="forbid")
    max_audio_bytes: int = Field(
        26_214_400,
        ge=1024,
        description="the largest audio file accepted for transcription, in bytes (OpenAI's "
        "25 MB); larger is refused with 413",
    )
    max_audio_s: float = Field(
        300.0,
        gt=0,
        le=7200,
        description="the longest audio transcribed, in seconds; longer is refused with 400 "
        "(audio_too_long) before it is transcribed",
    )
    max_speech_chars: int = Field(
        4096, ge=1, description="the longest text spoken by /v1/audio/speech, in characters"
    )
    threads: int = Field(2, ge=1, le=64, description="CPU threads of each speech engine")
    max_waiting: int = Field(
        4,
        ge=1,
        description="speech requests that may wait while one runs (one runs at a time per "
        "process); one more is refused with 503",
    )


MCP_SERVER_NAME = r"^[A-Za-z][A-Za-z0-9_-]{0,23}$"


class McpServer(BaseModel):
    """One MCP server whose tools Nova's thinker may call: ``command`` (with ``args`` and
    ``env``) starts it over stdio, or ``url`` (with ``headers``) reaches it over Streamable
    HTTP. ``env`` and ``headers`` are secret: never shown, never logged."""

    model_config = ConfigDict(extra="forbid")
    command: str | None = Field(None, min_length=1, description="the program to start")
    args: list[str] = Field(default_factory=list, description="its arguments")
    env: dict[str, SecretStr] = Field(default_factory=dict, description="more environment")
    url: str | None = Field(None, pattern=r"^https?://", description="a Streamable HTTP URL")
    headers: dict[str, SecretStr] = Field(
        default_factory=dict, description="sent with each request"
    )

    @model_validator(mode="after")
    def _one_way_in(self) -> McpServer:
        if (self.command is None) == (self.url is None):
            raise ValueError("set either command (stdio) or url (Streamable HTTP), not both")
        return self


class Mcp(BaseModel):
    """MCP servers whose tools join the thinker's (``novaberg.tools.mcp_servers``); none
    unless configured."""

    model_config = ConfigDict(extra="forbid")
    servers: dict[Annotated[str, StringConstraints(pattern=MCP_SERVER_NAME)], McpServer] = Field(
        default_factory=dict,
        description="MCP servers for the thinker, in config.toml as tables mcp.servers.NAME "
        "with command and args (stdio) or url and headers (Streamable HTTP); their tools are "
        "called NAME__TOOL",
    )
    start_timeout_s: float = Field(
        15.0, gt=0, le=300, description="seconds a server has to start and list its tools"
    )
    call_timeout_s: float = Field(
        30.0, gt=0, le=600, description="seconds one tool call may take; then it is an error"
    )
    max_result_chars: int = Field(
        100_000,
        ge=1000,
        description="a tool result longer than this is cut to it (the model sees less still)",
    )


PROACTIVE_KINDS = ("reminder", "event", "checkin", "followup")
CLOCK = r"^([01][0-9]|2[0-3]):[0-5][0-9]$"
QUIET = r"^(([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9])?$"


class Proactive(BaseModel):
    """Nova writing first (``novaberg.proactive``): reminders the user asked for, sent by
    ``novaberg serve`` and ``novaberg worker`` when due."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(
        True,
        description="send proactive messages (with Ollama or an OpenAI-compatible server; "
        "never on the embedded model)",
    )
    timezone: str = Field(
        "",
        description="the IANA time zone reminders are read and sent in (Europe/Berlin); empty: "
        "the machine's",
    )
    quiet_hours: str = Field(
        "22:00-08:00",
        pattern=QUIET,
        description="HH:MM-HH:MM: a message due inside waits for the end (a reminder the user "
        "asked for is sent at its time all the same); empty: none",
    )
    max_per_day: int = Field(
        3,
        ge=0,
        le=100,
        description="proactive messages a day at most, per user (reminders the user asked "
        "for not counted); more are dropped, with the reason",
    )
    max_late_h: float = Field(
        12.0,
        gt=0,
        le=720,
        description="a message that came due while no process sent it is sent once when one "
        "starts, or dropped (with the reason) when it is more hours late than this",
    )
    checkin_days: int = Field(
        3,
        ge=1,
        le=60,
        description="days after an open concern enters the adaptive profile that Nova asks "
        "how it went (in the morning; only while the concern is still current)",
    )
    morning: str = Field(
        "09:00", pattern=CLOCK, description="HH:MM: when a reminder for a day without a time is due"
    )

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        if value:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    f"unknown time zone {value!r}: an IANA name like Europe/Berlin, or empty"
                ) from None
        return value


class Settings(BaseSettings):
    """Effective settings of one Novaberg process."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        populate_by_name=True,
    )

    ollama_host: str = Field(
        "http://127.0.0.1:11434",
        validation_alias=AliasChoices("OLLAMA_HOST", "ollama_host"),
        description="the Ollama server, read as the official client reads OLLAMA_HOST",
    )
    ollama_hosts: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="several Ollama servers for one model (e.g. http://a:11434,http://b:11434): "
        "each call goes to the least busy healthy one, each with concurrency.ollama slots and "
        "its own cooldown; empty: ollama_host alone",
    )
    model: str = Field("qwen3:4b", min_length=1, description="the model on Ollama")
    home: Path = Field(
        default_factory=default_home,
        description="the data directory: database, config.toml, the embedded model's files",
    )
    backend: BackendMode = Field(
        "auto",
        description="the primary backend: auto (Ollama if reachable, else embedded), ollama, "
        "openai, embedded",
    )
    fallback: Annotated[list[BackendName], NoDecode] = Field(
        default_factory=list,
        description="backends that answer, in order, when the primary fails (e.g. openai or "
        "openai,embedded)",
    )
    openai_url: str | None = Field(
        None,
        description="base URL of an OpenAI-compatible server, e.g. http://127.0.0.1:8080/v1",
    )
    openai_model: str | None = Field(None, description="the model on that server")
    openai_key: SecretStr | None = Field(
        None, description="the API key for that server (never shown)"
    )
    embedded_model: EmbeddedModel = Field(
        "smollm2-135m",
        description="the embedded backend's packaged model: smollm2-135m (SmolLM2 135M "
        "Instruct: answers in role, never echoed its instructions when measured, the faster) or "
        "gemma3-270m (Gemma 3 270M, a base model: it mostly continues the prompt instead of "
        "answering it); the figures are in the README's 'Embedded model' table",
    )
    embedded_model_path: Path | None = Field(
        None, description="another GGUF file for the embedded backend (instead of embedded_model)"
    )
    embedded_threads: int | None = Field(
        None, ge=1, description="CPU threads of the embedded model (unset: llama.cpp chooses)"
    )
    embedded_ctx: int = Field(
        4096, ge=512, description="the embedded model's context window, in tokens"
    )
    language: Literal["en", "de"] = Field(
        "en", description="Nova's language and the language of her prompts"
    )
    user: str = Field(
        "default",
        min_length=1,
        max_length=200,
        description="whose conversations and memory (--user overrides it)",
    )
    max_message_chars: int = Field(
        8000, ge=1, description="the longest message accepted from the user, in characters"
    )
    breaker_cooldown_s: float = Field(
        30.0, ge=0, description="seconds a failed backend rests while the next one answers"
    )
    history_turns: int = Field(
        6, ge=0, le=100, description="earlier turns of the conversation the responder sees"
    )
    searxng_url: str | None = Field(
        None, description="a SearxNG instance for the thinker's web_search (JSON format on)"
    )
    salience_threshold: float = Field(
        0.6,
        ge=0,
        le=1,
        description="a message scored at or above this salience becomes a memory",
    )
    database_url: SecretStr | None = Field(
        None,
        description="postgresql://user:pass@host:5432/db keeps everything in PostgreSQL "
        "(unset: SQLite in the data directory)",
    )
    frontend_jwt_secret: SecretStr | None = Field(
        None,
        description="the secret Open WebUI signs X-OpenWebUI-User-Jwt with "
        "(its FORWARD_USER_INFO_HEADER_JWT_SECRET); set: a --frontend key's end users must come "
        "signed",
    )
    timeouts: Timeouts = Field(default_factory=Timeouts)
    retries: Retries = Field(default_factory=Retries)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    tribunal: Tribunal = Field(default_factory=Tribunal)
    thinker: Thinker = Field(default_factory=Thinker)
    memory: Memory = Field(default_factory=Memory)
    limits: Limits = Field(default_factory=Limits)
    telemetry: Telemetry = Field(default_factory=Telemetry)
    server: Server = Field(default_factory=Server)
    speech: Speech = Field(default_factory=Speech)
    mcp: Mcp = Field(default_factory=Mcp)
    proactive: Proactive = Field(default_factory=Proactive)

    @field_validator("fallback", "ollama_hosts", mode="before")
    @classmethod
    def _split_fallback(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
        return value

    @field_validator("user", mode="after")
    @classmethod
    def _user_not_blank(cls, value: str) -> str:
        if is_blank(value):
            raise ValueError("must name a user: not empty, nor only spaces or invisible characters")
        at = invisible_at(value)
        if at is not None:
            raise ValueError(
                f"must not hold a control or invisible character ({escape_char(value[at])} at "
                f"position {at}): a user name is printed on a line of its own"
            )
        return value

    @field_validator("frontend_jwt_secret", mode="after")
    @classmethod
    def _long_secret(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and len(value.get_secret_value().encode("utf-8")) < MIN_SECRET_BYTES:
            raise ValueError(
                f"must be at least {MIN_SECRET_BYTES} bytes: a short secret can be guessed "
                "offline from one signed token (make one with: python -c "
                "'import secrets; print(secrets.token_urlsafe(32))')"
            )
        return value

    @field_validator("database_url", mode="after")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is not None and not value.get_secret_value().startswith(
            ("postgresql://", "postgres://")
        ):
            raise ValueError("must start with postgresql:// (SQLite needs no URL: leave it unset)")
        return value

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The environment wins over the TOML file, which load_settings passes as init values.
        return (env_settings, init_settings)

    @property
    def db_path(self) -> Path:
        return self.home / "novaberg.db"

    @property
    def database(self) -> Path | str:
        """Where memory lives: the PostgreSQL URL if one is set, else the SQLite file."""
        if self.database_url is None:
            return self.db_path
        return self.database_url.get_secret_value()

    @property
    def config_file(self) -> Path:
        return self.home / CONFIG_FILE_NAME


@dataclass(frozen=True)
class LoadedSettings:
    settings: Settings
    origins: dict[str, str]
    """Dotted setting name -> origin: ``env NAME``, ``file PATH`` or ``default``."""


def env_name(dotted: str) -> str:
    if dotted == "ollama_host":
        return "OLLAMA_HOST"
    return ENV_PREFIX + dotted.replace(".", "__").upper()


def _flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        dotted = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, dotted + "."))
        else:
            out[dotted] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}. Fix or remove the file.") from exc


def _describe(errors: ValidationError, file_values: Mapping[str, Any], path: Path) -> str:
    lines = []
    for err in errors.errors():
        loc = ".".join(str(p) for p in err["loc"])
        where = f"key '{loc}' in {path}" if loc in file_values else env_name(loc)
        given = err.get("input")
        if loc in SECRET_SETTINGS or isinstance(given, SecretStr):
            lines.append(f"{where} is invalid: {err['msg']}")  # never echo a secret
        else:
            lines.append(f"{where}={given!r} is invalid: {err['msg']}")
    return "; ".join(lines) + ". Fix the value (see `novaberg config --help`) and try again."


def load_settings() -> LoadedSettings:
    """Read the effective settings (from ``os.environ`` and the file) and each value's origin."""
    env = os.environ
    home = Path(env.get("NOVABERG_HOME") or default_home()).expanduser()
    path = home / CONFIG_FILE_NAME
    file_data = _read_toml(path)
    file_values = _flatten(file_data)
    try:
        settings = Settings(**file_data)
    except ValidationError as exc:
        raise ConfigError(_describe(exc, file_values, path)) from None
    settings.home = settings.home.expanduser()
    origins: dict[str, str] = {}
    env_names = {k.upper() for k in env}
    for dotted in _flatten(settings.model_dump()):
        if env_name(dotted) in env_names:
            origins[dotted] = f"env {env_name(dotted)}"
        elif dotted in file_values:
            origins[dotted] = f"file {path}"
        else:
            origins[dotted] = "default"
    return LoadedSettings(settings=settings, origins=origins)


@dataclass(frozen=True)
class SettingInfo:
    """One setting as the documentation shows it, taken from the settings model."""

    name: str
    """Dotted name, as in ``config.toml`` (``timeouts.total_s``)."""
    env: str
    description: str
    default: str
    accepts: str
    """The values it takes (``auto, ollama``), its range (``1–10``), or ``""``."""


def settings_reference() -> list[SettingInfo]:
    """Every setting with its description, default and accepted values: the one source of
    ``novaberg config``, ``novaberg config --help`` and the README's settings table."""
    return _reference(Settings, "")


def _reference(model: type[BaseModel], prefix: str) -> list[SettingInfo]:
    out: list[SettingInfo] = []
    for name, field in model.model_fields.items():
        dotted = prefix + name
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.extend(_reference(annotation, dotted + "."))
            continue
        out.append(
            SettingInfo(
                name=dotted,
                env=env_name(dotted),
                description=field.description or "",
                default=_shown_default(field.get_default(call_default_factory=True)),
                accepts=_accepts(annotation, field.metadata),
            )
        )
    return out


def _shown_default(value: Any) -> str:
    if value is None or value == [] or value == {}:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    if isinstance(value, Path):
        home = Path.home()
        return "~/" + str(value.relative_to(home)) if value.is_relative_to(home) else str(value)
    return str(value)


def _accepts(annotation: Any, metadata: list[Any]) -> str:
    choices = _literal_choices(annotation)
    if choices:
        return ", ".join(choices)
    low = high = ""
    for rule in metadata:
        for attr, sign in (("ge", "≥"), ("gt", ">")):
            if getattr(rule, attr, None) is not None:
                low = f"{sign} {getattr(rule, attr)}"
        for attr, sign in (("le", "≤"), ("lt", "<")):
            if getattr(rule, attr, None) is not None:
                high = f"{sign} {getattr(rule, attr)}"
    if low.startswith("≥") and high.startswith("≤"):
        return f"{low[2:]}–{high[2:]}"
    return ", ".join(part for part in (low, high) if part)


def _literal_choices(annotation: Any) -> list[str]:
    if get_origin(annotation) is Literal:
        return [str(a) for a in get_args(annotation)]
    for arg in get_args(annotation):  # list[Literal[...]], Literal[...] | None
        found = _literal_choices(arg)
        if found:
            return found
    return []
