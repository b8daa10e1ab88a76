"""``novaberg serve`` as a real uvicorn process for the server tests: started on a free port
over a fresh NOVABERG_HOME with API keys for the given users, stopped with SIGTERM."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
import openai
import pytest

from novaberg.storage.api_users import UserStore
from novaberg.storage.db import LOOP_GUARD_ENV, Database
from novaberg.testing import OllamaTestServer

START_TIMEOUT_S = 60.0


def wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 15.0) -> None:
    """Poll ``condition`` (a real state: a row, a request seen) until it holds."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


@dataclass
class Nova:
    url: str
    keys: dict[str, str]
    home: Path
    out: Path
    err: Path
    proc: subprocess.Popen[bytes]
    database: str | None = None
    """The PostgreSQL URL the server uses; None: the SQLite file in ``home``."""

    def client(self, user: str = "ada") -> openai.OpenAI:
        return openai.OpenAI(base_url=f"{self.url}/v1", api_key=self.keys[user], max_retries=0)

    def auth(self, user: str = "ada") -> dict[str, str]:
        return {"Authorization": f"Bearer {self.keys[user]}"}

    def db(self) -> Database:
        return Database(self.database or self.home / "novaberg.db")

    def logs(self) -> str:
        return self.out.read_text(encoding="utf-8") + self.err.read_text(encoding="utf-8")


def _address(out: Path, proc: subprocess.Popen[bytes], err: Path) -> str:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        for line in out.read_text(encoding="utf-8").splitlines():
            if line.startswith("novaberg serve: http://"):
                return line.split()[2]
        if proc.poll() is not None:
            pytest.fail(f"novaberg serve exited: {err.read_text(encoding='utf-8')[-3000:]}")
        time.sleep(0.05)
    pytest.fail("novaberg serve printed no address")


def _wait_healthy(url: str, proc: subprocess.Popen[bytes], err: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"novaberg serve exited: {err.read_text(encoding='utf-8')[-3000:]}")
        try:
            if httpx.get(f"{url}/healthz", timeout=1.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.05)
    pytest.fail("novaberg serve never answered /healthz")


def novaberg_env(ollama_url: str, home: Path, database: str | None = None) -> dict[str, str]:
    """The environment of a ``novaberg`` process over the Ollama server at ``ollama_url``, in
    a fresh ``home`` (created), on ``database`` (a PostgreSQL URL) or the SQLite file there:
    none of this process's own Novaberg settings."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("NOVABERG_") and k not in ("OLLAMA_HOST", "OLLAMA_API_KEY")
    }
    env |= {
        "NOVABERG_HOME": str(home),
        "OLLAMA_HOST": ollama_url,
        "NOVABERG_BACKEND": "ollama",
        "NOVABERG_RETRIES__BACKOFF_S": "0.01",
    }
    if LOOP_GUARD_ENV in os.environ:  # the suite's loop guard holds in this process too
        env[LOOP_GUARD_ENV] = os.environ[LOOP_GUARD_ENV]
    if database is not None:
        env["NOVABERG_DATABASE_URL"] = database
    home.mkdir(parents=True, exist_ok=True)
    return env


def stopped_while_opening(home: Path, *args: str) -> tuple[int, str, str]:
    """``novaberg ARGS`` over an Ollama server that accepts the connection and never answers
    (model calls may wait 600 s), sent SIGTERM once its engine, opening, asks that server for
    the model's capabilities: its exit status, stdout and stderr."""
    with socket.create_server(("127.0.0.1", 0)) as backend:
        backend.settimeout(START_TIMEOUT_S)
        env = novaberg_env(f"http://127.0.0.1:{backend.getsockname()[1]}", home)
        env |= {"NOVABERG_TIMEOUTS__FIRST_TOKEN_S": "600", "NOVABERG_TIMEOUTS__TOTAL_S": "600"}
        err = home / "stderr"
        with err.open("wb") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "novaberg", *args],
                env=env,
                stdout=subprocess.PIPE,
                stderr=stderr,
            )
        try:
            asked, _ = backend.accept()
            with asked:
                proc.send_signal(signal.SIGTERM)
                out, _ = proc.communicate(timeout=60)
        finally:
            proc.kill()
    return proc.returncode, out.decode(), err.read_text(encoding="utf-8")


@contextmanager
def running_nova(
    ollama_server: OllamaTestServer,
    home: Path,
    users: tuple[str, ...] = ("ada", "bob", "eve"),
    *,
    extra_env: dict[str, str] | None = None,
    database: str | None = None,
) -> Iterator[Nova]:
    """A ``novaberg serve`` process over ``ollama_server`` with a key for each of ``users``.

    ``extra_env``: more settings for the process (``NOVABERG_…``); ``database``: a PostgreSQL URL
    to use instead of the SQLite file in ``home``."""
    env = novaberg_env(ollama_server.url, home, database) | (extra_env or {})
    db = Database(database if database is not None else home / "novaberg.db")
    try:
        store = UserStore(db)
        keys = {name: store.add(name) for name in users}
    finally:
        db.close()
    out, err = home / "serve.out", home / "serve.err"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "novaberg", "serve", "--port", "0", "--verbose"],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
    try:
        url = _address(out, proc, err)
        _wait_healthy(url, proc, err)
        yield Nova(url, keys, home, out, err, proc, database)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
