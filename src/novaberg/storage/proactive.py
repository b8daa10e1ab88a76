"""Proactive messages in the database: the rows of ``events`` of type :data:`TYPE` (what Nova
will write first, and when: :mod:`novaberg.proactive.schedule` says what a row means) and the
per-user switches of ``proactive_switches``; with the few reads of conversations, turns and
memories their sender asks before it sends one (:mod:`novaberg.proactive.sender`).

A message's payload is a JSON object in the row: the functions here take and give it as a
``dict`` (written with ``ensure_ascii=False``). Sync functions that query the database (async
callers run them through :meth:`~novaberg.storage.db.Database.run`); the ones that write take
the transaction's :class:`~novaberg.storage.sql.Connection`, the caller decides the unit of
work.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypedDict

from novaberg.storage.db import Database, now
from novaberg.storage.sql import Connection

TYPE = "proactive"
"""The ``events.type`` of a proactive message."""
ALL = "*"
"""The ``proactive_switches.kind`` of the switch for every kind at once."""


class Payload(TypedDict, total=False):
    """What a proactive message is about, as its row's JSON holds it."""

    kind: str
    """reminder, event, checkin or followup."""
    text: str
    cause: str
    """Why it was scheduled, in words that name no user text ("asked in turn 12")."""
    repeat: str | None
    local: str
    """The wall time it is due at, ISO 8601 to the minute, in ``zone``."""
    zone: str
    ahead: int
    """An event's message the day(s) before it."""
    sources: list[int]
    """The memories it rests on (a concern, an event)."""
    attempts: int
    """How often sending it was tried and put off."""


@dataclass(frozen=True, slots=True)
class ProactiveRow:
    """A proactive message's row: its status as stored (pending, running, sent, …)."""

    id: int
    due_at: str
    status: str
    payload: Payload
    result: str
    turn_id: int | None


@dataclass(frozen=True, slots=True)
class PendingRow:
    """A pending message's id and payload."""

    id: int
    payload: Payload


@dataclass(frozen=True, slots=True)
class OwnerRow:
    """Whose a message is: the user of its conversation, that conversation, its payload."""

    user_id: str
    conversation_id: int
    payload: Payload


@dataclass(frozen=True, slots=True)
class StatusRow:
    """A message's stored status and its result (a reason, or the turn that sent it)."""

    status: str
    result: str


def _payload(stored: Any) -> Payload:
    found: Payload = json.loads(str(stored))
    return found


def _stored(payload: Payload) -> str:
    return json.dumps(payload, ensure_ascii=False)


def _row(r: dict[str, Any]) -> ProactiveRow:
    return ProactiveRow(
        id=int(r["id"]),
        due_at=str(r["due_at"]),
        status=str(r["status"]),
        payload=_payload(r["payload"]),
        result=str(r.get("result") or ""),
        turn_id=None if r.get("turn_id") is None else int(r["turn_id"]),
    )


# --- the conversation a message goes into -------------------------------------------------


def last_spoken_in(c: Connection, user: str) -> int | None:
    """The conversation of the user's latest turn (``None`` when they have had none)."""
    found = c.execute(
        "SELECT t.conversation_id FROM turns t JOIN conversations v ON v.id = t.conversation_id "
        "WHERE v.user_id = ? ORDER BY t.started_at DESC, t.id DESC LIMIT 1",
        (user,),
    ).scalar()
    return None if found is None else int(found)


def newest_conversation(c: Connection, user: str) -> int | None:
    """The user's newest conversation (``None`` when they have none)."""
    found = c.execute(
        "SELECT id FROM conversations WHERE user_id = ? ORDER BY id DESC LIMIT 1", (user,)
    ).scalar()
    return None if found is None else int(found)


# --- scheduled messages -------------------------------------------------------------------


def add(
    c: Connection,
    *,
    conversation: int,
    turn_id: int | None,
    payload: Payload,
    due_at: str,
    cause_key: str,
) -> int:
    """A pending message due at ``due_at`` in ``conversation``, in transaction ``c``; its id.
    A message of that ``cause_key`` there already is kept, and its id is returned."""
    stamped = now()
    found = c.execute(
        "INSERT INTO events (conversation_id, turn_id, type, status, payload, created_at, "
        "updated_at, due_at, cause_key) VALUES (?, ?, ?, 'pending', ?, ?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING RETURNING id",
        (conversation, turn_id, TYPE, _stored(payload), stamped, stamped, due_at, cause_key),
    ).scalar()
    if found is None:
        found = c.execute("SELECT id FROM events WHERE cause_key = ?", (cause_key,)).scalar()
    return int(found)


def messages_of(db: Database, user: str, *, everything: bool = False) -> list[ProactiveRow]:
    """The user's proactive messages, soonest first: those pending or running, or (with
    ``everything``) all."""
    final = "" if everything else " AND e.status IN ('pending', 'running')"
    rows = db.query(
        "SELECT e.* FROM events e JOIN conversations v ON v.id = e.conversation_id "
        f"WHERE v.user_id = ? AND e.type = ?{final} ORDER BY e.due_at, e.id",
        (user, TYPE),
    )
    return [_row(r) for r in rows]


def message(db: Database, user: str, event_id: int) -> ProactiveRow | None:
    """The user's proactive message ``event_id``; ``None`` when they have no such message."""
    row = db.one(
        "SELECT e.* FROM events e JOIN conversations v ON v.id = e.conversation_id "
        "WHERE v.user_id = ? AND e.type = ? AND e.id = ?",
        (user, TYPE, event_id),
    )
    return None if row is None else _row(row)


def cancel(c: Connection, event_id: int, reason: str) -> bool:
    """Mark the message ``cancelled`` with ``reason`` if it is pending or running (claimed);
    whether it was."""
    changed = c.execute(
        "UPDATE events SET status = 'cancelled', result = ?, updated_at = ?, "
        "claimed_until = NULL WHERE id = ? AND status IN ('pending', 'running') RETURNING id",
        (reason, now(), event_id),
    ).rows
    return bool(changed)


def pending_of_causes(c: Connection, user: str, cause_keys: tuple[str, str]) -> list[PendingRow]:
    """The user's pending messages of either cause key (an event's: the day before it, on the
    day)."""
    first, second = cause_keys
    rows = c.execute(
        "SELECT e.id, e.payload FROM events e JOIN conversations v ON v.id = e.conversation_id "
        "WHERE v.user_id = ? AND e.type = ? AND e.status = 'pending' AND e.cause_key IN (?, ?)",
        (user, TYPE, first, second),
    ).rows
    return [PendingRow(int(r["id"]), _payload(r["payload"])) for r in rows]


def cancel_with(c: Connection, event_id: int, reason: str, payload: Payload) -> None:
    """Mark the message ``cancelled`` with ``reason``, its payload now ``payload``."""
    c.execute(
        "UPDATE events SET status = 'cancelled', result = ?, payload = ?, "
        "updated_at = ? WHERE id = ?",
        (reason, _stored(payload), now(), event_id),
    )


def move(c: Connection, event_id: int, due_at: str, cause_key: str, payload: Payload) -> None:
    """The message now due at ``due_at``, of ``cause_key``, with ``payload``."""
    c.execute(
        "UPDATE events SET due_at = ?, cause_key = ?, payload = ?, updated_at = ? WHERE id = ?",
        (due_at, cause_key, _stored(payload), now(), event_id),
    )


# --- sending: what a claimed message becomes ----------------------------------------------


def settle(c: Connection, event_id: int, status: str, result: str) -> None:
    """The message final (``sent`` or ``dropped``) with ``result``, its claim let go."""
    c.execute(
        "UPDATE events SET status = ?, result = ?, updated_at = ?, claimed_until = NULL "
        "WHERE id = ?",
        (status, result, now(), event_id),
    )


def owner_of(c: Connection, event_id: int) -> OwnerRow | None:
    """The message's user, conversation and payload; ``None`` when it or its conversation is
    gone."""
    row = c.execute(
        "SELECT v.user_id, e.conversation_id, e.payload FROM events e "
        "JOIN conversations v ON v.id = e.conversation_id WHERE e.id = ?",
        (event_id,),
    ).one()
    if row is None:
        return None
    return OwnerRow(str(row["user_id"]), int(row["conversation_id"]), _payload(row["payload"]))


def hold(c: Connection, event_id: int, until: str) -> None:
    """A running (claimed) message's claim kept until ``until``."""
    c.execute(
        "UPDATE events SET claimed_until = ?, updated_at = ? WHERE id = ? AND status = 'running'",
        (until, now(), event_id),
    )


def payload_of(c: Connection, event_id: int) -> Payload:
    """The message's payload."""
    return _payload(c.execute("SELECT payload FROM events WHERE id = ?", (event_id,)).scalar())


def set_payload(c: Connection, event_id: int, payload: Payload) -> None:
    """The message's payload now ``payload``."""
    c.execute("UPDATE events SET payload = ? WHERE id = ?", (_stored(payload), event_id))


def release(c: Connection, event_id: int, due_at: str | None = None) -> None:
    """A running (claimed) message pending again, its claim let go; due at ``due_at`` if
    given."""
    moved = "" if due_at is None else ", due_at = ?"
    params: list[object] = [now()]
    if due_at is not None:
        params.append(due_at)
    c.execute(
        f"UPDATE events SET status = 'pending', claimed_until = NULL, updated_at = ?{moved} "
        "WHERE id = ? AND status = 'running'",
        (*params, event_id),
    )


def status_of(db: Database, event_id: int) -> StatusRow | None:
    """The message's stored status and result; ``None`` when there is no such message."""
    row = db.one("SELECT status, result FROM events WHERE id = ?", (event_id,))
    return None if row is None else StatusRow(str(row["status"]), str(row["result"]))


def kinds_sent_since(db: Database, user: str, since: str) -> list[Any]:
    """The ``kind`` in the payload of each proactive message sent to ``user`` at or after
    ``since`` (``None`` where a payload names none)."""
    rows = db.query(
        "SELECT e.payload FROM events e JOIN conversations v ON v.id = e.conversation_id "
        "WHERE v.user_id = ? AND e.type = ? AND e.status = 'sent' AND e.updated_at >= ?",
        (user, TYPE, since),
    )
    return [_payload(r["payload"]).get("kind") for r in rows]


def turn_running(db: Database, user: str) -> bool:
    """Whether a turn of the user is running."""
    return (
        db.one(
            "SELECT 1 AS x FROM turns t JOIN conversations v ON v.id = t.conversation_id "
            "WHERE v.user_id = ? AND t.status = 'running' LIMIT 1",
            (user,),
        )
        is not None
    )


def current_memories(db: Database, user: str, ids: Sequence[int]) -> list[int]:
    """Those of the memories ``ids`` (at least one) that are the user's and still current."""
    marks = ", ".join("?" * len(ids))
    rows = db.query(
        f"SELECT id FROM memories WHERE user_id = ? AND id IN ({marks}) AND valid_to IS NULL",
        (user, *ids),
    )
    return [int(r["id"]) for r in rows]


# --- the switches -------------------------------------------------------------------------


def forget_switches(c: Connection, user: str) -> None:
    """The user's switches gone, every kind's and the one for all."""
    c.execute("DELETE FROM proactive_switches WHERE user_id = ?", (user,))


def set_switch(c: Connection, user: str, kind: str, enabled: bool) -> None:
    """The user's switch for ``kind`` (:data:`ALL`: every kind) on or off."""
    c.execute(
        "INSERT INTO proactive_switches (user_id, kind, enabled, updated_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (user_id, kind) DO UPDATE SET "
        "enabled = excluded.enabled, updated_at = excluded.updated_at",
        (user, kind, int(enabled), now()),
    )


def switches_of(db: Database, user: str) -> dict[str, bool]:
    """The user's switches as stored: each kind they turned on or off (:data:`ALL` for all)."""
    rows = db.query("SELECT kind, enabled FROM proactive_switches WHERE user_id = ?", (user,))
    return {str(r["kind"]): bool(r["enabled"]) for r in rows}
