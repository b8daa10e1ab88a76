"""The SQLite database: connection, migrations, and the queries the engine needs.

Migrations are the ``mNNN_name.sql`` files beside this module, applied in name order, each
once, recorded in ``_migrations``. They are append-only: a released migration never changes;
a change of schema is a new file.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any

from novaberg.errors import StorageError
from novaberg.telemetry import CallRecord


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def migration_names() -> list[str]:
    folder = resources.files("novaberg.storage").joinpath("migrations")
    return sorted(p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))


def _migration_sql(name: str) -> str:
    folder = resources.files("novaberg.storage").joinpath("migrations")
    return folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")


@dataclass(frozen=True)
class Message:
    role: str
    content: str


@dataclass(frozen=True)
class Memory:
    id: int
    text: str
    score: float
    source_turn_id: int
    created_at: str


class Database:
    """One SQLite file in WAL mode; used from one thread (the event loop's)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self.conn = sqlite3.connect(path, timeout=5.0, isolation_level=None)
            self.conn.row_factory = sqlite3.Row
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("PRAGMA foreign_keys=ON")
            self.migrate()
        except (sqlite3.Error, OSError) as exc:
            raise StorageError(
                f"Cannot open the database {path}: {exc}. Check NOVABERG_HOME and its permissions."
            ) from exc

    def close(self) -> None:
        self.conn.close()

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """All-or-nothing: either every write inside lands, or none does."""
        try:
            self.conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise StorageError(f"The database {self.path} is not writable: {exc}") from exc
        try:
            yield self.conn
        except BaseException:
            self.conn.execute("ROLLBACK")
            raise
        else:
            try:
                self.conn.execute("COMMIT")
            except sqlite3.Error as exc:
                raise StorageError(f"Writing to {self.path} failed: {exc}") from exc

    def migrate(self) -> list[str]:
        """Apply the migrations not applied yet; return their names."""
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done = {r["name"] for r in self.conn.execute("SELECT name FROM _migrations")}
        applied = []
        for name in migration_names():
            if name in done:
                continue
            script = _migration_sql(name)
            self.conn.executescript(
                f"BEGIN;\n{script}\nINSERT INTO _migrations VALUES ('{name}', '{now()}');\nCOMMIT;"
            )
            applied.append(name)
        return applied

    def applied_migrations(self) -> list[str]:
        return [r["name"] for r in self.conn.execute("SELECT name FROM _migrations ORDER BY name")]

    # -- conversations and turns -------------------------------------------------------
    def new_conversation(self, user_id: str) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO conversations (user_id, created_at) VALUES (?, ?)", (user_id, now())
            )
            return int(cur.lastrowid or 0)

    def conversation_user(self, conversation_id: int) -> str | None:
        row = self.conn.execute(
            "SELECT user_id FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return None if row is None else str(row["user_id"])

    def latest_conversation(self, user_id: str) -> int | None:
        row = self.conn.execute(
            "SELECT id FROM conversations WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user_id,)
        ).fetchone()
        return None if row is None else int(row["id"])

    def start_turn(self, conversation_id: int, user_text: str, origin: str = "user") -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO turns (conversation_id, origin, user_text, status, started_at) "
                "VALUES (?, ?, ?, 'running', ?)",
                (conversation_id, origin, user_text, now()),
            )
            return int(cur.lastrowid or 0)

    def finish_turn(
        self,
        turn_id: int,
        *,
        conversation_id: int,
        user_text: str,
        reply: str,
        trace: dict[str, Any],
        calls: list[CallRecord],
        memory: tuple[str, str, float] | None,
        user_message: bool = True,
    ) -> int | None:
        """Store a completed turn in one transaction; return the new memory id, if any.

        ``memory`` is ``(user_id, text, score)``. ``user_message=False`` for a turn Nova
        started herself (a self-triggered follow-up): only her message is stored.
        """
        stamp = now()
        rows = [(conversation_id, turn_id, "user", user_text, stamp)] if user_message else []
        rows.append((conversation_id, turn_id, "assistant", reply, stamp))
        with self.transaction() as c:
            c.executemany(
                "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                rows,
            )
            memory_id = None
            if memory is not None:
                user_id, text, score = memory
                cur = c.execute(
                    "INSERT INTO memories (user_id, kind, text, score, source_turn_id, created_at) "
                    "VALUES (?, 'short_term', ?, ?, ?, ?) "
                    "ON CONFLICT (source_turn_id, kind) DO NOTHING",
                    (user_id, text, score, turn_id, stamp),
                )
                memory_id = int(cur.lastrowid or 0) if cur.rowcount else None
            self._insert_calls(c, turn_id, calls)
            c.execute(
                "UPDATE turns SET status = 'done', trace_json = ?, finished_at = ? WHERE id = ?",
                (json.dumps(trace, ensure_ascii=False), stamp, turn_id),
            )
        return memory_id

    def end_turn_unfinished(
        self, turn_id: int, status: str, error: str, calls: list[CallRecord]
    ) -> None:
        """Mark a turn failed or aborted; keep its call records, write no messages."""
        with self.transaction() as c:
            self._insert_calls(c, turn_id, calls)
            c.execute(
                "UPDATE turns SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, error, now(), turn_id),
            )

    @staticmethod
    def _insert_calls(c: sqlite3.Connection, turn_id: int, calls: list[CallRecord]) -> None:
        stamp = now()
        c.executemany(
            "INSERT INTO llm_calls (turn_id, seq, caller, backend, model, think, content_len, "
            "thinking_len, eval_count, prompt_eval_count, tool_calls, outcome, duration_ms, "
            "queue_wait_ms, attempt, error, normalizer, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (
                    turn_id,
                    seq,
                    r.caller,
                    r.backend,
                    r.model,
                    int(r.think),
                    r.content_len,
                    r.thinking_len,
                    r.eval_count,
                    r.prompt_eval_count,
                    r.tool_calls,
                    r.outcome,
                    r.ms,
                    r.queue_wait_ms,
                    r.attempt,
                    r.error,
                    r.normalizer,
                    stamp,
                )
                for seq, r in enumerate(calls, start=1)
            ],
        )

    def history(self, conversation_id: int, turns: int) -> list[Message]:
        """The last ``turns`` completed exchanges of a conversation, oldest first."""
        rows = self.conn.execute(
            "SELECT m.role, m.content FROM messages m JOIN turns t ON t.id = m.turn_id "
            "WHERE m.conversation_id = ? AND t.status = 'done' "
            "ORDER BY m.id DESC LIMIT ?",
            (conversation_id, turns * 2),
        ).fetchall()
        return [Message(r["role"], r["content"]) for r in reversed(rows)]

    def turn(self, turn_id: int) -> dict[str, Any] | None:
        row = self.conn.execute("SELECT * FROM turns WHERE id = ?", (turn_id,)).fetchone()
        return None if row is None else dict(row)

    def calls_of(self, turn_id: int) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT * FROM llm_calls WHERE turn_id = ? ORDER BY seq", (turn_id,)
        )
        return [dict(r) for r in rows]

    # -- memory (first version: salient short-term items) ------------------------------
    def recent_memories(self, user_id: str, limit: int) -> list[Memory]:
        rows = self.conn.execute(
            "SELECT id, text, score, source_turn_id, created_at FROM memories "
            "WHERE user_id = ? ORDER BY id DESC LIMIT ?",
            (user_id, limit),
        )
        return [
            Memory(r["id"], r["text"], r["score"], r["source_turn_id"], r["created_at"])
            for r in rows
        ]

    def memory(self, user_id: str, memory_id: int) -> Memory | None:
        row = self.conn.execute(
            "SELECT id, text, score, source_turn_id, created_at FROM memories "
            "WHERE user_id = ? AND id = ?",
            (user_id, memory_id),
        ).fetchone()
        if row is None:
            return None
        return Memory(
            row["id"], row["text"], row["score"], row["source_turn_id"], row["created_at"]
        )

    def forget_memory(self, user_id: str, memory_id: int) -> bool:
        """Delete one memory of this user; ``False`` if there was none with that id."""
        with self.transaction() as c:
            cur = c.execute(
                "DELETE FROM memories WHERE user_id = ? AND id = ?", (user_id, memory_id)
            )
        return cur.rowcount > 0

    def search_memories(self, user_id: str, query: str, limit: int) -> list[Memory]:
        """Memories of this user that contain any word of ``query`` (first version)."""
        words = [w for w in query.lower().split() if len(w) > 2][:8] or [query.lower()]
        clause = " OR ".join("lower(text) LIKE ?" for _ in words)
        rows = self.conn.execute(
            f"SELECT id, text, score, source_turn_id, created_at FROM memories "
            f"WHERE user_id = ? AND ({clause}) ORDER BY id DESC LIMIT ?",
            (user_id, *(f"%{w}%" for w in words), limit),
        )
        return [
            Memory(r["id"], r["text"], r["score"], r["source_turn_id"], r["created_at"])
            for r in rows
        ]

    # -- user profile and timeline (first version: read by the enricher) ---------------
    def set_profile(self, user_id: str, part: str, text: str) -> int:
        """Store a new version of the profile's ``core`` or ``adaptive`` part; return it."""
        with self.transaction() as c:
            row = c.execute(
                "SELECT COALESCE(MAX(version), 0) FROM profiles WHERE user_id = ? AND part = ?",
                (user_id, part),
            ).fetchone()
            version = int(row[0]) + 1
            c.execute(
                "INSERT INTO profiles (user_id, part, version, text, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (user_id, part, version, text, now()),
            )
        return version

    def profile(self, user_id: str) -> dict[str, str]:
        """The latest ``core`` and ``adaptive`` texts (parts never written are absent)."""
        rows = self.conn.execute(
            "SELECT part, text FROM profiles p WHERE user_id = ? AND version = "
            "(SELECT MAX(version) FROM profiles q WHERE q.user_id = p.user_id AND q.part = p.part)",
            (user_id,),
        )
        return {r["part"]: r["text"] for r in rows}

    def add_timeline(
        self, user_id: str, happens_on: str, text: str, source_turn_id: int | None = None
    ) -> int:
        with self.transaction() as c:
            cur = c.execute(
                "INSERT INTO timeline (user_id, happens_on, text, source_turn_id, created_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (user_id, happens_on, text, source_turn_id, now()),
            )
            return int(cur.lastrowid or 0)

    def timeline_between(self, user_id: str, start: str, end: str) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT id, happens_on, text FROM timeline WHERE user_id = ? "
            "AND happens_on BETWEEN ? AND ? ORDER BY happens_on, id",
            (user_id, start, end),
        )
        return [dict(r) for r in rows]

    # -- events ------------------------------------------------------------------------
    def events_of_turn(self, turn_id: int) -> list[dict[str, Any]]:
        rows = self.conn.execute(
            "SELECT id, type, status FROM events WHERE turn_id = ? ORDER BY id", (turn_id,)
        )
        return [dict(r) for r in rows]

    def integrity_ok(self) -> bool:
        return bool(self.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok")
