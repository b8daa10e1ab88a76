"""Backend URLs in errors, records and logs (issue 19): a URL's userinfo reaches nobody, and what
the API returns names the backend, never its address.

The redaction itself (:mod:`novaberg.redaction`) on its own; then real ``novaberg serve`` and
``novaberg doctor`` processes whose Ollama or OpenAI-compatible backend is configured with a
password and listens nowhere, beside the shipped Ollama-protocol test server (which speaks
``/v1`` too) as the backend that answers.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from novaberg.backends.select import choose_primary
from novaberg.config import load_settings
from novaberg.engine import Engine
from novaberg.redaction import redact, safe_url, without_userinfo
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer, Reply
from novaberg.testing.searxng_server import SearxngTestServer
from novaberg.tools.builtin import builtin_registry
from novaberg.tools.registry import ToolEnv
from tests.conftest import closed_port_url
from tests.server_helpers import Nova, running_nova

PASSWORD = "s3cretpass19"
"""The password in every configured URL below; it must show up nowhere."""


def with_password(url: str) -> str:
    """``http://host:port…`` with the userinfo ``nova:PASSWORD`` added."""
    return url.replace("://", f"://nova:{PASSWORD}@", 1)


def address_of(url: str) -> str:
    """``host:port`` of a plain ``http://host:port…`` URL."""
    return url.split("://", 1)[1].split("/", 1)[0]


def assert_absent(where: str, text: str, *secrets: str) -> None:
    for secret in secrets:
        assert secret not in text, f"{secret!r} is in {where}: {text[:3000]}"


# -- the redaction ----------------------------------------------------------------------
def test_userinfo_goes_from_http_and_https_urls() -> None:
    assert (
        without_userinfo("at http://ada:pw@127.0.0.1:11434/api") == "at http://127.0.0.1:11434/api"
    )
    assert without_userinfo("at https://ada:pw@example.com/v1") == "at https://example.com/v1"
    assert without_userinfo("https://token@example.com") == "https://example.com"


def test_userinfo_goes_from_every_url_of_a_text() -> None:
    text = "first http://a:1@one:80/x, then 'https://b:2@two/y' and http://three:3"
    assert (
        without_userinfo(text) == "first http://one:80/x, then 'https://two/y' and http://three:3"
    )


def test_userinfo_goes_before_an_ipv6_host() -> None:
    assert without_userinfo("http://ada:pw@[::1]:11434/api") == "http://[::1]:11434/api"
    assert without_userinfo("http://ada:pw@[fe80::1%25eth0]:80") == "http://[fe80::1%25eth0]:80"


def test_a_percent_encoded_password_and_one_with_a_raw_at_sign_go_whole() -> None:
    assert without_userinfo("http://ada:p%40ss%3Aw0rd@host:1/") == "http://host:1/"
    assert without_userinfo("http://ada:p@ss@host:1/v1") == "http://host:1/v1"


def test_a_text_without_a_url_is_left_as_it_is() -> None:
    for text in ("", "connection refused", "mail ada@example.com", "a@b:c", "/v1/models?x=a@b"):
        assert without_userinfo(text) == text
    assert without_userinfo("http://host:1/path?who=ada@example.com") == (
        "http://host:1/path?who=ada@example.com"
    )


def test_a_configured_address_loses_its_userinfo_with_or_without_a_scheme() -> None:
    assert safe_url("http://ada:pw@10.0.0.5:11434") == "http://10.0.0.5:11434"
    assert safe_url("ada:pw@10.0.0.5:11434") == "10.0.0.5:11434"  # OLLAMA_HOST may say so
    assert safe_url("http://ada:pw@[::1]:8080/v1?key=a@b") == "http://[::1]:8080/v1?key=a@b"
    assert safe_url("http://10.0.0.5:11434") == "http://10.0.0.5:11434"


def test_what_anyone_reads_names_the_backend_instead_of_its_address() -> None:
    server = "http://ada:pw@10.0.0.5:11434"
    said = (
        "Client error '404' for url 'http://ada:pw@10.0.0.5:11434/api/ps'; "
        "upstream 10.0.0.5:8080 refused; 10.0.0.5. 10.0.0.50 is another"
    )
    assert redact(said, server=server, name="ollama") == (
        "Client error '404' for url 'ollama/api/ps'; upstream ollama refused; ollama. "
        "10.0.0.50 is another"
    )
    assert redact("at http://[::1]:9/v1 and [::1]:9", server="http://[::1]:9", name="openai") == (
        "at openai/v1 and openai"
    )


def test_a_one_word_host_is_replaced_only_where_it_is_an_address() -> None:
    said = "a model on http://a:11434 at a:11434, a"
    assert redact(said, server="http://a:11434", name="ollama") == (
        "a model on ollama at ollama, a"
    )


# -- through real processes ---------------------------------------------------------------
def dead_ollama_then_openai(server: OllamaTestServer, dead: str) -> dict[str, str]:
    return {
        "OLLAMA_HOST": with_password(dead),
        "NOVABERG_BACKEND": "ollama",
        "NOVABERG_FALLBACK": "openai",
        "NOVABERG_OPENAI_URL": f"{server.url}/v1",
        "NOVABERG_OPENAI_MODEL": "qwen3:4b",
    }


def dead_openai_then_ollama(server: OllamaTestServer, dead: str) -> dict[str, str]:
    return {
        "OLLAMA_HOST": server.url,
        "NOVABERG_BACKEND": "openai",
        "NOVABERG_OPENAI_URL": with_password(dead) + "/v1",
        "NOVABERG_OPENAI_MODEL": "qwen3:4b",
        "NOVABERG_FALLBACK": "ollama",
    }


def rows(nova: Nova, sql: str, params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
    db = nova.db()
    try:
        return db.query(sql, params)
    finally:
        db.close()


def get(nova: Nova, path: str) -> httpx.Response:
    response = httpx.get(f"{nova.url}{path}", headers=nova.auth(), timeout=60)
    assert response.status_code == 200, response.text
    return response


@pytest.fixture
def dead() -> str:
    return closed_port_url()


@pytest.fixture
def fallback_nova(
    request: pytest.FixtureRequest, server: OllamaTestServer, dead: str, tmp_path: Path
) -> Iterator[tuple[Nova, str]]:
    """A server whose primary backend is ``dead`` (with a password), the failing backend's
    name, and a fallback on the test server."""
    failing, env = request.param
    with running_nova(server, tmp_path / "home", extra_env=env(server, dead)) as nova:
        yield nova, failing


@pytest.mark.parametrize(
    "fallback_nova",
    [("ollama", dead_ollama_then_openai), ("openai", dead_openai_then_ollama)],
    ids=["ollama", "openai"],
    indirect=True,
)
def test_a_failed_call_names_its_backend_in_the_api_records_and_logs(
    fallback_nova: tuple[Nova, str], dead: str, server: OllamaTestServer
) -> None:
    nova, failing = fallback_nova
    server.script("responder", Reply(content="Hello from the fallback."))
    posted = httpx.post(
        f"{nova.url}/api/turns", headers=nova.auth(), json={"message": "Hello"}, timeout=60
    )
    assert posted.status_code == 200, posted.text
    body = posted.json()
    assert body["reply"] == "Hello from the fallback."
    failed = [c for c in body["calls"] if c["backend"] == failing]
    assert failed and all(c["outcome"] == "error" for c in failed)
    assert all(failing in c["error"].lower() and c["host"] == "" for c in failed), failed
    address = address_of(dead)
    turn = body["turn_id"]
    for where, text in (
        ("POST /api/turns", posted.text),
        ("GET /api/turns/{id}", get(nova, f"/api/turns/{turn}").text),
        ("the Why panel", get(nova, f"/api/turns/{turn}/why").text),
        ("llm_calls", json.dumps(rows(nova, "SELECT * FROM llm_calls"))),
        ("turns", json.dumps(rows(nova, "SELECT * FROM turns"), default=str)),
    ):
        assert_absent(where, text, PASSWORD, address)
    assert "retrying" in nova.logs()  # the INFO lines of the failed calls are there
    assert_absent("the log", nova.logs(), PASSWORD)


def test_a_turn_no_backend_could_answer_keeps_the_address_out_of_what_is_stored(
    server: OllamaTestServer, dead: str, tmp_path: Path
) -> None:
    env = {"OLLAMA_HOST": with_password(dead)}
    with running_nova(server, tmp_path / "home", extra_env=env) as nova:
        posted = httpx.post(
            f"{nova.url}/api/turns", headers=nova.auth(), json={"message": "Hello"}, timeout=60
        )
        assert posted.status_code == 502, posted.text
        (turn,) = rows(nova, "SELECT * FROM turns")
        assert turn["status"] == "failed" and "Ollama" in turn["error"], turn
        calls = rows(nova, "SELECT * FROM llm_calls")
        assert calls and all(c["outcome"] == "error" for c in calls)
        why = get(nova, f"/api/turns/{turn['id']}/why")
        address = address_of(dead)
        for where, text in (
            ("POST /api/turns", posted.text),
            ("the Why panel", why.text),
            ("turns.error", turn["error"]),
            ("llm_calls", json.dumps(calls)),
        ):
            assert_absent(where, text, PASSWORD, address)
        assert_absent("the log", nova.logs(), PASSWORD)


def test_doctor_shows_the_address_without_its_password(
    server: OllamaTestServer, isolated_env: Path
) -> None:
    # the test server answers 404 under this path: httpx's message quotes the whole URL
    configured = with_password(server.url) + "/nowhere"
    env = dict(os.environ) | {
        "NOVABERG_BACKEND": "openai",
        "NOVABERG_OPENAI_URL": configured,
        "NOVABERG_OPENAI_MODEL": "qwen3:4b",
    }
    done = subprocess.run(
        [sys.executable, "-m", "novaberg", "doctor", "--json"],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert done.returncode == 1, done.stderr
    assert_absent("doctor's output", done.stdout + done.stderr, PASSWORD)
    (backend,) = json.loads(done.stdout)["backends"]
    assert not backend["reachable"]
    # the error names the backend; the operator is told the address once, after it
    assert "404" in backend["detail"] and "openai/nowhere/models" in backend["detail"]
    assert backend["detail"].endswith(f"(at {server.url}/nowhere)")
    assert backend["detail"].count(address_of(server.url)) == 1


async def test_the_auto_mode_notice_shows_ollama_host_without_its_password(
    monkeypatch: pytest.MonkeyPatch, dead: str
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", with_password(dead))
    notices: list[str] = []
    primary = await choose_primary(load_settings().settings, notices)
    await primary.aclose()
    assert primary.name == "embedded"
    (notice,) = notices
    assert f"not reachable at {dead} (OLLAMA_HOST)" in notice
    assert_absent("the notice", notice, PASSWORD)


async def test_a_record_of_one_of_several_ollama_servers_names_it_by_its_place_not_address(
    monkeypatch: pytest.MonkeyPatch, server: OllamaTestServer, dead: str
) -> None:
    monkeypatch.setenv("NOVABERG_OLLAMA_HOSTS", f"{with_password(dead)},{server.url}")
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
    engine = await Engine.open(load_settings().settings)
    try:
        result = await engine.run_turn("Hello")
        stored = await engine.db.run(engine.db.query, "SELECT * FROM llm_calls")
    finally:
        await engine.aclose()
    hosts = {c.host for c in result.trace.calls}
    assert hosts == {"ollama_hosts[0]", "ollama_hosts[1]"}  # both tried, named by place
    dead_address = dead.removeprefix("http://")
    assert_absent("the records", json.dumps(result.contract_json()), PASSWORD, dead_address)
    assert_absent("llm_calls", json.dumps(stored), PASSWORD, dead_address)


async def test_a_failed_web_search_names_searxng_by_its_setting_not_its_address(
    isolated_env: Path,
) -> None:
    settings = load_settings().settings
    db = Database(settings.db_path)
    try:
        with SearxngTestServer() as searxng:
            searxng.status = 500
            settings.searxng_url = with_password(searxng.url)
            env = ToolEnv(db=db, user_id="ada", settings=settings)
            result = await builtin_registry().call("web_search", {"query": "x"}, env)
    finally:
        db.close()
    assert not result.ok and "HTTP 500" in result.text and "NOVABERG_SEARXNG_URL" in result.text
    assert_absent("the tool's answer", result.text, PASSWORD, address_of(searxng.url))


def test_novaberg_config_shows_server_urls_without_their_passwords(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("OLLAMA_HOST", "http://ada:s3cretpass@ollama.internal:11434")
    monkeypatch.setenv("NOVABERG_OPENAI_URL", "https://bob:0th3rpass@llm.internal/v1")
    monkeypatch.setenv("NOVABERG_OLLAMA_HOSTS", "http://c:thirdpass@a:1,http://b:2")
    monkeypatch.setenv("NOVABERG_SEARXNG_URL", "http://d:fourthpass@search.internal")
    for args in (["config"], ["config", "--json"]):
        shown = subprocess.run(
            [sys.executable, "-m", "novaberg", *args],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ),
        )
        assert shown.returncode == 0, shown.stderr
        for secret in ("s3cretpass", "0th3rpass", "thirdpass", "fourthpass"):
            assert secret not in shown.stdout + shown.stderr, (args, secret)
    values = json.loads(shown.stdout)
    assert values["ollama_host"]["value"] == "http://ollama.internal:11434"
    assert values["openai_url"]["value"] == "https://llm.internal/v1"
