"""Storage on SQLite and PostgreSQL: named append-only migrations, all-or-nothing writes,
clear errors for unreachable, locked or unwritable databases, text never stored broken."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from novaberg.errors import StorageError
from novaberg.storage.db import Database, migration_names
from novaberg.storage.sql import sqlite_module
from novaberg.storage.text import clean_text
from tests.conftest import closed_port_url


def test_both_dialects_have_the_same_migration_history() -> None:
    assert migration_names("sqlite") == migration_names("postgres")
    assert migration_names()[:4] == [
        "m001_initial",
        "m002_profile_timeline",
        "m003_call_normalizer",
        "m004_memory",
    ]


def test_migrations_are_applied_in_order_and_only_once(database_target: Path | str) -> None:
    db = Database(database_target)
    assert db.applied_migrations() == migration_names(db.dialect)
    assert db.migrate() == []  # nothing left to apply
    db.close()
    again = Database(database_target)
    assert again.applied_migrations() == migration_names(again.dialect)
    assert again.integrity_check() == "ok"
    again.close()


def test_sqlite_runs_in_wal_mode_with_full_sync(tmp_path: Path) -> None:
    db = Database(tmp_path / "n.db")
    assert db.scalar("PRAGMA journal_mode") == "wal"
    assert db.scalar("PRAGMA synchronous") == 2  # FULL
    db.close()


def test_a_failed_write_leaves_nothing_behind(db: Database) -> None:
    conversation = db.new_conversation("ada")
    turn = db.start_turn(conversation, "hi")
    with pytest.raises(StorageError), db.transaction() as c:
        c.execute(
            "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
            "VALUES (?, ?, 'user', 'kept?', 'now')",
            (conversation, turn),
        )
        c.execute(
            "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
            "VALUES (?, ?, 'narrator', 'bad role', 'now')",
            (conversation, turn),
        )
    assert db.scalar("SELECT COUNT(*) AS n FROM messages") == 0


def test_an_unwritable_home_is_a_clear_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError, match="NOVABERG_HOME"):
        Database(blocker / "sub" / "n.db")


def test_an_unreachable_postgres_is_a_clear_storage_error() -> None:
    url = closed_port_url().replace("http://", "postgresql://nobody@") + "/novaberg"
    with pytest.raises(StorageError, match="NOVABERG_DATABASE_URL"):
        Database(url, busy_timeout_s=2)


def test_a_locked_sqlite_database_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    path = tmp_path / "n.db"
    Database(path).close()
    holder = sqlite_module().connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        db = Database(path, busy_timeout_s=0.2)
        with pytest.raises(StorageError, match=r"not writable.*Another Novaberg process"):
            db.new_conversation("ada")
    finally:
        holder.execute("ROLLBACK")
        holder.close()


@pytest.mark.parametrize(
    ("raw", "stored", "notice"),
    [
        ("plain words", "plain words", None),
        ("a\x00b", "ab", "NUL bytes"),
        ("bad \udcff byte", "bad \ufffd byte", "invalid UTF-8"),
        ("x" * 2500, "x" * 2000, "truncated to 2000"),
    ],
)
def test_text_is_cleaned_with_a_notice_never_stored_broken(
    raw: str, stored: str, notice: str | None
) -> None:
    cleaned = clean_text(raw)
    assert cleaned.text == stored
    if notice is None:
        assert cleaned.notices == []
    else:
        assert len(cleaned.notices) == 1 and notice in cleaned.notices[0]


def test_doctor_reports_an_unreachable_database_and_what_to_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from tests.test_cli import run

    url = closed_port_url().replace("http://", "postgresql://nobody@") + "/novaberg"
    monkeypatch.setenv("NOVABERG_BACKEND", "embedded")
    monkeypatch.setenv("NOVABERG_DATABASE_URL", url)
    done = run("doctor", "--json")
    report = json.loads(done.stdout)
    assert done.returncode == 1 and report["database"]["ok"] is False
    assert any("NOVABERG_DATABASE_URL" in fix for fix in report["fixes"])
