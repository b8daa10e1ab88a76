"""One stack for the whole session, as a person would run it: the project's scripted
Ollama-protocol test server, a real ``novaberg serve`` over it (tests/server_helpers.py) with a
front-end key and a JWT secret, a recording proxy, the real Open WebUI in front of that, and
Debian's chromium (tests/web_helpers.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser
from tests.server_helpers import Nova, novaberg_env, running_nova
from tests.web_helpers import chromium

from frontends.nova_side import FRONTEND_USER, JWT_SECRET
from frontends.openwebui import OpenWebUI, running_openwebui
from frontends.proxy import RecordingProxy
from novaberg.storage.db import LOOP_GUARD_ENV
from novaberg.testing import OllamaTestServer


@pytest.fixture(scope="session")
def ollama_server() -> Iterator[OllamaTestServer]:
    with OllamaTestServer() as server:
        yield server


@pytest.fixture(scope="session")
def nova(
    ollama_server: OllamaTestServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Nova]:
    home = tmp_path_factory.mktemp("nova") / "home"
    settings = {"NOVABERG_FRONTEND_JWT_SECRET": JWT_SECRET, LOOP_GUARD_ENV: "1"}
    with running_nova(ollama_server, home, ("ada",), extra_env=settings) as started:
        # the front-end's key, as the README makes it: `novaberg users add webui --frontend`
        added = subprocess.run(
            [
                sys.executable,
                "-m",
                "novaberg",
                "users",
                "add",
                FRONTEND_USER,
                "--frontend",
                "--json",
            ],
            env=novaberg_env(ollama_server.url, home),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert added.returncode == 0, added.stderr
        started.keys[FRONTEND_USER] = json.loads(added.stdout)["key"]
        yield started


@pytest.fixture(scope="session")
def proxy(nova: Nova) -> Iterator[RecordingProxy]:
    with RecordingProxy(nova.url) as recording:
        yield recording


@pytest.fixture(scope="session")
def openwebui(
    nova: Nova,
    proxy: RecordingProxy,
    ollama_server: OllamaTestServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OpenWebUI]:
    """Nova as its OpenAI connection, through the proxy; the scripted server's models as its
    Ollama connection (another model, whose chats may use Nova's MCP server as a tool)."""
    data = tmp_path_factory.mktemp("open-webui") / "data"
    key = nova.keys[FRONTEND_USER]
    with running_openwebui(
        data, f"{proxy.url}/v1", key, JWT_SECRET, ollama_url=ollama_server.url
    ) as webui:
        yield webui


@pytest.fixture(scope="session")
def browser() -> Iterator[Browser]:
    with chromium() as (_, started):
        yield started
