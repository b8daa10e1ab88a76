"""A user's event log as a stream reads it (``GET /api/events``): where it stands, the events
after a point while the stream's key is still active, and the signal a writer in this process
wakes the stream with (:mod:`novaberg.jobs.user_events` keeps the log)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from novaberg.engine.keys import Keys, KeyWatch
from novaberg.jobs import user_events
from novaberg.jobs.user_events import UserEvent
from novaberg.storage.db import Database

if TYPE_CHECKING:
    from novaberg.engine.core import Engine

__all__ = ["EventLog", "UserEvent"]


@dataclass(frozen=True)
class EventLog:
    """One user's log, read for the holder of one key."""

    db: Database
    user: str
    key: KeyWatch

    @classmethod
    def of(cls, engine: Engine, user: str, key: str) -> EventLog:
        """``user``'s log in the engine's database, read while ``key`` is active."""
        return cls(engine.db, user, Keys.of(engine).watch(key))

    async def latest(self) -> int:
        """The id of the newest event; 0 when there is none."""
        return await self.db.run(user_events.latest_id, self.db, self.user)

    async def after(self, cursor: int, limit: int) -> list[UserEvent] | None:
        """Up to ``limit`` events after ``cursor``, oldest first; ``None`` once the key is no
        longer active (revoked, or replaced by a new key for the same user)."""
        return await self.db.run(self._read, cursor, limit)

    def _read(self, cursor: int, limit: int) -> list[UserEvent] | None:
        if not self.key.active():
            return None
        return user_events.after(self.db, self.user, cursor, limit)

    @contextmanager
    def listening(self) -> Iterator[asyncio.Event]:
        """An event set whenever a writer in this process logs one for the user."""
        with user_events.SIGNAL.listen(self.user) as woken:
            yield woken
