"""What Nova will write first, and when: proactive messages as events of type ``proactive``.

A scheduled message is a row of ``events`` (the queue of self-triggers and memory jobs) with a
``due_at`` in UTC, a ``cause_key`` that makes scheduling idempotent per cause (a turn that
asked for a reminder schedules it once, however often its transaction is retried), and a
payload of what it is about: ``kind`` (``reminder`` for now; ``event``, ``checkin`` and
``followup`` are the contract's other kinds), the user's ``text``, the ``cause`` in words
that name no user text ("asked in turn 12", "novaberg proactive remind"), the ``repeat``
rule and the wall time it is due at in the user's zone. Its conversation is the user's
latest when it was scheduled; it is sent into the latest when it is due.

Statuses: ``pending`` and ``running`` (claimed by a sender) show as ``scheduled``; ``sent``,
``dropped`` (its reason in ``result``) and ``cancelled`` are final. The per-user switches
(``novaberg proactive on|off [KIND]``) are rows of ``proactive_switches``. Every function
here is blocking: call it in a database worker (``await db.run``).
"""

from __future__ import annotations

import functools
import json
import uuid
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any
from zoneinfo import ZoneInfo

from novaberg.config import PROACTIVE_KINDS, Settings
from novaberg.errors import UsageError
from novaberg.proactive.when import When
from novaberg.storage import conversations
from novaberg.storage import proactive as store
from novaberg.storage.db import Database, now
from novaberg.storage.proactive import ALL, Payload, ProactiveRow
from novaberg.storage.sql import Connection

SHOWN = {
    "pending": "scheduled",
    "running": "scheduled",
    "sent": "sent",
    "dropped": "dropped",
    "cancelled": "cancelled",
}


def zone(settings: Settings) -> ZoneInfo:
    """``proactive.timezone``, else the machine's zone (else UTC). Each name's zone file is
    read once (the engine reads it in a thread at open: :func:`_zone` caches it)."""
    return _zone(settings.proactive.timezone)


@functools.cache
def _zone(name: str) -> ZoneInfo:
    if not name:
        import tzlocal

        try:
            name = tzlocal.get_localzone_name() or "UTC"
        except Exception:  # no zone configured on the machine: UTC, as its clock
            name = "UTC"
    try:
        return ZoneInfo(name)
    except Exception:
        return ZoneInfo("UTC")


def stamp(moment: datetime) -> str:
    """A UTC instant in the format of :func:`~novaberg.storage.db.now` (compared as text)."""
    return moment.astimezone(ZoneInfo("UTC")).isoformat(timespec="milliseconds")


@dataclass(frozen=True)
class Scheduled:
    id: int
    kind: str
    due_at: str
    status: str
    """As the contract shows it: scheduled, sent, dropped or cancelled."""
    cause: str
    text: str
    local: str
    """The wall time it is due at, in the user's zone when it was scheduled."""
    repeat: str | None
    reason: str
    """Why it was dropped or cancelled, or which turn sent it."""
    turn_id: int | None

    def view(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "kind": self.kind,
            "due_at": self.due_at,
            "status": self.status,
            "cause": self.cause,
            "text": self.text,
            "local": self.local,
            "repeat": self.repeat,
            "reason": self.reason,
        }


def from_row(row: ProactiveRow) -> Scheduled:
    payload = row.payload
    return Scheduled(
        id=row.id,
        kind=str(payload.get("kind", "reminder")),
        due_at=row.due_at,
        status=SHOWN.get(row.status, row.status),
        cause=str(payload.get("cause", "")),
        text=str(payload.get("text", "")),
        local=str(payload.get("local", "")),
        repeat=payload.get("repeat"),
        reason=row.result,
        turn_id=row.turn_id,
    )


def latest_conversation(c: Connection, user: str) -> int:
    """The conversation the user spoke in last; their newest one; else a new one."""
    found = store.last_spoken_in(c, user)
    if found is None:
        found = store.newest_conversation(c, user)
    if found is None:
        found = conversations.create(c, user, now())
    return found


def schedule(
    c: Connection,
    user: str,
    text: str,
    when: When,
    *,
    cause: str,
    cause_key: str | None = None,
    kind: str = "reminder",
    turn_id: int | None = None,
    conversation: int | None = None,
    ahead: int = 0,
    sources: list[int] | None = None,
) -> int:
    """Schedule one message inside transaction ``c``; its id. ``cause_key``: a second call for
    the same cause schedules nothing and returns the first one's id (default: a new cause).
    ``ahead``: for an event, how many days before it this message is."""
    if kind not in PROACTIVE_KINDS:
        raise UsageError(f"Unknown kind {kind!r}: one of {', '.join(PROACTIVE_KINDS)}.")
    key = cause_key or f"{kind}:{uuid.uuid4().hex}"
    where = conversation if conversation is not None else latest_conversation(c, user)
    payload: Payload = {
        "kind": kind,
        "text": text,
        "cause": cause,
        "repeat": when.repeat,
        "local": when.local.isoformat(timespec="minutes"),
        "zone": str(when.local.tzinfo),
    }
    if ahead:
        payload["ahead"] = ahead  # an event's message the day(s) before it
    if sources:
        payload["sources"] = sorted(sources)  # the memories it rests on (a concern, an event)
    return store.add(
        c,
        conversation=where,
        turn_id=turn_id,
        payload=payload,
        due_at=stamp(when.due),
        cause_key=key,
    )


def listing(db: Database, user: str, *, everything: bool = False) -> list[Scheduled]:
    """The user's proactive messages, soonest first: those still scheduled, or (with
    ``everything``) all, the final ones too."""
    return [from_row(r) for r in store.messages_of(db, user, everything=everything)]


def get(db: Database, user: str, event_id: int) -> Scheduled | None:
    row = store.message(db, user, event_id)
    return None if row is None else from_row(row)


def cancel(db: Database, user: str, event_id: int) -> Scheduled | None:
    """Cancel one of the user's scheduled messages (kept, as ``cancelled``); ``None`` if they
    have no such message. One already sent, dropped or cancelled is :class:`UsageError`."""
    found = get(db, user, event_id)
    if found is None:
        return None
    with db.transaction() as c:
        changed = store.cancel(c, event_id, "cancelled by the user")
    if not changed:
        raise UsageError(f"Message {event_id} is {found.status} already; nothing to cancel.")
    return get(db, user, event_id)


def switch(db: Database, user: str, enabled: bool, kind: str | None = None) -> None:
    """Turn the user's proactive messages on or off: all (``kind`` None) or one kind."""
    if kind is not None and kind not in PROACTIVE_KINDS:
        raise UsageError(f"Unknown kind {kind!r}: one of {', '.join(PROACTIVE_KINDS)}.")
    with db.transaction() as c:
        if kind is None:  # all: one switch for everything, the kinds' own ones forgotten
            store.forget_switches(c, user)
        store.set_switch(c, user, kind or ALL, enabled)


def switches(db: Database, user: str) -> dict[str, bool]:
    """Whether each kind is on for the user (their switches over the default: on)."""
    chosen = store.switches_of(db, user)
    everything = chosen.get(ALL, True)
    return {kind: chosen.get(kind, everything) for kind in PROACTIVE_KINDS}


REMINDER_TEXT_LIMIT = 500


def remind(
    db: Database,
    settings: Settings,
    user: str,
    text: str,
    when_words: str,
    *,
    cause: str,
    at: datetime | None = None,
) -> Scheduled:
    """A reminder set by hand (``novaberg proactive remind``, ``POST /api/proactive``):
    ``when_words`` read in the user's zone; :class:`UsageError` saying what is wrong."""
    from datetime import UTC, time

    from novaberg.proactive.when import resolve
    from novaberg.text import is_blank

    if is_blank(text):
        raise UsageError("A reminder needs its text: what to remind you of.")
    if len(text) > REMINDER_TEXT_LIMIT:
        raise UsageError(f"A reminder's text is at most {REMINDER_TEXT_LIMIT} characters.")
    morning = time.fromisoformat(settings.proactive.morning)
    found = resolve(when_words, at or datetime.now(UTC), zone(settings), morning=morning)
    if found is None:
        raise UsageError(
            f"Cannot tell a time to come from {json.dumps(when_words, ensure_ascii=False)}: "
            "use ISO 8601 (2026-06-02T09:00) or words like 'tomorrow at 9', 'on Friday at "
            "18:00', 'in 2 hours', 'every Monday at 8:30'."
        )
    with db.transaction() as c:
        made = schedule(c, user, text.strip(), found, cause=cause)
    scheduled = get(db, user, made)
    assert scheduled is not None
    return scheduled


def event_key(memory_id: int, ahead: int) -> str:
    """The cause key of the message ``ahead`` days before the timeline event ``memory_id``."""
    return f"event:{memory_id}:{ahead}"


def follow_event(c: Connection, user: str, old: int, new: int, text: str, day: date) -> list[str]:
    """In the transaction that replaced the timeline event ``old`` by ``new`` (a correction,
    or the same event told again, perhaps of another day): the messages still scheduled for
    ``old`` become ``new``'s, with its words, due on ``day`` (less their days ahead) at the
    same wall time in the same zone; one whose new time has passed is cancelled. A message
    being sent right now (claimed) is left to its sender, which drops it: its event is no
    longer current. What was done, in words, per message."""
    from datetime import UTC, time, timedelta

    from novaberg.proactive.when import wall_time

    rows = store.pending_of_causes(c, user, (event_key(old, 0), event_key(old, 1)))
    done = []
    for row in rows:
        ahead = int(row.payload.get("ahead", 0))
        where = ZoneInfo(str(row.payload.get("zone", "UTC")))
        clock = datetime.fromisoformat(str(row.payload["local"])).time().replace(tzinfo=None)
        local = wall_time(day - timedelta(days=ahead), time(clock.hour, clock.minute), where)
        payload: Payload = {
            **row.payload,
            "text": text,
            "sources": [new],
            "local": local.isoformat(timespec="minutes"),
            "cause": f"the timeline: memory {new} on {day.isoformat()}",
        }
        if local <= datetime.now(UTC):
            reason = f"its event moved to {day.isoformat()}, already past"
            store.cancel_with(c, row.id, reason, payload)
            done.append(f"message {row.id} cancelled (its new day has passed)")
            continue
        store.move(c, row.id, stamp(local), event_key(new, ahead), payload)
        done.append(f"message {row.id} moved to {local.isoformat(timespec='minutes')}")
    return done
