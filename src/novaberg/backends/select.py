"""Choosing the backend chain from the settings (``NOVABERG_BACKEND`` and fallbacks)."""

from __future__ import annotations

import logging

from novaberg.backends.base import Backend
from novaberg.backends.chain import BackendChain
from novaberg.backends.embedded import EmbeddedBackend
from novaberg.backends.ollama import OllamaBackend
from novaberg.backends.ollama_pool import OllamaPool
from novaberg.backends.openai_compat import OpenAICompatBackend
from novaberg.config import BackendName, Settings
from novaberg.errors import ConfigError
from novaberg.redaction import safe_url

log = logging.getLogger("novaberg")


def make_backend(name: BackendName, settings: Settings) -> Backend:
    if name == "ollama":
        if len(settings.ollama_hosts) > 1:
            return OllamaPool(
                settings.ollama_hosts,
                settings.model,
                settings.timeouts,
                limit=settings.concurrency.ollama,
                cooldown_s=settings.breaker_cooldown_s,
                num_ctx=settings.limits.context_tokens,
            )
        return OllamaBackend(
            settings.ollama_hosts[0] if settings.ollama_hosts else settings.ollama_host,
            settings.model,
            settings.timeouts,
            num_ctx=settings.limits.context_tokens,
        )
    if name == "openai":
        if not settings.openai_url or not settings.openai_model:
            raise ConfigError(
                "The OpenAI-compatible backend needs NOVABERG_OPENAI_URL (base URL, e.g. "
                "http://127.0.0.1:8080/v1) and NOVABERG_OPENAI_MODEL."
            )
        key = settings.openai_key.get_secret_value() if settings.openai_key else None
        return OpenAICompatBackend(
            settings.openai_url, settings.openai_model, key, settings.timeouts
        )
    return EmbeddedBackend(
        settings.home,
        settings.timeouts,
        model_path=settings.embedded_model_path,
        n_ctx=settings.embedded_ctx,
        n_threads=settings.embedded_threads,
        packaged=settings.embedded_model,
    )


async def choose_primary(settings: Settings, notices: list[str]) -> Backend:
    """The configured primary; in ``auto`` mode Ollama if it answers, else the embedded model.

    Only a refused connection or a timeout counts as "Ollama is not there"; a server that
    answers oddly raises (:meth:`OllamaBackend.reachable`), so that nobody is moved to the
    embedded model silently."""
    if settings.backend != "auto":
        return make_backend(settings.backend, settings)
    ollama = make_backend("ollama", settings)
    assert isinstance(ollama, OllamaBackend)
    try:
        found = await ollama.reachable(timeout_s=min(1.0, settings.timeouts.connect_s))
    except BaseException:
        await ollama.aclose()
        raise
    if found:
        return ollama
    await ollama.aclose()
    notices.append(
        f"Ollama is not reachable at {safe_url(settings.ollama_host)} (OLLAMA_HOST); using the "
        "embedded model (tiny and slow). Start Ollama or set NOVABERG_BACKEND to choose."
    )
    return make_backend("embedded", settings)


async def build_chain(settings: Settings, notices: list[str]) -> BackendChain:
    primary = await choose_primary(settings, notices)
    backends: list[Backend] = [primary]
    for name in settings.fallback:
        if all(b.name != name for b in backends):
            backends.append(make_backend(name, settings))
    return BackendChain(backends, cooldown_s=settings.breaker_cooldown_s)
