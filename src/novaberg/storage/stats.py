"""The aggregate queries of ``novaberg stats`` and ``GET /api/stats`` (:mod:`novaberg.stats`,
which computes the figures): the window's call records, turns by status and the traces of the
finished ones, events by type and status, the results of dropped proactive messages, and
whether anything older than the window is recorded. Each takes the window's start (``cutoff``,
a timestamp) and, for one user's figures, that user: a turn's or event's by its conversation's
owner, a call's by its turn's or job's conversation, else (a front-end's task) its own user.

Sync functions that query the database: async callers run them through
:meth:`~novaberg.storage.db.Database.run`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from novaberg.storage.db import Database
from novaberg.storage.proactive import TYPE as PROACTIVE


@dataclass(frozen=True, slots=True)
class CallRow:
    """One request sent (a retry is one of its own)."""

    caller: str
    backend: str
    outcome: str
    duration_ms: float
    attempt: int
    turn_id: int | None


@dataclass(frozen=True, slots=True)
class EventCount:
    """How many events of one type have one status."""

    type: str
    status: str
    n: int


def _owner(column: str, user: str | None) -> tuple[str, list[Any]]:
    """A join that finds the conversation's owner, and the condition on it."""
    if user is None:
        return "", []
    return (
        f" JOIN conversations v ON v.id = {column}",
        [user],
    )


def calls_since(db: Database, cutoff: str, user: str | None) -> list[CallRow]:
    """The calls recorded from ``cutoff`` on (the user's, if given)."""
    sql = (
        "SELECT c.caller, c.backend, c.outcome, c.duration_ms, c.attempt, c.turn_id "
        "FROM llm_calls c"
    )
    params: list[Any] = []
    if user is not None:  # a turn's or job's calls by their conversation; a task's by its own
        sql += (
            " LEFT JOIN turns t ON t.id = c.turn_id LEFT JOIN events e ON e.id = c.event_id"
            " LEFT JOIN conversations v ON v.id = COALESCE(t.conversation_id, e.conversation_id)"
        )
    sql += " WHERE c.created_at >= ?"
    params.append(cutoff)
    if user is not None:
        sql += " AND COALESCE(v.user_id, c.user_id) = ?"
        params.append(user)
    return [
        CallRow(
            caller=str(r["caller"]),
            backend=str(r["backend"]),
            outcome=str(r["outcome"]),
            duration_ms=float(r["duration_ms"]),
            attempt=int(r["attempt"]),
            turn_id=None if r["turn_id"] is None else int(r["turn_id"]),
        )
        for r in db.query(sql, params)
    ]


def turn_counts(db: Database, cutoff: str, user: str | None) -> dict[str, int]:
    """How many turns started from ``cutoff`` on have each status, by status."""
    join, params = _owner("t.conversation_id", user)
    where = " WHERE t.started_at >= ?" + (" AND v.user_id = ?" if user is not None else "")
    counted = db.query(
        f"SELECT t.status, COUNT(*) AS n FROM turns t{join}{where} GROUP BY t.status "
        "ORDER BY t.status",
        [cutoff, *params],
    )
    return {str(r["status"]): int(r["n"]) for r in counted}


def done_traces(db: Database, cutoff: str, user: str | None) -> list[str]:
    """The stored traces (JSON) of the finished turns started from ``cutoff`` on, in order (a
    forgotten turn has none)."""
    join, params = _owner("t.conversation_id", user)
    where = " WHERE t.started_at >= ?" + (" AND v.user_id = ?" if user is not None else "")
    rows = db.query(
        f"SELECT t.trace_json FROM turns t{join}{where} AND t.status = 'done' "
        "AND t.trace_json IS NOT NULL ORDER BY t.id",
        [cutoff, *params],
    )
    return [str(r["trace_json"]) for r in rows]


def event_counts(db: Database, cutoff: str, user: str | None) -> list[EventCount]:
    """How many events created from ``cutoff`` on have each type and status, in that order."""
    join, params = _owner("e.conversation_id", user)
    where = " WHERE e.created_at >= ?" + (" AND v.user_id = ?" if user is not None else "")
    rows = db.query(
        f"SELECT e.type, e.status, COUNT(*) AS n FROM events e{join}{where} "
        "GROUP BY e.type, e.status ORDER BY e.type, e.status",
        [cutoff, *params],
    )
    return [EventCount(str(r["type"]), str(r["status"]), int(r["n"])) for r in rows]


def dropped_results(db: Database, cutoff: str, user: str | None) -> list[str]:
    """Why each proactive message created from ``cutoff`` on was dropped (its result; ``""``
    when it has none)."""
    join, params = _owner("e.conversation_id", user)
    where = " AND v.user_id = ?" if user is not None else ""
    rows = db.query(
        f"SELECT e.result FROM events e{join} WHERE e.type = ? AND e.status = 'dropped' "
        f"AND e.created_at >= ?{where}",
        [PROACTIVE, cutoff, *params],
    )
    return [str(r["result"] or "") for r in rows]


def recorded_before(db: Database, cutoff: str, user: str | None) -> bool:
    """Whether a turn started before ``cutoff`` (the user's, if given) is recorded, or, for
    all users, a call."""
    join, params = _owner("t.conversation_id", user)
    found = db.scalar(
        f"SELECT COUNT(*) AS n FROM turns t{join} WHERE t.started_at < ?"
        + (" AND v.user_id = ?" if user is not None else ""),
        [cutoff, *params],
    )
    if found:
        return True
    if user is None:
        return bool(db.scalar("SELECT COUNT(*) AS n FROM llm_calls WHERE created_at < ?", [cutoff]))
    return False
