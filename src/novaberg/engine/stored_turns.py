"""A finished turn rebuilt from the database in the shape ``novaberg ask --json`` prints
(:meth:`~novaberg.engine.result.TurnResult.contract_json`), for ``GET /api/turns/{id}``.

What the database cannot give back exactly: a call's ``backend_ms`` and ``json_mode`` are not
stored (they read 0.0 and ``""`` unless a later migration adds the columns); ``events`` and
``salience.stored`` are as they are now (a memory job since finished, a memory since forgotten),
not as they were when the turn ended. A turn whose words were forgotten has no trace left:
``thinker``, ``tribunal`` and ``salience`` read ``null``.

The functions here are sync and query the database: a route runs them through
``await db.run(...)`` (the database's worker threads), never on the event loop.
"""

from __future__ import annotations

import json
from typing import Any, cast

from novaberg.engine.result import tribunal_view
from novaberg.graph.state import TurnState
from novaberg.memory.store import turn_item_key
from novaberg.storage.db import Database
from novaberg.telemetry import CallRecord


def turn_owner(db: Database, turn_id: int) -> dict[str, Any] | None:
    """The turn's row with its conversation's ``user_id``; ``None`` when there is none."""
    return db.one(
        "SELECT t.id, t.conversation_id, t.status, t.trace_json, c.user_id FROM turns t "
        "JOIN conversations c ON c.id = t.conversation_id WHERE t.id = ?",
        (turn_id,),
    )


def _reply(db: Database, turn_id: int) -> str:
    found = db.scalar(
        "SELECT content FROM messages WHERE turn_id = ? AND role = 'assistant' "
        "ORDER BY id DESC LIMIT 1",
        (turn_id,),
    )
    return "" if found is None else str(found)


def _call_view(row: dict[str, Any]) -> dict[str, Any]:
    record = CallRecord(
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
        backend_ms=float(row.get("backend_ms") or 0.0),
        attempt=int(row["attempt"]),
        error=row["error"] or "",
        normalizer=row.get("normalizer") or "",
        json_mode=row.get("json_mode") or "",
        host=row.get("host") or "",
    )
    return record.contract_view()


def _followups(db: Database, turn_id: int) -> list[dict[str, Any]]:
    rows = db.query(
        "SELECT t.id, m.content FROM turns t JOIN messages m "
        "ON m.turn_id = t.id AND m.role = 'assistant' "
        "WHERE t.parent_turn_id = ? AND t.status = 'done' ORDER BY t.id",
        (turn_id,),
    )
    return [
        {"reply": r["content"], "origin": "self_trigger", "turn_id": int(r["id"])} for r in rows
    ]


def stored_turn_json(db: Database, row: dict[str, Any], user: str) -> dict[str, Any]:
    """The contract object of the finished turn ``row`` (from :func:`turn_owner`)."""
    turn_id = int(row["id"])
    trace: dict[str, Any] = json.loads(row["trace_json"] or "{}") or {}
    scored = trace.get("salience")
    stored = db.scalar(
        "SELECT id FROM memories WHERE user_id = ? AND item_key = ?",
        (user, turn_item_key(turn_id)),
    )
    state = cast(
        TurnState, {"tribunal": trace.get("tribunal"), "corrector": trace.get("corrector")}
    )
    return {
        "reply": _reply(db, turn_id),
        "turn_id": turn_id,
        "conversation_id": int(row["conversation_id"]),
        "followups": _followups(db, turn_id),
        "calls": [_call_view(c) for c in db.calls_of(turn_id)],
        "thinker": trace.get("thinker"),
        "tribunal": tribunal_view(state) if trace.get("tribunal") is not None else None,
        "salience": None
        if scored is None
        else {"score": scored.get("score"), "stored": stored is not None},
        "events": db.events_of_turn(turn_id),
    }
