"""The per-user event log that ``GET /api/events`` streams: what a user's client may want to hear
about while it was not asking.

Kinds: ``followup`` (a self-triggered follow-up or a proactive message was stored, its
``origin`` says which; ``ref_id``: its turn) and ``job``
(a memory job finished, done or failed; ``ref_id``: its ``events`` row). A row holds ids and a
kind only, never text: the text is read from ``messages`` and ``events`` when it is sent, so
forget (which erases those) needs no entry for this table, and a forgotten follow-up is
skipped.

Each row is written by :func:`record` inside the transaction of what it reports. After that
transaction committed, the writer calls :func:`notify`: listeners of this process wake at once
(:class:`Signal`, safe from any thread); listeners in other processes (a ``novaberg worker``,
a second ``serve`` on one PostgreSQL) find the row by their slower poll.

Ids only grow, and a reader resuming after an id must never skip a row committed later with a
smaller one: SQLite has one writer at a time; on PostgreSQL :func:`record` takes an exclusive
lock on the table until the writer's commit, so ids are handed out in commit order.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

Kind = Literal["followup", "job"]
FORGOTTEN_MARK = "[forgotten at the user's request]"
"""What forget leaves in place of words (``memory.store.FORGOTTEN``, repeated here so that this
module needs nothing from ``memory/``)."""


def record(c: Connection, user: str, kind: Kind, ref_id: int) -> int:
    """Append an event for ``user`` inside the open transaction ``c``; its id."""
    if c.dialect == "postgres":
        c.execute("LOCK TABLE user_events IN EXCLUSIVE MODE")
    new = c.execute(
        "INSERT INTO user_events (user_id, kind, ref_id, created_at) VALUES (?, ?, ?, ?) "
        "RETURNING id",
        (user, kind, ref_id, now()),
    ).scalar()
    return int(new)


@dataclass(frozen=True)
class UserEvent:
    id: int
    kind: str
    data: dict[str, Any] | None
    """What is sent; ``None`` when there is nothing left to send (a forgotten follow-up)."""


def latest_id(db: Database, user: str) -> int:
    """The id of the user's newest event (0 when none)."""
    found = db.scalar("SELECT MAX(id) FROM user_events WHERE user_id = ?", (user,))
    return 0 if found is None else int(found)


def after(db: Database, user: str, after_id: int, limit: int = 100) -> list[UserEvent]:
    """The user's events after ``after_id``, oldest first, with what each sends now."""
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
    return [UserEvent(int(r["id"]), str(r["kind"]), _data(r)) for r in rows]


def _data(r: dict[str, Any]) -> dict[str, Any] | None:
    if r["kind"] == "followup":
        text = r["content"]
        if r["forgotten_at"] is not None or text is None or text == FORGOTTEN_MARK:
            return None
        return {
            "turn_id": int(r["ref_id"]),
            "parent_turn_id": None if r["parent_turn_id"] is None else int(r["parent_turn_id"]),
            "conversation_id": int(r["conversation_id"]),
            "text": str(text),
            "origin": str(r["origin"]),
        }
    if r["job_type"] is None:
        return None
    data: dict[str, Any] = {
        "event_id": int(r["ref_id"]),
        "type": str(r["job_type"]),
        "status": str(r["job_status"]),
    }
    result = r["job_result"]
    if result and result != FORGOTTEN_MARK:
        data["result"] = str(result)
    return data


class Signal:
    """Wakes the listeners of this process when events were written, from any thread: each
    listener is an :class:`asyncio.Event` of its own loop, set through that loop."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, set[tuple[asyncio.AbstractEventLoop, asyncio.Event]]] = {}

    @contextlib.contextmanager
    def listen(self, user: str) -> Iterator[asyncio.Event]:
        """An event that is set whenever ``user``'s log may have grown (clear it, then read)."""
        entry = (asyncio.get_running_loop(), asyncio.Event())
        with self._lock:
            self._listeners.setdefault(user, set()).add(entry)
        try:
            yield entry[1]
        finally:
            with self._lock:
                mine = self._listeners.get(user, set())
                mine.discard(entry)
                if not mine:
                    self._listeners.pop(user, None)

    def notify(self, user: str) -> None:
        with self._lock:
            listeners = list(self._listeners.get(user, ()))
        for loop, event in listeners:
            with contextlib.suppress(RuntimeError):  # that loop is closed: nobody listens
                loop.call_soon_threadsafe(event.set)


SIGNAL = Signal()


def notify(user: str) -> None:
    """Wake this process's listeners of ``user`` (call after the writing transaction)."""
    SIGNAL.notify(user)
