"""One small connection interface over SQLite (sqlite3) and PostgreSQL (psycopg 3).

Queries are written once, with ``?`` placeholders and ``RETURNING`` for new ids; the
PostgreSQL connection translates the placeholders. What differs between the two (schema
DDL, full-text search, integrity checks) is asked of :attr:`Connection.dialect`.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any, Literal, Protocol

from novaberg.errors import StorageError
from novaberg.storage.private import private_file

Dialect = Literal["sqlite", "postgres"]
Params = Sequence[Any]


@dataclass(frozen=True)
class Result:
    rows: list[dict[str, Any]]
    rowcount: int

    def one(self) -> dict[str, Any] | None:
        return self.rows[0] if self.rows else None

    def scalar(self) -> Any:
        return next(iter(self.rows[0].values())) if self.rows else None


class Connection(Protocol):
    dialect: Dialect
    where: str
    """A human-readable name of the database, for error messages (never a password)."""

    def execute(self, sql: str, params: Params = (), *, binary: bool = False) -> Result:
        """``binary``: ask for the results in the wire's binary format where the driver has
        one (PostgreSQL; bytea then comes without hex decoding); SQLite has only one."""
        ...

    def executemany(self, sql: str, rows: Sequence[Params]) -> int: ...
    def script(self, sql: str) -> None: ...
    def transaction(self, durable: bool = True) -> Any:
        """``durable=False``: the commit is not flushed to the disk itself (it survives the
        process, not a crash of the machine), until the next durable commit flushes it too."""
        ...

    def close(self) -> None: ...


SQLITE_VEC_ENV = "NOVABERG_SQLITE_VEC"
"""``off``: do not load the sqlite-vec extension (memory search then scans every vector)."""


def _sqlite_driver() -> ModuleType:
    """``sqlean`` (the sqlite3 module over a recent SQLite that can load extensions) when
    installed, else the standard ``sqlite3`` (which on many Pythons cannot)."""
    try:
        import sqlean

        driver: ModuleType = sqlean
        return driver
    except ImportError:
        return sqlite3


_DRIVER = _sqlite_driver()


def sqlite_module() -> ModuleType:
    """The sqlite3-compatible module Novaberg opens SQLite with. Anything else in this process
    that opens the same file must use it too: two SQLite libraries in one process do not see
    each other's locks (POSIX locks are per process; each library tracks its own)."""
    return _DRIVER


SQLITE_ERRORS: tuple[type[Exception], ...] = tuple({sqlite3.Error, _DRIVER.Error})
_LOAD_ERRORS: tuple[type[Exception], ...] = (*SQLITE_ERRORS, AttributeError, OSError)


def _load_sqlite_vec(raw: Any) -> tuple[str | None, str | None]:
    """Load sqlite-vec into ``raw``: (its version, None), or (None, why it is not loaded)."""
    if os.environ.get(SQLITE_VEC_ENV, "").lower() in ("off", "0", "false", "no"):
        return None, f"turned off by {SQLITE_VEC_ENV}={os.environ[SQLITE_VEC_ENV]}"
    try:
        import sqlite_vec
    except ImportError:
        return None, "the sqlite-vec package is not installed"
    if not hasattr(raw, "enable_load_extension"):
        return None, (
            "this Python's sqlite3 cannot load extensions and the sqlean.py package is "
            "not installed"
        )
    try:
        raw.enable_load_extension(True)
        try:
            sqlite_vec.load(raw)
        finally:
            raw.enable_load_extension(False)
        return str(raw.execute("SELECT vec_version()").fetchone()[0]), None
    except _LOAD_ERRORS as exc:
        return None, f"sqlite-vec could not be loaded ({' '.join(str(exc).split())})"


def _unhook_vec_triggers(raw: Any) -> None:
    """Without sqlite-vec, a write to memory_vectors would fail on the triggers that feed
    its vec0 tables: drop them, and mark those indexes stale (the next process that loads
    the extension rebuilds them from memory_vectors)."""
    names = [
        r[0]
        for r in raw.execute(
            "SELECT name FROM sqlite_master WHERE type = 'trigger' AND name LIKE 'memory_vec_%'"
        ).fetchall()
    ]
    if not names:
        return
    raw.execute("BEGIN IMMEDIATE")
    try:
        for name in names:
            raw.execute(f'DROP TRIGGER IF EXISTS "{name}"')
        raw.execute("UPDATE vector_spaces SET indexed = 0")
        raw.execute("COMMIT")
    except BaseException:
        raw.execute("ROLLBACK")
        raise


class SqliteConnection:
    """One SQLite file in WAL mode with synchronous FULL.

    Used by the one thread that opened it (the :class:`~novaberg.storage.db.Database` keeps a
    connection per thread); ``check_same_thread=False`` only lets that database close it from
    another thread at the end.

    Opened through ``sqlean`` when installed, with the sqlite-vec extension loaded
    (:attr:`vec_version`); :attr:`vec_error` says why not when it is not.
    """

    dialect: Dialect = "sqlite"

    def __init__(self, path: Path, busy_timeout_s: float = 5.0) -> None:
        self.where = str(path)
        # Created 0600 in a home created 0700 before SQLite opens it (SQLite would make it
        # 0644); its -wal and -shm files take the database's mode.
        private_file(path)
        self.raw = _DRIVER.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self.raw.row_factory = _DRIVER.Row
        self.raw.execute("PRAGMA journal_mode=WAL")
        self.raw.execute("PRAGMA synchronous=FULL")
        self.raw.execute("PRAGMA foreign_keys=ON")
        # Forgotten memories are overwritten on disk, not just unlinked.
        self.raw.execute("PRAGMA secure_delete=ON")
        self.vec_version: str | None
        self.vec_error: str | None
        self.vec_version, self.vec_error = _load_sqlite_vec(self.raw)
        if self.vec_version is None:
            _unhook_vec_triggers(self.raw)

    def execute(self, sql: str, params: Params = (), *, binary: bool = False) -> Result:
        try:
            cur = self.raw.execute(sql, tuple(params))
            rows = [dict(r) for r in cur.fetchall()] if cur.description else []
        except SQLITE_ERRORS as exc:
            raise StorageError(f"The database {self.where} refused a query: {exc}") from exc
        return Result(rows, cur.rowcount)

    def executemany(self, sql: str, rows: Sequence[Params]) -> int:
        try:
            return int(self.raw.executemany(sql, rows).rowcount)
        except SQLITE_ERRORS as exc:
            raise StorageError(f"The database {self.where} refused a query: {exc}") from exc

    def script(self, sql: str) -> None:
        self.raw.executescript(sql)

    @contextmanager
    def transaction(self, durable: bool = True) -> Iterator[SqliteConnection]:
        if durable:
            yield from self._transaction()
            return
        # WAL with synchronous NORMAL: the commit is written to the log, not fsynced (0.3 ms
        # here); the next FULL commit fsyncs the log, this one's frames with it
        self.raw.execute("PRAGMA synchronous=NORMAL")
        try:
            yield from self._transaction()
        finally:
            self.raw.execute("PRAGMA synchronous=FULL")

    def _transaction(self) -> Iterator[SqliteConnection]:
        try:
            self.raw.execute("BEGIN IMMEDIATE")
        except SQLITE_ERRORS as exc:
            raise StorageError(
                f"The database {self.where} is not writable: {exc}. Another Novaberg process "
                "may hold it; try again when it is done."
            ) from exc
        try:
            yield self
        except SQLITE_ERRORS as exc:
            self.raw.execute("ROLLBACK")
            raise StorageError(f"Writing to {self.where} failed: {exc}") from exc
        except BaseException:
            self.raw.execute("ROLLBACK")
            raise
        else:
            try:
                self.raw.execute("COMMIT")
            except SQLITE_ERRORS as exc:
                raise StorageError(f"Writing to {self.where} failed: {exc}") from exc

    def close(self) -> None:
        self.raw.close()


@lru_cache(maxsize=512)
def _to_psycopg(sql: str) -> str:
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresConnection:
    """One psycopg 3 connection in autocommit mode; transactions are explicit. Used by one
    thread (the :class:`~novaberg.storage.db.Database` keeps a connection per thread)."""

    dialect: Dialect = "postgres"

    def __init__(self, url: str, connect_timeout_s: float = 5.0) -> None:
        import psycopg
        from psycopg.conninfo import conninfo_to_dict
        from psycopg.rows import dict_row

        info = conninfo_to_dict(url)
        self.where = f"postgresql://{info.get('host', 'localhost')}:{info.get('port', 5432)}"
        self.where += f"/{info.get('dbname', '')}"
        self.raw = psycopg.connect(
            url, autocommit=True, row_factory=dict_row, connect_timeout=int(connect_timeout_s)
        )

    def execute(self, sql: str, params: Params = (), *, binary: bool = False) -> Result:
        import psycopg

        try:
            cur = self.raw.execute(_to_psycopg(sql), tuple(params), binary=binary)
            rows = [dict(r) for r in cur.fetchall()] if cur.description else []
        except psycopg.Error as exc:
            raise StorageError(f"The database {self.where} refused a query: {exc}") from exc
        return Result(rows, cur.rowcount)

    def executemany(self, sql: str, rows: Sequence[Params]) -> int:
        import psycopg

        try:
            with self.raw.cursor() as cur:
                cur.executemany(_to_psycopg(sql), rows)
                return cur.rowcount
        except psycopg.Error as exc:
            raise StorageError(f"The database {self.where} refused a query: {exc}") from exc

    def script(self, sql: str) -> None:
        self.raw.execute(sql.encode())  # several statements, no parameters

    @contextmanager
    def transaction(self, durable: bool = True) -> Iterator[PostgresConnection]:
        import psycopg

        try:
            with self.raw.transaction():
                if not durable:  # the commit returns before its WAL record is flushed
                    self.raw.execute("SET LOCAL synchronous_commit = off")
                yield self
        except psycopg.Error as exc:
            raise StorageError(f"Writing to {self.where} failed: {exc}") from exc

    def close(self) -> None:
        self.raw.close()
