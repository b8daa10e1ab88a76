"""Counts ``novaberg doctor`` reports: a user's memories, and the memory jobs waiting."""

from __future__ import annotations

from novaberg.storage.db import Database


def memories_of(db: Database, user: str) -> int:
    return int(db.scalar("SELECT COUNT(*) AS n FROM memories WHERE user_id = ?", (user,)))


def jobs_waiting(db: Database) -> int:
    """Memory jobs pending or running, of every user (second passes not counted)."""
    return int(
        db.scalar(
            "SELECT COUNT(*) AS n FROM events WHERE status IN ('pending', 'running') "
            "AND type <> 'self_trigger'"
        )
    )
