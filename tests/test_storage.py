"""SQLite storage: named append-only migrations, WAL, all-or-nothing turns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from novaberg.errors import StorageError
from novaberg.storage.db import Database, migration_names


def test_migrations_are_named_applied_in_order_and_only_once(tmp_path: Path) -> None:
    names = migration_names()
    assert names[:3] == ["m001_initial", "m002_profile_timeline", "m003_call_normalizer"]
    db = Database(tmp_path / "n.db")
    assert db.applied_migrations() == names
    assert db.migrate() == []  # nothing left to apply
    db.close()
    again = Database(tmp_path / "n.db")
    assert again.applied_migrations() == names
    assert again.integrity_ok()
    assert again.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    again.close()


def test_a_failed_write_leaves_nothing_behind(tmp_path: Path) -> None:
    db = Database(tmp_path / "n.db")
    conversation = db.new_conversation("ada")
    turn = db.start_turn(conversation, "hi")
    with pytest.raises(sqlite3.IntegrityError), db.transaction() as c:
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
    assert db.conn.execute("SELECT COUNT(*) FROM messages").fetchone()[0] == 0
    db.close()


def test_an_unwritable_home_is_a_clear_storage_error(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    with pytest.raises(StorageError, match="NOVABERG_HOME"):
        Database(blocker / "sub" / "n.db")
