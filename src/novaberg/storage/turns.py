"""A turn in the database: a finished one read back (its row and owner, its reply, the
follow-ups of its second pass, its call records: ``GET /api/turns/{id}``, the Why panel), and a
regenerate's reply put in place of the one it regenerates.

Sync functions that query the database: async callers run them through
:meth:`~novaberg.storage.db.Database.run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from novaberg.storage.db import Database, now, process_name
from novaberg.storage.sql import Connection
from novaberg.telemetry import CallRecord


@dataclass(frozen=True, slots=True)
class OwnedTurn:
    """A turn's row with the ``user_id`` of its conversation."""

    id: int
    conversation_id: int
    status: str
    trace_json: str | None
    user_id: str


@dataclass(frozen=True, slots=True)
class StoredFollowup:
    """A message the turn's second pass stored: its own turn and Nova's words."""

    turn_id: int
    reply: str


@dataclass(frozen=True, slots=True)
class TurnSource:
    """What a memory job and a memory's page read of the turn it came from."""

    id: int
    origin: str
    user_text: str
    """The user's message (``FORGOTTEN``'s mark once its words were forgotten)."""
    started_at: str
    forgotten: bool


def source_of(db: Database, turn_id: int) -> TurnSource | None:
    """The turn ``turn_id`` as a memory's source; ``None`` when there is none."""
    row = db.one(
        "SELECT id, origin, user_text, started_at, forgotten_at FROM turns WHERE id = ?",
        (turn_id,),
    )
    if row is None:
        return None
    return TurnSource(
        id=int(row["id"]),
        origin=str(row["origin"]),
        user_text=str(row["user_text"]),
        started_at=str(row["started_at"]),
        forgotten=bool(row["forgotten_at"]),
    )


def turn_owner(db: Database, turn_id: int) -> OwnedTurn | None:
    """The turn ``turn_id`` with its owner; ``None`` when there is none."""
    row = db.one(
        "SELECT t.id, t.conversation_id, t.status, t.trace_json, c.user_id FROM turns t "
        "JOIN conversations c ON c.id = t.conversation_id WHERE t.id = ?",
        (turn_id,),
    )
    if row is None:
        return None
    return OwnedTurn(
        id=int(row["id"]),
        conversation_id=int(row["conversation_id"]),
        status=str(row["status"]),
        trace_json=row["trace_json"],
        user_id=str(row["user_id"]),
    )


def reply_of(db: Database, turn_id: int) -> str:
    """Nova's stored message of the turn (``""`` when there is none)."""
    found = db.scalar(
        "SELECT content FROM messages WHERE turn_id = ? AND role = 'assistant' "
        "ORDER BY id DESC LIMIT 1",
        (turn_id,),
    )
    return "" if found is None else str(found)


def followups_of(db: Database, turn_id: int) -> list[StoredFollowup]:
    """The finished second passes of the turn, in order."""
    rows = db.query(
        "SELECT t.id, m.content FROM turns t JOIN messages m "
        "ON m.turn_id = t.id AND m.role = 'assistant' "
        "WHERE t.parent_turn_id = ? AND t.status = 'done' ORDER BY t.id",
        (turn_id,),
    )
    return [StoredFollowup(turn_id=int(r["id"]), reply=str(r["content"])) for r in rows]


def calls_of(db: Database, turn_id: int) -> list[CallRecord]:
    """The turn's call records as they were sent, in order."""
    return [_record(row) for row in db.calls_of(turn_id)]


def _record(row: dict[str, Any]) -> CallRecord:
    return CallRecord(
        caller=row["caller"],
        backend=row["backend"],
        model=row["model"],
        think=bool(row["think"]),
        content_len=int(row["content_len"]),
        thinking_len=int(row["thinking_len"]),
        eval_count=int(row["eval_count"]),
        prompt_eval_count=int(row["prompt_eval_count"]),
        tool_calls=int(row["tool_calls"]),
        outcome=row["outcome"],
        ms=float(row["duration_ms"]),
        queue_wait_ms=float(row["queue_wait_ms"]),
        backend_ms=float(row["backend_ms"]),
        attempt=int(row["attempt"]),
        error=row["error"] or "",
        normalizer=row["normalizer"] or "",
        json_mode=row["json_mode"] or "",
        host=row["host"] or "",
    )


def replace_replies(c: Connection, turn_id: int) -> None:
    """A regenerate's reply replaces the reply of the turn it regenerates (and of earlier
    regenerates of that turn): the old assistant messages are deleted, in the regenerate's
    transaction. The old turn keeps its user message, trace and memory."""
    c.execute(
        "DELETE FROM messages WHERE role = 'assistant' AND turn_id IN ("
        "SELECT o.id FROM turns r JOIN turns o ON o.id = r.parent_turn_id WHERE r.id = ? "
        "UNION SELECT s.id FROM turns r JOIN turns s ON s.parent_turn_id = r.parent_turn_id "
        "WHERE r.id = ? AND s.origin = 'regenerate' AND s.id <> r.id)",
        (turn_id, turn_id),
    )


def stored_done(c: Connection, conversation: int, origin: str, user_text: str, trace: str) -> int:
    """A turn stored finished at once, in transaction ``c`` (a statement remembered without a
    turn's words: no model ran); its id."""
    stamp = now()
    return int(
        c.execute(
            "INSERT INTO turns (conversation_id, origin, user_text, status, trace_json, "
            "started_at, finished_at, runner) VALUES (?, ?, ?, 'done', ?, ?, ?, ?) "
            "RETURNING id",
            (conversation, origin, user_text, trace, stamp, stamp, process_name()),
        ).scalar()
    )


@dataclass(frozen=True, slots=True)
class RunningTurn:
    id: int
    runner: str
    """The process running it, ``host:pid``."""


def running_turns(db: Database) -> list[RunningTurn]:
    """The turns left ``running`` that name the process running them."""
    rows = db.query("SELECT id, runner FROM turns WHERE status = 'running' AND runner IS NOT NULL")
    return [RunningTurn(int(r["id"]), str(r["runner"])) for r in rows]


def abort_running(db: Database, turn_id: int, error: str) -> bool:
    """Mark the turn aborted with ``error`` if it is still running; whether it was."""
    with db.transaction() as c:
        changed = c.execute(
            "UPDATE turns SET status = 'aborted', error = ?, finished_at = ? "
            "WHERE id = ? AND status = 'running' RETURNING id",
            (error, now(), turn_id),
        ).rows
    return bool(changed)
