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
lock on the table until the writer's commit, so ids are handed out in commit order. The
statements are :mod:`novaberg.storage.user_events`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from novaberg.storage import user_events as stored
from novaberg.storage.db import Database
from novaberg.storage.memories import FORGOTTEN
from novaberg.storage.sql import Connection
from novaberg.storage.user_events import Kind, LoggedEvent


def record(c: Connection, user: str, kind: Kind, ref_id: int) -> int:
    """Append an event for ``user`` inside the open transaction ``c``; its id."""
    return stored.append(c, user, kind, ref_id)


@dataclass(frozen=True)
class UserEvent:
    id: int
    kind: str
    data: dict[str, Any] | None
    """What is sent; ``None`` when there is nothing left to send (a forgotten follow-up)."""


def latest_id(db: Database, user: str) -> int:
    """The id of the user's newest event (0 when none)."""
    return stored.latest_id(db, user)


def after(db: Database, user: str, after_id: int, limit: int = 100) -> list[UserEvent]:
    """The user's events after ``after_id``, oldest first, with what each sends now."""
    return [UserEvent(r.id, r.kind, _data(r)) for r in stored.after(db, user, after_id, limit)]


def _data(r: LoggedEvent) -> dict[str, Any] | None:
    if r.kind == "followup":
        text = r.content
        if r.forgotten_at is not None or text is None or text == FORGOTTEN:
            return None
        return {
            "turn_id": r.ref_id,
            "parent_turn_id": r.parent_turn_id,
            "conversation_id": r.conversation_id,
            "text": text,
            "origin": str(r.origin),
        }
    if r.job_type is None:
        return None
    data: dict[str, Any] = {
        "event_id": r.ref_id,
        "type": r.job_type,
        "status": str(r.job_status),
    }
    result = r.job_result
    if result and result != FORGOTTEN:
        data["result"] = result
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
