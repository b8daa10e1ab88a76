"""The per-user event log in the database (table ``user_events``): an entry appended in the
transaction of what it reports, the id of a user's newest entry, and a user's entries after an
id joined with what each one sends now (the follow-up's turn and Nova's message, the job's
``events`` row). What an entry sends, and waking the listeners, is
:mod:`novaberg.jobs.user_events`'s.

Sync functions that query the database (async callers run them through
:meth:`~novaberg.storage.db.Database.run`); :func:`append` takes the transaction's
:class:`~novaberg.storage.sql.Connection`, the caller decides the unit of work.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

Kind = Literal["followup", "job"]


@dataclass(frozen=True, slots=True)
class LoggedEvent:
    """An entry of the log with what it refers to, as it is now: for a ``followup``, its turn
    and Nova's message there (``None`` where there is none); for a ``job``, its event."""

    id: int
    kind: str
    ref_id: int
    parent_turn_id: int | None
    conversation_id: int | None
    turn_status: str | None
    origin: str | None
    forgotten_at: str | None
    content: str | None
    job_type: str | None
    job_status: str | None
    job_result: str | None


def append(c: Connection, user: str, kind: Kind, ref_id: int) -> int:
    """Append an entry for ``user`` inside the open transaction ``c``; its id. On PostgreSQL
    the table is locked until the commit, so that ids are handed out in commit order."""
    if c.dialect == "postgres":
        c.execute("LOCK TABLE user_events IN EXCLUSIVE MODE")
    new = c.execute(
        "INSERT INTO user_events (user_id, kind, ref_id, created_at) VALUES (?, ?, ?, ?) "
        "RETURNING id",
        (user, kind, ref_id, now()),
    ).scalar()
    return int(new)


def latest_id(db: Database, user: str) -> int:
    """The id of the user's newest entry (0 when none)."""
    found = db.scalar("SELECT MAX(id) FROM user_events WHERE user_id = ?", (user,))
    return 0 if found is None else int(found)


def after(db: Database, user: str, after_id: int, limit: int) -> list[LoggedEvent]:
    """The user's entries after ``after_id``, oldest first, at most ``limit``."""
    rows = db.query(
        "SELECT u.id, u.kind, u.ref_id, t.parent_turn_id, t.conversation_id, t.status, t.origin, "
        "t.forgotten_at, m.content, e.type AS job_type, e.status AS job_status, "
        "e.result AS job_result FROM user_events u "
        "LEFT JOIN turns t ON u.kind = 'followup' AND t.id = u.ref_id "
        "LEFT JOIN messages m ON u.kind = 'followup' AND m.turn_id = t.id "
        "AND m.role = 'assistant' "
        "LEFT JOIN events e ON u.kind = 'job' AND e.id = u.ref_id "
        "WHERE u.user_id = ? AND u.id > ? ORDER BY u.id LIMIT ?",
        (user, after_id, limit),
    )
    return [
        LoggedEvent(
            id=int(r["id"]),
            kind=str(r["kind"]),
            ref_id=int(r["ref_id"]),
            parent_turn_id=_id(r["parent_turn_id"]),
            conversation_id=_id(r["conversation_id"]),
            turn_status=_text(r["status"]),
            origin=_text(r["origin"]),
            forgotten_at=_text(r["forgotten_at"]),
            content=_text(r["content"]),
            job_type=_text(r["job_type"]),
            job_status=_text(r["job_status"]),
            job_result=_text(r["job_result"]),
        )
        for r in rows
    ]


def _id(value: Any) -> int | None:
    return None if value is None else int(value)


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
