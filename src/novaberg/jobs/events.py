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
crash changes nothing twice. The statements are :mod:`novaberg.storage.events`'s.
"""

from __future__ import annotations

import logging
import os
from datetime import UTC, datetime, timedelta

from novaberg.storage import events as stored
from novaberg.storage.db import Database, now, process_name
from novaberg.storage.events import Event, EventPayload
from novaberg.storage.sql import Connection

__all__ = ["LEASE_S", "Event", "EventQueue", "alive", "claimant"]  # Event: the stored row

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
        payload: EventPayload,
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
        return stored.add(c, conversation_id, turn_id, type, payload)

    def pending(self, turn_id: int) -> list[Event]:
        return stored.pending_of_turn(self.db, turn_id)

    def unfinished(self, types: tuple[str, ...], limit: int = 100) -> list[Event]:
        """Events of these types not done yet, oldest first: pending ones, and running ones
        (claimed by a process now, or left running by one that died)."""
        return stored.unfinished(self.db, types, limit)

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
        with self.db.transaction() as c:
            return stored.claim(
                c,
                types,
                claimant=self.me,
                stamp=stamp,
                until=until,
                turn_id=turn_id,
                settled_before=settled_before,
                user=user,
                due_by=due_by,
            )

    def _release_dead(self) -> None:
        """Running events claimed by a process of this host that is gone become claimable."""
        host = self.me.rsplit(":", 1)[0]
        for held in stored.running_claims(self.db):
            owner, _, pid = str(held.claimed_by).rpartition(":")
            if owner != host or not pid.isdigit() or alive(int(pid)):
                continue
            with self.db.transaction() as c:
                stored.unclaim(c, held)
            log.info("event %d: the process that claimed it is gone; it may run again", held.id)

    def release_mine(self) -> int:
        """Make the events this process holds claimable again at once (it stops without
        finishing them); return how many."""
        with self.db.transaction() as c:
            return stored.unclaim_all(c, self.me)

    def mark(
        self, event_id: int, status: str, result: str = "", c: Connection | None = None
    ) -> None:
        """Set an event's status and result; its claim ends (``claimed_by`` stays as a record
        of who ran it)."""
        if c is None:
            with self.db.transaction() as tx:
                self.mark(event_id, status, result, tx)
            return
        stored.mark(c, event_id, status, result)
