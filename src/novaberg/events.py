"""The event queue: self-triggers (and later background jobs), persisted per conversation.

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
        self, conversation_id: int, turn_id: int | None, type: str, payload: dict[str, Any]
    ) -> int:
        """Persist a pending event; return its id (raises if it was not stored)."""
        stamp = now()
        with self.db.transaction() as c:
            cur = c.execute(
                "INSERT INTO events (conversation_id, turn_id, type, status, payload, "
                "created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?)",
                (
                    conversation_id,
                    turn_id,
                    type,
                    json.dumps(payload, ensure_ascii=False),
                    stamp,
                    stamp,
                ),
            )
            event_id = int(cur.lastrowid or 0)
        log.info("%s enqueued (event %d)", type.replace("_", "-"), event_id)
        return event_id

    def pending(self, turn_id: int) -> list[Event]:
        rows = self.db.conn.execute(
            "SELECT * FROM events WHERE turn_id = ? AND status = 'pending' ORDER BY id",
            (turn_id,),
        )
        return [
            Event(
                r["id"],
                r["conversation_id"],
                r["turn_id"],
                r["type"],
                r["status"],
                json.loads(r["payload"]),
            )
            for r in rows
        ]

    def mark(self, event_id: int, status: str) -> None:
        with self.db.transaction() as c:
            c.execute(
                "UPDATE events SET status = ?, updated_at = ? WHERE id = ?",
                (status, now(), event_id),
            )
