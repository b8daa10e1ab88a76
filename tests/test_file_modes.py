"""Private data files: the home Novaberg creates is 0700, the database files in it 0600 (also
the ``-wal`` and ``-shm`` files SQLite adds), whatever the umask; ``novaberg doctor`` says
which existing ones other accounts can open, and the ``chmod`` that fixes each."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from novaberg.config import Settings
from novaberg.engine import Engine
from novaberg.storage.db import Database
from novaberg.testing import OllamaTestServer

NOVABERG = [sys.executable, "-m", "novaberg"]
DB_FILES = ("novaberg.db", "novaberg.db-wal", "novaberg.db-shm")


def run(*args: str) -> subprocess.CompletedProcess[str]:
    """The ``novaberg`` command in a new process (which inherits this process's umask), on a
    terminal wide enough that no path is wrapped."""
    env = dict(os.environ, COLUMNS="2000")
    return subprocess.run([*NOVABERG, *args], capture_output=True, text=True, timeout=60, env=env)


def mode(path: Path) -> str:
    """The permission bits of ``path`` as ``ls`` and ``chmod`` write them: ``0700``."""
    return f"{stat.S_IMODE(path.stat().st_mode):04o}"


def modes(home: Path) -> dict[str, str]:
    """The mode of the home (``"."``) and of each database file in it."""
    return {".": mode(home)} | {name: mode(home / name) for name in DB_FILES}


PRIVATE = {".": "0700"} | dict.fromkeys(DB_FILES, "0600")


@pytest.fixture(params=[0o022, 0o000], ids=["umask-022", "umask-000"])
def permissive_umask(request: pytest.FixtureRequest) -> Iterator[int]:
    """This process (and the processes it starts) with a umask that lets others read."""
    previous = os.umask(request.param)
    try:
        yield request.param
    finally:
        os.umask(previous)


def test_opening_a_database_creates_a_private_home_and_private_database_files(
    permissive_umask: int, isolated_env: Path
) -> None:
    db = Database(isolated_env / "novaberg.db")
    try:
        db.new_conversation("ann")
        assert modes(isolated_env) == PRIVATE  # the -wal and -shm exist while it is open
    finally:
        db.close()


def test_a_new_home_in_a_new_folder_is_private_and_the_folder_keeps_the_usual_mode(
    permissive_umask: int, tmp_path: Path
) -> None:
    home = tmp_path / "made" / "home"
    Database(home / "novaberg.db").close()
    assert mode(home) == "0700"
    assert mode(home.parent) == f"{0o777 & ~permissive_umask:04o}"


async def test_an_engine_opened_on_a_fresh_home_keeps_it_private(
    permissive_umask: int, settings: Settings, isolated_env: Path
) -> None:
    engine = await Engine.open(settings)
    try:
        await engine.run_turn("Hallo")
        assert modes(isolated_env) == PRIVATE
    finally:
        await engine.aclose()


def test_a_cli_command_on_a_fresh_home_creates_it_private(
    permissive_umask: int, isolated_env: Path
) -> None:
    done = run("memory", "list")
    assert done.returncode == 0, done.stderr
    assert mode(isolated_env) == "0700"
    assert mode(isolated_env / "novaberg.db") == "0600"


def test_opening_an_existing_home_leaves_its_mode_alone(isolated_env: Path) -> None:
    isolated_env.mkdir(mode=0o750)
    os.chmod(isolated_env, 0o750)
    Database(isolated_env / "novaberg.db").close()
    assert mode(isolated_env) == "0750"
    assert mode(isolated_env / "novaberg.db") == "0600"


def open_like_an_older_novaberg(home: Path) -> sqlite3.Connection:
    """A home 0755 and a database 0644 (what Novaberg made before), held open in WAL mode so
    that its -wal and -shm files exist (0644 too: SQLite gives them the database's mode)."""
    home.mkdir()
    os.chmod(home, 0o755)
    (home / "novaberg.db").touch()
    os.chmod(home / "novaberg.db", 0o644)
    held = sqlite3.connect(home / "novaberg.db")
    held.execute("PRAGMA journal_mode=WAL")
    held.execute("CREATE TABLE IF NOT EXISTS held (x INTEGER)")
    held.execute("INSERT INTO held VALUES (1)")
    held.commit()
    return held


def test_doctor_warns_about_a_home_and_database_files_other_accounts_can_open(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    held = open_like_an_older_novaberg(isolated_env)
    try:
        assert modes(isolated_env) == {".": "0755"} | dict.fromkeys(DB_FILES, "0644")
        done = run("doctor", "--json")
        shown = run("doctor").stdout
    finally:
        held.close()
    assert done.returncode == 0, done.stdout + done.stderr  # a warning, not a failure
    report = json.loads(done.stdout)
    files = report["files"]
    assert files["private"] is False
    checked = {Path(f["path"]).name: f["mode"] for f in files["checked"]}
    assert checked == {isolated_env.name: "0755"} | dict.fromkeys(DB_FILES, "0644")
    fixes = [f for f in report["fixes"] if "chmod" in f]
    assert len(fixes) == 4
    assert any(
        f"{isolated_env} has mode 0755" in f and f"chmod 700 {isolated_env}" in f for f in fixes
    )
    for name in DB_FILES:
        path = isolated_env / name
        assert any(f"{path} has mode 0644" in f and f"chmod 600 {path}" in f for f in fixes)
    assert (
        f"chmod 700 {isolated_env}" in shown
        and f"chmod 600 {isolated_env / 'novaberg.db'}" in shown
    )
    assert mode(isolated_env) == "0755"  # warned about, not changed behind the user's back


def test_doctor_does_not_warn_about_a_private_home(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    db = Database(isolated_env / "novaberg.db")  # held open: its -wal and -shm exist
    try:
        db.new_conversation("ann")
        done = run("doctor", "--json")
        shown = run("doctor").stdout
    finally:
        db.close()
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["files"]["private"] is True
    checked = {Path(f["path"]).name: f["mode"] for f in report["files"]["checked"]}
    assert checked == {isolated_env.name: "0700"} | dict.fromkeys(DB_FILES, "0600")
    assert not [f for f in report["fixes"] if "chmod" in f]
    assert "chmod" not in shown and "Files: private" in shown


def test_doctor_warns_about_a_config_file_other_accounts_can_read(
    ollama_env: OllamaTestServer, isolated_env: Path
) -> None:
    config = isolated_env / "config.toml"  # written by the user; it may hold keys
    isolated_env.mkdir(mode=0o700)
    config.write_text('model = "qwen3:4b"\n', encoding="utf-8")
    os.chmod(config, 0o644)
    done = run("doctor", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["files"]["private"] is False
    [fix] = [f for f in report["fixes"] if "chmod" in f]
    assert f"{config} has mode 0644" in fix and f"chmod 600 {config}" in fix
