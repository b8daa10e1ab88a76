"""Hostile input to the commands (issue 19's low findings): user names that would forge a line
of ``novaberg users list``, ``--user`` values with control characters, an export file nested
past what the parser follows — each a usage error with a clear message, never a traceback.
Real ``novaberg`` processes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_cli import run

HIDDEN = {
    "a newline": "ada\nbob (frontend): active, key issued 2020-01-01",
    "a carriage return": "ada\rbob",
    "a tab": "ada\tbob",
    "an escape sequence": "ada\x1b[2Jbob",
    "a right-to-left override": "ada\u202ebob",
    "a zero-width space": "ada\u200bbob",
    "a line separator": "ada\u2028bob",
    "a paragraph separator": "ada\u2029bob",
    "a variation selector": "ada\ufe0fbob",
    "a Hangul filler": "ada\u3164bob",
}


def test_users_add_refuses_names_with_control_or_invisible_characters() -> None:
    for what, name in HIDDEN.items():
        refused = run("users", "add", name)
        assert refused.returncode == 2, (what, refused.stdout, refused.stderr)
        said = " ".join(refused.stderr.split())  # as the terminal's width wraps it
        assert said.startswith("usage error: "), (what, said)
        assert "invisible or control character" in said, (what, said)
        assert "Traceback" not in refused.stderr
    assert run("users", "add", "Ada Lovelace").returncode == 0  # a space is a character too
    listed = run("users", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == [
        line for line in listed.stdout.splitlines() if line.startswith("Ada Lovelace: active")
    ]
    assert [row["user"] for row in json.loads(run("users", "list", "--json").stdout)] == [
        "Ada Lovelace"
    ]


def test_the_user_option_refuses_control_characters() -> None:
    for what in ("a newline", "an escape sequence", "a zero-width space"):
        refused = run("memory", "list", "--user", HIDDEN[what])
        assert refused.returncode == 2, (what, refused.stdout, refused.stderr)
        said = " ".join(refused.stderr.split())
        assert "--user" in said and "invisible or control character" in said, (what, said)
    assert run("memory", "list", "--user", "owui/0b5c-11").returncode == 0  # an end user


def test_memory_import_of_a_file_that_cannot_be_parsed_is_a_usage_error(tmp_path: Path) -> None:
    files = {
        "deep": b"[" * 100_000 + b"]" * 100_000,
        "nested": b'{"format": "novaberg-memory-export", "x": ' + b"[" * 600 + b"]" * 600 + b"}",
        "long number": b'{"schema_version": ' + b"7" * 5000 + b"}",
    }
    for what, content in files.items():
        file = tmp_path / f"{what}.json"
        file.write_bytes(content)
        refused = run("memory", "import", str(file))
        assert refused.returncode == 2, (what, refused.stderr[-2000:])
        said = " ".join(refused.stderr.split())  # as the terminal's width wraps it
        assert said.startswith("usage error: ") and "nothing was imported" in said, said
        assert "Traceback" not in refused.stderr, what


def test_a_user_setting_with_a_control_character_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("NOVABERG_USER", HIDDEN["a newline"])
    refused = run("memory", "list")
    assert refused.returncode == 2, refused.stdout
    said = " ".join(refused.stderr.split())
    assert "NOVABERG_USER" in said and "control or invisible character" in said, said


def test_users_list_shows_a_stored_name_with_a_newline_on_one_line(isolated_env: Path) -> None:
    from novaberg.storage.api_users import hash_key
    from novaberg.storage.db import Database

    db = Database(isolated_env / "novaberg.db")  # a name stored before such names were refused
    try:
        with db.transaction() as c:
            c.execute(
                "INSERT INTO api_users (name, key_hash, frontend, created_at) VALUES (?, ?, 0, ?)",
                (HIDDEN["a newline"], hash_key("nb-old"), "2020-01-01"),
            )
    finally:
        db.close()
    listed = run("users", "list")
    assert listed.returncode == 0, listed.stderr
    assert len(listed.stdout.splitlines()) == 1
    assert listed.stdout.startswith("'ada\\nbob (frontend): active, key issued 2020-01-01': active")
