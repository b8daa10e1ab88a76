"""The event queue: self-triggers and memory jobs, persisted per conversation.

A log line says "enqueued" only after the database accepted the event, and "delivered" only
after the follow-up it produced was stored (../shared/seeds/000, postscript: a self-trigger
that was never declared vanished while the log said it had been set).

An event runs only after this process has **claimed** it: one ``UPDATE … WHERE id = (the
oldest claimable) … RETURNING`` sets it ``running`` with ``claimed_by`` (host and process id)
and ``claimed_until`` (a lease), so that two processes on one home (or many workers on one
PostgreSQL, where the inner select takes ``FOR UPDATE SKIP LOCKED``) never run one event
twice. Claimable are ``pending`` events, and ``running`` ones whose claim is gone: the lease
ran out, the claiming process on this host is dead (a crash), or the event was left running
without a claim (before claims existed). Jobs are idempotent, so one that runs again after a
crash changes nothing twice.
"""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from novaberg.storage.db import Database, now, process_name
from novaberg.storage.sql import Connection

log = logging.getLogger("novaberg")

LEASE_S = 1800.0
"""How long a claim holds without its process being known dead: longer than any job (a few
model calls, each bounded by ``timeouts.total_s``). On this host a dead claimer is noticed at
once; a claim of a process on another host that died is taken again when its lease ran out."""


def claimant() -> str:
    """Who claims: ``host:pid``."""
    return process_name()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    return True


@dataclass(frozen=True)
class Event:
    id: int
    conversation_id: int
    turn_id: int | None
    type: str
    status: str
    payload: dict[str, Any]
    due_at: str | None = None
    """When a proactive message is due (UTC); ``None`` for every other event."""


class EventQueue:
    def __init__(self, db: Database, lease_s: float = LEASE_S) -> None:
        self.db = db
        self.lease_s = lease_s
        self.me = claimant()

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
        """Events of these types not done yet, oldest first: pending ones, and running ones
        (claimed by a process now, or left running by one that died)."""
        marks = ", ".join("?" for _ in types)
        rows = self.db.query(
            f"SELECT * FROM events WHERE status IN ('pending', 'running') AND type IN ({marks}) "
            "ORDER BY id LIMIT ?",
            (*types, limit),
        )
        return [_event(r) for r in rows]

    def claim(
        self,
        types: tuple[str, ...],
        turn_id: int | None = None,
        settled_before: str | None = None,
        user: str | None = None,
        due_by: str | None = None,
    ) -> Event | None:
        """Claim the oldest claimable event of these types (of one turn, if given) for this
        process, atomically; ``None`` when there is none. ``settled_before`` (a timestamp):
        only events whose turn ended (done, failed or aborted) before then — what no running
        turn will still drain itself. ``user``: only events of that user's conversations.
        ``due_by`` (a timestamp): only events due then or before (``due_at``), soonest
        first."""
        self._release_dead()
        stamp = now()
        until = (datetime.now(UTC) + timedelta(seconds=self.lease_s)).isoformat(
            timespec="milliseconds"
        )
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
            scope += (
                " AND conversation_id IN (SELECT c.id FROM conversations c WHERE c.user_id = ?)"
            )
        order = "id"
        if due_by is not None:
            scope += " AND due_at IS NOT NULL AND due_at <= ?"
            order = "due_at, id"
        lock = " FOR UPDATE SKIP LOCKED" if self.db.dialect == "postgres" else ""
        params: list[Any] = [self.me, until, stamp, *types, stamp]
        if turn_id is not None:
            params.append(turn_id)
        if settled_before is not None:
            params.append(settled_before)
        if user is not None:
            params.append(user)
        if due_by is not None:
            params.append(due_by)
        params.append(stamp)
        with self.db.transaction() as c:
            row = c.execute(
                "UPDATE events SET status = 'running', claimed_by = ?, claimed_until = ?, "
                "updated_at = ? WHERE id = (SELECT id FROM events "
                f"WHERE type IN ({marks}) AND {claimable}{scope} ORDER BY {order} LIMIT 1{lock}) "
                f"AND {claimable} RETURNING *",
                params,
            ).one()
        return None if row is None else _event(row)

    def _release_dead(self) -> None:
        """Running events claimed by a process of this host that is gone become claimable."""
        host = self.me.rsplit(":", 1)[0]
        rows = self.db.query(
            "SELECT id, claimed_by FROM events WHERE status = 'running' "
            "AND claimed_until IS NOT NULL"
        )
        for r in rows:
            owner, _, pid = str(r["claimed_by"]).rpartition(":")
            if owner != host or not pid.isdigit() or alive(int(pid)):
                continue
            with self.db.transaction() as c:
                c.execute(
                    "UPDATE events SET claimed_until = NULL "
                    "WHERE id = ? AND status = 'running' AND claimed_by = ?",
                    (r["id"], r["claimed_by"]),
                )
            log.info("event %d: the process that claimed it is gone; it may run again", r["id"])

    def release_mine(self) -> int:
        """Make the events this process holds claimable again at once (it stops without
        finishing them); return how many."""
        with self.db.transaction() as c:
            released = c.execute(
                "UPDATE events SET claimed_until = NULL WHERE status = 'running' "
                "AND claimed_by = ? AND claimed_until IS NOT NULL RETURNING id",
                (self.me,),
            ).rows
        return len(released)

    def mark(
        self, event_id: int, status: str, result: str = "", c: Connection | None = None
    ) -> None:
        """Set an event's status and result; its claim ends (``claimed_by`` stays as a record
        of who ran it)."""
        if c is None:
            with self.db.transaction() as tx:
                self.mark(event_id, status, result, tx)
            return
        c.execute(
            "UPDATE events SET status = ?, result = ?, updated_at = ?, claimed_until = NULL "
            "WHERE id = ?",
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
        r.get("due_at"),
    )
