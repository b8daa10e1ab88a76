"""The event queue: self-triggers and memory jobs, persisted per conversation.

A log line says "enqueued" only after the database accepted the event, and "delivered" only
after the follow-up it produced was stored (../shared/seeds/000, postscript: a self-trigger
that was never declared vanished while the log said it had been set).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

log = logging.getLogger("novaberg")


@dataclass(frozen=True)
class Event:
    id: int
    conversation_id: int
    turn_id: int | None
    type: str
    status: str
    payload: dict[str, Any]


class EventQueue:
    def __init__(self, db: Database) -> None:
        self.db = db

    def enqueue(
        self,
        conversation_id: int,
        turn_id: int | None,
        type: str,
        payload: dict[str, Any],
        c: Connection | None = None,
    ) -> int:
        """Persist a pending event; return its id (raises if it was not stored).

        With ``c``, the event joins that (open) transaction and is logged by the caller
        once the transaction committed.
        """
        if c is None:
            with self.db.transaction() as tx:
                event_id = self.enqueue(conversation_id, turn_id, type, payload, tx)
            log.info("%s enqueued (event %d)", type.replace("_", "-"), event_id)
            return event_id
        stamp = now()
        new = c.execute(
            "INSERT INTO events (conversation_id, turn_id, type, status, payload, "
            "created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?) RETURNING id",
            (conversation_id, turn_id, type, json.dumps(payload, ensure_ascii=False), stamp, stamp),
        ).scalar()
        return int(new)

    def pending(self, turn_id: int) -> list[Event]:
        rows = self.db.query(
            "SELECT * FROM events WHERE turn_id = ? AND status = 'pending' ORDER BY id",
            (turn_id,),
        )
        return [_event(r) for r in rows]

    def unfinished(self, types: tuple[str, ...], limit: int = 100) -> list[Event]:
        """Events of these types not done yet, oldest first: pending ones, and ones left
        ``running`` by a process that died (their jobs are idempotent, so they run again)."""
        marks = ", ".join("?" for _ in types)
        rows = self.db.query(
            f"SELECT * FROM events WHERE status IN ('pending', 'running') AND type IN ({marks}) "
            "ORDER BY id LIMIT ?",
            (*types, limit),
        )
        return [_event(r) for r in rows]

    def mark(
        self, event_id: int, status: str, result: str = "", c: Connection | None = None
    ) -> None:
        if c is None:
            with self.db.transaction() as tx:
                self.mark(event_id, status, result, tx)
            return
        c.execute(
            "UPDATE events SET status = ?, result = ?, updated_at = ? WHERE id = ?",
            (status, result, now(), event_id),
        )


def _event(r: dict[str, Any]) -> Event:
    return Event(
        r["id"],
        r["conversation_id"],
        r["turn_id"],
        r["type"],
        r["status"],
        json.loads(r["payload"]),
    )
