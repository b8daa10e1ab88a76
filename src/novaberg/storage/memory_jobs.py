"""What the background memory jobs (:mod:`novaberg.memory.jobs`) read of the memories beyond
the memory store's own queries: a user's current dated events from a day on, which the
timeline job compares a new event's words with (the same event told again). The item a turn
stored, which the weigh job looks for, is :meth:`~novaberg.storage.memories.MemoryRows.key_id`.

Sync functions over the job's open transaction (:class:`~novaberg.storage.sql.Connection`):
the caller decides the unit of work.
"""

from __future__ import annotations

from dataclasses import dataclass

from novaberg.storage.sql import Connection


@dataclass(frozen=True, slots=True)
class EventAhead:
    """A current dated event of the user's, on its day or later."""

    id: int
    text: str


def events_ahead(c: Connection, user: str, besides: int, from_day: str) -> list[EventAhead]:
    """In transaction ``c``: the user's current events (neither superseded nor consolidated)
    on ``from_day`` (an ISO date) or later, other than memory ``besides``."""
    rows = c.execute(
        "SELECT id, text FROM memories WHERE user_id = ? AND kind = 'event' AND id <> ? "
        "AND valid_to IS NULL AND consolidated_into IS NULL AND happens_on >= ?",
        (user, besides, from_day),
    ).rows
    return [EventAhead(int(r["id"]), str(r["text"])) for r in rows]
