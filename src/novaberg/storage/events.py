"""The event queue in the database (table ``events``): self-triggers, memory jobs and proactive
messages, persisted per conversation. A new event, the pending events of a turn, the unfinished
ones of some types, the atomic claim of the oldest claimable one, the claims of dead processes
and of this one given up, an event's status and result, and whether a cause (a proactive
message's ``cause_key``) was scheduled already; the events of one turn as its contract shows
them (:func:`states_of_turn`) and a user's memory jobs (:func:`jobs_of`). The rules of a
claim (who claims, the lease, a dead claimer) are :mod:`novaberg.jobs.events`'s.

Sync functions that query the database (async callers run them through
:meth:`~novaberg.storage.db.Database.run`); the ones that write take the transaction's
:class:`~novaberg.storage.sql.Connection`, the caller decides the unit of work.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from novaberg.storage.db import Database, now
from novaberg.storage.proactive import Payload
from novaberg.storage.sql import Connection


class EventPayload(Payload, total=False):
    """What an event is about, as its row's JSON holds it: by type, a memory job's item
    (``memory_id``, ``turn_id``), ``weigh``'s imported message (``turn_id``, ``message_id``),
    a self-trigger's question and draft (``user_text``, ``draft``), or a proactive message's
    (:class:`~novaberg.storage.proactive.Payload`)."""

    memory_id: int
    turn_id: int
    message_id: int | None
    user_text: str
    draft: str


@dataclass(frozen=True, slots=True)
class Event:
    id: int
    conversation_id: int
    turn_id: int | None
    type: str
    status: str
    payload: EventPayload
    due_at: str | None = None
    """When a proactive message is due (UTC); ``None`` for every other event."""


@dataclass(frozen=True, slots=True)
class EventState:
    """An event as a turn's contract shows it (``events`` of ``ask --json``)."""

    id: int
    type: str
    status: str


@dataclass(frozen=True, slots=True)
class JobRow:
    """A user's memory job and how it ended (``memory jobs``, ``GET /api/memory/jobs``)."""

    id: int
    type: str
    status: str
    result: str
    turn_id: int | None
    updated_at: str


def states_of_turn(db: Database, turn_id: int) -> list[EventState]:
    """The events the turn ``turn_id`` scheduled, oldest first."""
    rows = db.query("SELECT id, type, status FROM events WHERE turn_id = ? ORDER BY id", (turn_id,))
    return [EventState(int(r["id"]), str(r["type"]), str(r["status"])) for r in rows]


def jobs_of(db: Database, user: str, types: tuple[str, ...]) -> list[JobRow]:
    """The user's events of these types (their memory jobs), oldest first."""
    marks = ", ".join("?" for _ in types)
    rows = db.query(
        "SELECT e.id, e.type, e.status, e.result, e.turn_id, e.updated_at FROM events e "
        f"JOIN conversations c ON c.id = e.conversation_id WHERE c.user_id = ? "
        f"AND e.type IN ({marks}) ORDER BY e.id",
        (user, *types),
    )
    return [
        JobRow(
            id=int(r["id"]),
            type=str(r["type"]),
            status=str(r["status"]),
            result=str(r["result"]),
            turn_id=None if r["turn_id"] is None else int(r["turn_id"]),
            updated_at=str(r["updated_at"]),
        )
        for r in rows
    ]


@dataclass(frozen=True, slots=True)
class Claim:
    """A running event's claim: who holds it (``host:pid``)."""

    id: int
    claimed_by: str | None


def add(
    c: Connection, conversation_id: int, turn_id: int | None, type: str, payload: EventPayload
) -> int:
    """A pending event, in transaction ``c``: its id."""
    stamp = now()
    new = c.execute(
        "INSERT INTO events (conversation_id, turn_id, type, status, payload, "
        "created_at, updated_at) VALUES (?, ?, ?, 'pending', ?, ?, ?) RETURNING id",
        (conversation_id, turn_id, type, json.dumps(payload, ensure_ascii=False), stamp, stamp),
    ).scalar()
    return int(new)


def pending_of_turn(db: Database, turn_id: int) -> list[Event]:
    """The turn's pending events, oldest first."""
    rows = db.query(
        "SELECT * FROM events WHERE turn_id = ? AND status = 'pending' ORDER BY id",
        (turn_id,),
    )
    return [_event(r) for r in rows]


def unfinished(db: Database, types: tuple[str, ...], limit: int) -> list[Event]:
    """Events of these types that are pending or running, oldest first, at most ``limit``."""
    marks = ", ".join("?" for _ in types)
    rows = db.query(
        f"SELECT * FROM events WHERE status IN ('pending', 'running') AND type IN ({marks}) "
        "ORDER BY id LIMIT ?",
        (*types, limit),
    )
    return [_event(r) for r in rows]


def claim(
    c: Connection,
    types: tuple[str, ...],
    *,
    claimant: str,
    stamp: str,
    until: str,
    turn_id: int | None = None,
    settled_before: str | None = None,
    user: str | None = None,
    due_by: str | None = None,
) -> Event | None:
    """In transaction ``c``: set the oldest claimable event of these types ``running`` for
    ``claimant`` until ``until``, in one statement; ``None`` when there is none. Claimable at
    ``stamp``: pending, or running with no claim or a claim that ran out. ``turn_id``: only
    that turn's; ``settled_before``: only events whose turn ended before then; ``user``: only
    events of that user's conversations; ``due_by``: only events due then or before, soonest
    first. On PostgreSQL the inner select skips rows another transaction has locked."""
    marks = ", ".join("?" for _ in types)
    claimable = (
        "(status = 'pending' OR (status = 'running' "
        "AND (claimed_until IS NULL OR claimed_until < ?)))"
    )
    scope = " AND turn_id = ?" if turn_id is not None else ""
    if settled_before is not None:
        scope += (
            " AND turn_id IN (SELECT t.id FROM turns t WHERE t.status <> 'running' "
            "AND t.finished_at < ?)"
        )
    if user is not None:
        scope += " AND conversation_id IN (SELECT c.id FROM conversations c WHERE c.user_id = ?)"
    order = "id"
    if due_by is not None:
        scope += " AND due_at IS NOT NULL AND due_at <= ?"
        order = "due_at, id"
    lock = " FOR UPDATE SKIP LOCKED" if c.dialect == "postgres" else ""
    params: list[Any] = [claimant, until, stamp, *types, stamp]
    if turn_id is not None:
        params.append(turn_id)
    if settled_before is not None:
        params.append(settled_before)
    if user is not None:
        params.append(user)
    if due_by is not None:
        params.append(due_by)
    params.append(stamp)
    row = c.execute(
        "UPDATE events SET status = 'running', claimed_by = ?, claimed_until = ?, "
        "updated_at = ? WHERE id = (SELECT id FROM events "
        f"WHERE type IN ({marks}) AND {claimable}{scope} ORDER BY {order} LIMIT 1{lock}) "
        f"AND {claimable} RETURNING *",
        params,
    ).one()
    return None if row is None else _event(row)


def running_claims(db: Database) -> list[Claim]:
    """The claims of running events that still hold a lease."""
    rows = db.query(
        "SELECT id, claimed_by FROM events WHERE status = 'running' AND claimed_until IS NOT NULL"
    )
    return [Claim(r["id"], r["claimed_by"]) for r in rows]


def unclaim(c: Connection, claim: Claim) -> None:
    """In transaction ``c``: the event's claim ends (its lease is gone) if it is still running
    under that claim; it is claimable again."""
    c.execute(
        "UPDATE events SET claimed_until = NULL "
        "WHERE id = ? AND status = 'running' AND claimed_by = ?",
        (claim.id, claim.claimed_by),
    )


def unclaim_all(c: Connection, claimant: str) -> int:
    """In transaction ``c``: the running events ``claimant`` holds become claimable again;
    how many."""
    released = c.execute(
        "UPDATE events SET claimed_until = NULL WHERE status = 'running' "
        "AND claimed_by = ? AND claimed_until IS NOT NULL RETURNING id",
        (claimant,),
    ).rows
    return len(released)


def mark(c: Connection, event_id: int, status: str, result: str) -> None:
    """In transaction ``c``: the event's status and result; its claim ends (``claimed_by``
    stays as a record of who ran it)."""
    c.execute(
        "UPDATE events SET status = ?, result = ?, updated_at = ?, claimed_until = NULL "
        "WHERE id = ?",
        (status, result, now(), event_id),
    )


def has_cause(c: Connection, cause_key: str) -> bool:
    """Whether an event of cause ``cause_key`` exists (a proactive message scheduled for it)."""
    return bool(c.execute("SELECT 1 FROM events WHERE cause_key = ?", (cause_key,)).rows)


def _event(r: dict[str, Any]) -> Event:
    return Event(
        r["id"],
        r["conversation_id"],
        r["turn_id"],
        r["type"],
        r["status"],
        json.loads(r["payload"]),
        r.get("due_at"),
    )
