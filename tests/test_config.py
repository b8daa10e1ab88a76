from __future__ import annotations

from pathlib import Path

import pytest

from novaberg.config import load_settings
from novaberg.errors import ConfigError


def write_config(home: Path, text: str) -> Path:
    home.mkdir(parents=True, exist_ok=True)
    path = home / "config.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_apply_when_nothing_is_set(isolated_env: Path) -> None:
    loaded = load_settings()
    assert loaded.settings.backend == "auto"
    assert loaded.settings.fallback == []
    assert loaded.origins["backend"] == "default"
    assert loaded.settings.home == isolated_env


def test_contract_environment_variables_are_read(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "http://example.invalid:1234")
    monkeypatch.setenv("NOVABERG_MODEL", "gemma3:270m")
    monkeypatch.setenv("NOVABERG_BACKEND", "openai")
    monkeypatch.setenv("NOVABERG_OPENAI_URL", "http://127.0.0.1:8080/v1")
    monkeypatch.setenv("NOVABERG_OPENAI_MODEL", "m")
    monkeypatch.setenv("NOVABERG_OPENAI_KEY", "sk-secret")
    monkeypatch.setenv("NOVABERG_FALLBACK", "openai")
    s = load_settings().settings
    assert s.ollama_host == "http://example.invalid:1234"
    assert s.model == "gemma3:270m"
    assert s.backend == "openai"
    assert s.openai_url == "http://127.0.0.1:8080/v1"
    assert s.openai_model == "m"
    assert s.openai_key is not None and s.openai_key.get_secret_value() == "sk-secret"
    assert s.fallback == ["openai"]


def test_environment_wins_over_file_and_origins_say_so(
    isolated_env: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = write_config(
        isolated_env,
        'model = "from-file"\nlanguage = "de"\nfallback = ["openai", "embedded"]\n'
        "[timeouts]\ntotal_s = 42\nconnect_s = 2\n[concurrency]\nollama = 3\n",
    )
    monkeypatch.setenv("NOVABERG_MODEL", "from-env")
    monkeypatch.setenv("NOVABERG_TIMEOUTS__TOTAL_S", "7")
    loaded = load_settings()
    s = loaded.settings
    assert s.model == "from-env"
    assert loaded.origins["model"] == "env NOVABERG_MODEL"
    assert s.language == "de"
    assert loaded.origins["language"] == f"file {path}"
    assert s.fallback == ["openai", "embedded"]
    assert s.timeouts.total_s == 7
    assert loaded.origins["timeouts.total_s"] == "env NOVABERG_TIMEOUTS__TOTAL_S"
    assert s.timeouts.connect_s == 2
    assert loaded.origins["timeouts.connect_s"] == f"file {path}"
    assert s.concurrency.ollama == 3


def test_invalid_backend_names_the_variable_and_the_allowed_values(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVABERG_BACKEND", "cloud")
    with pytest.raises(ConfigError) as info:
        load_settings()
    message = str(info.value)
    assert "NOVABERG_BACKEND='cloud'" in message
    assert "'auto', 'ollama', 'openai' or 'embedded'" in message


def test_invalid_value_in_file_names_the_file_and_key(isolated_env: Path) -> None:
    path = write_config(isolated_env, "[timeouts]\ntotal_s = -1\n")
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert f"key 'timeouts.total_s' in {path}" in str(info.value)


def test_unknown_key_in_file_is_an_error_not_ignored(isolated_env: Path) -> None:
    write_config(isolated_env, 'modle = "typo"\n')
    with pytest.raises(ConfigError, match="modle"):
        load_settings()


def test_broken_toml_is_a_clear_error(isolated_env: Path) -> None:
    write_config(isolated_env, "model = \n")
    with pytest.raises(ConfigError, match="not valid TOML"):
        load_settings()


def test_unknown_fallback_backend_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NOVABERG_FALLBACK", "openai,cloud")
    with pytest.raises(ConfigError, match="NOVABERG_FALLBACK"):
        load_settings()
