"""The database: SQLite (default) or PostgreSQL behind one interface.

Migrations are the ``mNNN_name.sql`` files in ``migrations/sqlite`` and
``migrations/postgres`` (the same names, one schema history), applied in name order, each
once, recorded in ``_migrations``. They are append-only: a released migration never changes;
a change of schema is a new file.

Memory queries live in :mod:`novaberg.memory.store`; this module keeps conversations, turns,
call records, events and the connection itself.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

from novaberg.errors import StorageError
from novaberg.storage.sql import (
    Connection,
    Dialect,
    PostgresConnection,
    Result,
    SqliteConnection,
)
from novaberg.telemetry import CallRecord

T = TypeVar("T")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def migration_names(dialect: Dialect = "sqlite") -> list[str]:
    folder = resources.files("novaberg.storage").joinpath("migrations", dialect)
    return sorted(p.name.removesuffix(".sql") for p in folder.iterdir() if p.name.endswith(".sql"))


def _migration_sql(dialect: Dialect, name: str) -> str:
    folder = resources.files("novaberg.storage").joinpath("migrations", dialect)
    return folder.joinpath(f"{name}.sql").read_text(encoding="utf-8")


def is_database_url(target: str | Path) -> bool:
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


@dataclass(frozen=True)
class Message:
    role: str
    content: str


class Database:
    """A SQLite file (a path) or a PostgreSQL database (a ``postgresql://`` URL).

    Used from one thread (the event loop's). Every write goes through :meth:`transaction`.
    """

    def __init__(self, target: Path | str, busy_timeout_s: float = 5.0) -> None:
        self.conn: Connection
        try:
            if is_database_url(target):
                self.conn = PostgresConnection(str(target), connect_timeout_s=busy_timeout_s)
            else:
                self.conn = SqliteConnection(Path(target), busy_timeout_s=busy_timeout_s)
        except StorageError:
            raise
        except Exception as exc:  # sqlite3.Error, OSError, psycopg.Error
            hint = (
                "Check NOVABERG_DATABASE_URL and that the server is running."
                if is_database_url(target)
                else "Check NOVABERG_HOME and its permissions."
            )
            where = "the PostgreSQL database" if is_database_url(target) else str(target)
            detail = " ".join(str(exc).split()).rstrip(".")
            raise StorageError(f"Cannot open {where} ({detail}). {hint}") from exc
        self.dialect: Dialect = self.conn.dialect
        self.where = self.conn.where
        try:
            self.migrate()
        except BaseException:
            self.conn.close()
            raise

    def close(self) -> None:
        self.conn.close()

    # -- plain access ------------------------------------------------------------------
    def query(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> list[dict[str, Any]]:
        return self.conn.execute(sql, params).rows

    def one(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> dict[str, Any] | None:
        return self.conn.execute(sql, params).one()

    def scalar(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self.conn.execute(sql, params).scalar()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """All-or-nothing: either every write inside lands, or none does."""
        with self.conn.transaction() as c:
            yield c

    # -- schema ------------------------------------------------------------------------
    def migrate(self) -> list[str]:
        """Apply the migrations not applied yet; return their names."""
        self.conn.execute(
            "CREATE TABLE IF NOT EXISTS _migrations "
            "(name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)"
        )
        done = {r["name"] for r in self.query("SELECT name FROM _migrations")}
        applied = []
        for name in migration_names(self.dialect):
            if name in done:
                continue
            script = _migration_sql(self.dialect, name)
            record = f"INSERT INTO _migrations VALUES ('{name}', '{now()}');"
            if self.dialect == "sqlite":
                self.conn.script(f"BEGIN;\n{script}\n{record}\nCOMMIT;")
            else:
                with self.transaction() as c:
                    c.script(f"{script}\n{record}")
            applied.append(name)
        return applied

    def applied_migrations(self) -> list[str]:
        return [r["name"] for r in self.query("SELECT name FROM _migrations ORDER BY name")]

    def integrity_check(self) -> str:
        """``ok``, or what the database found wrong."""
        if self.dialect == "sqlite":
            found = [str(r["integrity_check"]) for r in self.query("PRAGMA integrity_check")]
            if found != ["ok"]:
                return "; ".join(found)
            try:  # the full-text index against its content table
                with self.transaction() as c:
                    c.execute(
                        "INSERT INTO memories_fts(memories_fts, rank) VALUES ('integrity-check', 1)"
                    )
            except StorageError as exc:
                return f"full-text index: {exc}"
            return "ok"
        # PostgreSQL: verify every B-tree index of this schema with amcheck.
        try:
            with self.transaction() as c:
                c.execute("CREATE EXTENSION IF NOT EXISTS amcheck")
        except StorageError as exc:
            return f"unchecked: the amcheck extension is not available ({exc})"
        indexes = self.query(
            "SELECT c.oid::regclass::text AS name FROM pg_index i "
            "JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam "
            "WHERE a.amname = 'btree' AND c.relnamespace = current_schema()::regnamespace"
        )
        for index in indexes:
            self.query("SELECT bt_index_check(?::regclass, true)", (index["name"],))
        return "ok"

    # -- conversations and turns -------------------------------------------------------
    def new_conversation(self, user_id: str) -> int:
        with self.transaction() as c:
            return _new_id(
                c.execute(
                    "INSERT INTO conversations (user_id, created_at) VALUES (?, ?) RETURNING id",
                    (user_id, now()),
                )
            )

    def conversation_user(self, conversation_id: int) -> str | None:
        user = self.scalar("SELECT user_id FROM conversations WHERE id = ?", (conversation_id,))
        return None if user is None else str(user)

    def latest_conversation(self, user_id: str) -> int | None:
        found = self.scalar(
            "SELECT id FROM conversations WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user_id,)
        )
        return None if found is None else int(found)

    def start_turn(
        self,
        conversation_id: int,
        user_text: str,
        origin: str = "user",
        parent_turn_id: int | None = None,
    ) -> int:
        """A running turn; ``parent_turn_id``: the turn whose self-trigger started it."""
        with self.transaction() as c:
            return _new_id(
                c.execute(
                    "INSERT INTO turns (conversation_id, origin, user_text, status, started_at, "
                    "parent_turn_id) VALUES (?, ?, ?, 'running', ?, ?) RETURNING id",
                    (conversation_id, origin, user_text, now(), parent_turn_id),
                )
            )

    def finish_turn(
        self,
        turn_id: int,
        *,
        conversation_id: int,
        user_text: str,
        reply: str,
        trace: dict[str, Any],
        calls: list[CallRecord],
        user_message: bool = True,
        also: Callable[[Connection, int | None], T] | None = None,
    ) -> T | None:
        """Store a completed turn in one transaction.

        ``also(connection, user_message_id)`` runs inside the same transaction (the memory
        write and its background jobs), and its result is returned: a turn and what it
        taught Nova land together or not at all. ``user_message=False`` for a turn Nova
        started herself (a self-triggered follow-up): only her message is stored.
        """
        stamp = now()
        with self.transaction() as c:
            message_id = None
            if user_message:
                message_id = _new_id(
                    c.execute(
                        "INSERT INTO messages (conversation_id, turn_id, role, content, "
                        "created_at) VALUES (?, ?, 'user', ?, ?) RETURNING id",
                        (conversation_id, turn_id, user_text, stamp),
                    )
                )
            c.execute(
                "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
                "VALUES (?, ?, 'assistant', ?, ?)",
                (conversation_id, turn_id, reply, stamp),
            )
            result = also(c, message_id) if also is not None else None
            insert_calls(c, calls, turn_id=turn_id)
            c.execute(
                "UPDATE turns SET status = 'done', trace_json = ?, finished_at = ? WHERE id = ?",
                (json.dumps(trace, ensure_ascii=False), stamp, turn_id),
            )
        return result

    def end_turn_unfinished(
        self, turn_id: int, status: str, error: str, calls: list[CallRecord]
    ) -> None:
        """Mark a turn failed or aborted; keep its call records, write no messages."""
        with self.transaction() as c:
            insert_calls(c, calls, turn_id=turn_id)
            c.execute(
                "UPDATE turns SET status = ?, error = ?, finished_at = ? WHERE id = ?",
                (status, error, now(), turn_id),
            )

    def history(self, conversation_id: int, turns: int) -> list[Message]:
        """The last ``turns`` completed exchanges of a conversation, oldest first; a turn
        whose words were forgotten is left out."""
        rows = self.query(
            "SELECT m.role, m.content FROM messages m JOIN turns t ON t.id = m.turn_id "
            "WHERE m.conversation_id = ? AND t.status = 'done' AND t.forgotten_at IS NULL "
            "ORDER BY m.id DESC LIMIT ?",
            (conversation_id, turns * 2),
        )
        return [Message(r["role"], r["content"]) for r in reversed(rows)]

    def turn(self, turn_id: int) -> dict[str, Any] | None:
        return self.one("SELECT * FROM turns WHERE id = ?", (turn_id,))

    def calls_of(self, turn_id: int) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM llm_calls WHERE turn_id = ? ORDER BY seq", (turn_id,))

    def events_of_turn(self, turn_id: int) -> list[dict[str, Any]]:
        return self.query(
            "SELECT id, type, status FROM events WHERE turn_id = ? ORDER BY id", (turn_id,)
        )


def _new_id(result: Result) -> int:
    new = result.scalar()
    if new is None:
        raise StorageError("The database did not return the new row's id.")
    return int(new)


def insert_calls(
    c: Connection,
    calls: list[CallRecord],
    *,
    turn_id: int | None,
    event_id: int | None = None,
    probe_run_id: int | None = None,
) -> None:
    """One row per request sent (retries included), in the order they were sent; of a turn, a
    background job (``event_id``) or a ``novaberg probe`` run (``probe_run_id``)."""
    if not calls:
        return
    stamp = now()
    c.executemany(
        "INSERT INTO llm_calls (turn_id, event_id, probe_run_id, seq, caller, backend, model, "
        "think, content_len, thinking_len, eval_count, prompt_eval_count, tool_calls, outcome, "
        "duration_ms, queue_wait_ms, attempt, error, normalizer, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        [
            (
                turn_id,
                event_id,
                probe_run_id,
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
