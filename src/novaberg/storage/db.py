"""The database: SQLite (default) or PostgreSQL behind one interface.

Migrations are the ``mNNN_name.sql`` files in ``migrations/sqlite`` and
``migrations/postgres`` (the same names, one schema history), applied in name order, each
once, recorded in ``_migrations``. They are append-only: a released migration never changes;
a change of schema is a new file.

Memory queries live in :mod:`novaberg.storage.memories` (forgetting's in
:mod:`novaberg.storage.forgetting`); this module keeps conversations, turns, call records,
events and the connections themselves.

Threads: a :class:`Database` owns a small pool of worker threads (``novaberg-db_N``), each with
its own connection (sqlite3 refuses a connection shared across threads; a psycopg connection
serves one thread at a time). Async code never queries on the event loop: it hands a function
to :meth:`Database.run`, which runs it in a worker and awaits the result. Sync code (a CLI
command) uses the calling thread's own connection, as before. With ``NOVABERG_LOOP_GUARD=1``
(the test suite sets it) a query made on a thread that runs an event loop raises.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
import logging
import os
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from types import FrameType
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
from novaberg.trace_document import TraceDocument

T = TypeVar("T")
log = logging.getLogger("novaberg")


def now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def process_name() -> str:
    """This process as ``host:pid``: the runner of its turns, the claimant of its events."""
    return f"{socket.gethostname()}:{os.getpid()}"


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


DB_WORKERS = 4
"""Worker threads (and so connections) per :class:`Database` for :meth:`Database.run`."""

LOOP_GUARD_ENV = "NOVABERG_LOOP_GUARD"
"""``1``: a database call made on a thread that runs an asyncio event loop raises (the test
suite sets it); only a test's own ``async def`` may still inspect the database directly."""


def _open_connection(target: Path | str, busy_timeout_s: float) -> Connection:
    try:
        if is_database_url(target):
            return PostgresConnection(str(target), connect_timeout_s=busy_timeout_s)
        return SqliteConnection(Path(target), busy_timeout_s=busy_timeout_s)
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


def _where(frame: FrameType) -> str:
    module = frame.f_globals.get("__name__", "?")
    return f"{module}.{frame.f_code.co_qualname}:{frame.f_lineno}"


_ASYNC = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR | inspect.CO_ITERABLE_COROUTINE


def _module(frame: FrameType) -> str:
    return str(frame.f_globals.get("__name__", ""))


def _loop_call_origin() -> tuple[str, bool]:
    """Where a database call on the event loop came from (the first frame outside storage),
    and whether test code made it: walking out from the call, a frame of a ``tests.*``
    module comes before any ``async def``. A test inspecting the database from its own body
    or fixture (Playwright's sync API, say, keeps a loop running on the test's thread) is not
    the product blocking its loop; an ``async def`` of the product, or plain code the loop
    runs (a callback), is refused."""
    frame: FrameType | None = sys._getframe(2)
    while frame is not None and frame.f_code.co_filename.endswith(
        ("storage/db.py", "storage/sql.py", "contextlib.py")
    ):
        frame = frame.f_back
    where = "unknown" if frame is None else _where(frame)
    while frame is not None:
        if _module(frame).startswith("tests."):
            return where, True
        if frame.f_code.co_flags & _ASYNC:
            return where, False
        frame = frame.f_back
    return where, False


def _retrieve(future: asyncio.Future[Any]) -> None:
    """Consume the outcome of a run nobody awaits any more (its caller was cancelled)."""
    if not future.cancelled():
        future.exception()


class Database:
    """A SQLite file (a path) or a PostgreSQL database (a ``postgresql://`` URL).

    Every write goes through :meth:`transaction`, inside one function on one thread. From
    async code, every call goes through ``await db.run(fn, *args)``: ``fn`` runs in one of the
    database's worker threads, on that thread's connection. :attr:`conn` is the calling
    thread's connection (opened on first use); :meth:`close` closes them all.
    """

    def __init__(
        self, target: Path | str, busy_timeout_s: float = 5.0, workers: int = DB_WORKERS
    ) -> None:
        self.target = target
        self.busy_timeout_s = busy_timeout_s
        self.loop_guard = os.environ.get(LOOP_GUARD_ENV) == "1"
        self._local = threading.local()
        self._lock = threading.Lock()
        self._writer = threading.RLock()  # SQLite: one writing thread of this process at a time
        self._connections: list[Connection] = []
        self._closed = False
        self._executor = ThreadPoolExecutor(
            max_workers=max(1, workers), thread_name_prefix="novaberg-db"
        )
        self.dialect: Dialect = "postgres" if is_database_url(target) else "sqlite"
        self.where = str(target)
        try:
            # Opened and migrated once, in a worker: the caller's thread opens its own
            # connection only if it queries (a CLI command), never an event loop's thread.
            self.where = self._executor.submit(self._open_and_migrate).result()
        except BaseException:
            self.close()
            raise

    def _open_and_migrate(self) -> str:
        where = self._thread_connection().where
        self.migrate()
        return where

    def _thread_connection(self) -> Connection:
        found: Connection | None = getattr(self._local, "conn", None)
        if found is not None:
            return found
        with self._lock:
            if self._closed:
                raise StorageError(f"The database {self.where} is closed.")
        opened = _open_connection(self.target, self.busy_timeout_s)
        with self._lock:
            if self._closed:
                opened.close()
                raise StorageError(f"The database {self.where} is closed.")
            self._connections.append(opened)
        self._local.conn = opened
        return opened

    def _connection(self, call: str) -> Connection:
        if self.loop_guard and asyncio._get_running_loop() is not None:
            where, a_test = _loop_call_origin()
            if not a_test:
                raise StorageError(
                    f"database call on the event loop: {call} from {where} "
                    "(use `await db.run(...)`)"
                )
        return self._thread_connection()

    @property
    def conn(self) -> Connection:
        """The calling thread's connection (opened on first use)."""
        return self._connection("Database.conn")

    async def run(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run ``fn(*args, **kwargs)`` in a worker thread, on that thread's connection.

        A transaction stays inside one ``fn``. Once handed over, ``fn`` runs to its end even
        when the awaiting task is cancelled (a write is never cut in half by a cancel).
        """
        call = functools.partial(fn, *args, **kwargs)
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        try:
            inner = loop.run_in_executor(self._executor, context.run, call)
        except RuntimeError as exc:  # the executor was shut down
            raise StorageError(f"The database {self.where} is closed.") from exc
        inner.add_done_callback(_retrieve)
        return await asyncio.shield(inner)

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        """Start ``fn(*args, **kwargs)`` in a worker thread, on that thread's connection,
        without waiting for it: for work nobody awaits (loading a cache in the background).
        :meth:`close` waits for it. Raises :class:`StorageError` once the database is closed."""
        try:
            return self._executor.submit(fn, *args, **kwargs)
        except RuntimeError as exc:  # the executor was shut down
            raise StorageError(f"The database {self.where} is closed.") from exc

    def close(self) -> None:
        """Stop the workers (after the functions already handed over) and close every
        connection this database opened, on any thread."""
        self._executor.shutdown(wait=True)
        with self._lock:
            self._closed = True
            connections, self._connections = self._connections, []
        for c in connections:
            try:
                c.close()
            except Exception as exc:  # closing must not hide why we are closing
                log.debug("closing a connection to %s failed: %s", self.where, exc)

    # -- plain access ------------------------------------------------------------------
    def query(
        self, sql: str, params: tuple[Any, ...] | list[Any] = (), *, binary: bool = False
    ) -> list[dict[str, Any]]:
        """Every row. ``binary``: PostgreSQL sends them in its binary format (for many
        bytea values: 0.6 s instead of 1.1–1.5 s for 100,000 vectors)."""
        return self._connection(_named("query", sql)).execute(sql, params, binary=binary).rows

    def one(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> dict[str, Any] | None:
        return self._connection(_named("one", sql)).execute(sql, params).one()

    def scalar(self, sql: str, params: tuple[Any, ...] | list[Any] = ()) -> Any:
        return self._connection(_named("scalar", sql)).execute(sql, params).scalar()

    @contextmanager
    def transaction(self) -> Iterator[Connection]:
        """All-or-nothing: either every write inside lands, or none does.

        On SQLite this process's threads wait for each other on a lock of this process (woken
        when it is free) rather than polling in SQLite's busy handler; another process still
        meets the busy timeout. PostgreSQL's writers run side by side."""
        connection = self._connection("Database.transaction")
        if self.dialect != "sqlite":
            with connection.transaction() as c:
                yield c
            return
        if not self._writer.acquire(timeout=self.busy_timeout_s):
            raise StorageError(
                f"The database {self.where} is not writable: another thread of this process "
                f"held the write lock for {self.busy_timeout_s:g} s."
            )
        try:
            with connection.transaction() as c:
                yield c
        finally:
            self._writer.release()

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
            try:  # the full-text indexes against their content tables
                with self.transaction() as c:
                    for fts in ("memories_fts", "messages_fts"):
                        c.execute(f"INSERT INTO {fts}({fts}, rank) VALUES ('integrity-check', 1)")
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
                    "parent_turn_id, runner) VALUES (?, ?, ?, 'running', ?, ?, ?) RETURNING id",
                    (conversation_id, origin, user_text, now(), parent_turn_id, process_name()),
                )
            )

    def finish_turn(
        self,
        turn_id: int,
        *,
        conversation_id: int,
        user_text: str,
        reply: str,
        trace: TraceDocument,
        calls: list[CallRecord],
        user_message: bool = True,
        assistant_message: bool = True,
        also: Callable[[Connection, int | None], T] | None = None,
    ) -> T | None:
        """Store a completed turn in one transaction.

        ``also(connection, user_message_id)`` runs inside the same transaction (the memory
        write and its background jobs), and its result is returned: a turn and what it
        taught Nova land together or not at all. ``user_message=False`` for a turn Nova
        started herself (a self-triggered follow-up): only her message is stored.
        ``assistant_message=False``: not hers either (a proactive message withheld).
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
            if assistant_message:
                c.execute(
                    "INSERT INTO messages (conversation_id, turn_id, role, content, created_at) "
                    "VALUES (?, ?, 'assistant', ?, ?)",
                    (conversation_id, turn_id, reply, stamp),
                )
            result = also(c, message_id) if also is not None else None
            insert_calls(c, calls, turn_id=turn_id)
            c.execute(
                "UPDATE turns SET status = 'done', trace_json = ?, finished_at = ? WHERE id = ?",
                (trace.text(), stamp, turn_id),
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
        whose words were forgotten is left out, and so is a turn being regenerated right now
        (its message is the running turn's own) with every earlier answer to it (the
        regenerates of the same turn before this one)."""
        rows = self.query(
            "SELECT m.role, m.content FROM messages m JOIN turns t ON t.id = m.turn_id "
            "WHERE m.conversation_id = ? AND t.status = 'done' AND t.forgotten_at IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM turns r WHERE r.origin = 'regenerate' "
            "AND r.status = 'running' AND (r.parent_turn_id = t.id "
            "OR (t.origin = 'regenerate' AND r.parent_turn_id = t.parent_turn_id))) "
            "ORDER BY m.id DESC LIMIT ?",
            (conversation_id, turns * 2),
        )
        return [Message(r["role"], r["content"]) for r in reversed(rows)]

    def turn(self, turn_id: int) -> dict[str, Any] | None:
        return self.one("SELECT * FROM turns WHERE id = ?", (turn_id,))

    def calls_of(self, turn_id: int) -> list[dict[str, Any]]:
        return self.query("SELECT * FROM llm_calls WHERE turn_id = ? ORDER BY seq", (turn_id,))

    def ping(self) -> None:
        """One round trip to the database (readiness)."""
        self.scalar("SELECT 1")


def _named(method: str, sql: str) -> str:
    words = " ".join(sql.split()[:6])
    return f"Database.{method}({words!r})"


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
    task: tuple[str, str] | None = None,
) -> None:
    """One row per request sent (retries included), in the order they were sent; of a turn, a
    background job (``event_id``), a ``novaberg probe`` run (``probe_run_id``) or a
    front-end's task (``task``: its user and kind)."""
    if not calls:
        return
    stamp = now()
    user_id, kind = task if task is not None else (None, None)
    c.executemany(
        "INSERT INTO llm_calls (turn_id, event_id, probe_run_id, seq, caller, backend, model, "
        "think, content_len, thinking_len, eval_count, prompt_eval_count, tool_calls, outcome, "
        "duration_ms, queue_wait_ms, attempt, error, normalizer, created_at, host, user_id, "
        "task, backend_ms, json_mode) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
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
                r.host or None,
                user_id,
                kind,
                r.backend_ms,
                r.json_mode,
            )
            for seq, r in enumerate(calls, start=1)
        ],
    )
