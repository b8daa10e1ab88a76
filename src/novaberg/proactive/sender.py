"""Sending what came due: run by every ``novaberg serve`` and ``novaberg worker`` sweep.

Each due message is **claimed** first (:meth:`~novaberg.jobs.events.EventQueue.claim` with
``due_by``: one atomic ``UPDATE … RETURNING``, ``FOR UPDATE SKIP LOCKED`` on PostgreSQL), so
one process sends it, once; a claim whose process died is taken again (at once on this host,
after its lease on another). Then, in this order:

- the user turned it off (``novaberg proactive off [KIND]``): dropped, with the reason;
- it is more than ``proactive.max_late_h`` late (no process ran while it came due): dropped;
  within that, it is sent late, once — the same for every kind;
- a turn of the user is running: it waits (released, tried at the next sweep): the turn goes
  first;
- an event's message whose timeline entry was retracted (or replaced, and the message not
  moved with it): dropped; a check-in whose concern left the adaptive profile: dropped;
- not a reminder the user asked for, and inside ``proactive.quiet_hours``: it waits until
  they end (its ``due_at`` moves there);
- not a reminder, and the user got ``proactive.max_per_day`` such messages today (in their
  zone): dropped;
- else its turn runs, through the engine's turn service (the door of ``/v1``, ``/api`` and
  MCP), as origin ``proactive``, in the user's latest conversation; that turn's transaction
  marks it sent (or dropped, when its answer was withheld: :mod:`novaberg.proactive.due`).
  A turn that fails leaves it pending for the next sweep; the third failure drops it.

Nothing is sent on the embedded model, nor with ``proactive.enabled`` off: what is scheduled
stays scheduled. Every log line says what happened only after it was stored.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass
from datetime import UTC, datetime, time, timedelta
from typing import TYPE_CHECKING, Literal

from novaberg.errors import ConversationBusy, NovabergError, QueueFull, error_kind
from novaberg.jobs.events import Event
from novaberg.proactive import due as due_module
from novaberg.proactive.due import Due
from novaberg.proactive.schedule import latest_conversation, stamp, switches, zone
from novaberg.proactive.when import wall_time
from novaberg.storage import proactive as store
from novaberg.storage.proactive import TYPE

if TYPE_CHECKING:
    from zoneinfo import ZoneInfo

    from novaberg.engine.core import Engine
    from novaberg.engine.service import TurnService

log = logging.getLogger("novaberg")
ATTEMPTS = 3
HOLD_S = 1.0
"""How long a message that must wait (a turn of its user runs) stays claimed: less than a
sweep's interval, so the next sweep tries it again."""


@dataclass(frozen=True)
class Outcome:
    event_id: int
    status: Literal["sent", "dropped", "waiting"]
    reason: str
    turn_id: int | None = None


def active(engine: Engine) -> bool:
    """Whether this process sends proactive messages at all (the engine turns them off on
    the embedded model: :func:`~novaberg.engine.embedded_policy.embedded_defaults`)."""
    return engine.settings.proactive.enabled


async def send_due(
    engine: Engine, service: TurnService, *, at: datetime | None = None, limit: int = 20
) -> list[Outcome]:
    """Claim and handle the messages due at ``at`` (default now), at most ``limit``, and
    return when all have ended. The claims run one after another; then each user's messages
    are handled in their order, one at a time (so the daily cap and "a turn of the user is
    running" see the one before), while different users' run at once: a message due now
    never waits for another user's turn."""
    if not active(engine):
        return []
    moment = at or datetime.now(UTC)
    claimed: dict[str | None, list[Event]] = {}
    for _ in range(limit):
        event = await engine.db.run(engine.events.claim, (TYPE,), None, None, None, stamp(moment))
        if event is None:
            break
        user = await engine.db.run(engine.db.conversation_user, event.conversation_id)
        claimed.setdefault(user, []).append(event)
    per_user = [
        _send_in_turn(engine, service, user, events, moment) for user, events in claimed.items()
    ]
    return [outcome for outcomes in await asyncio.gather(*per_user) for outcome in outcomes]


async def _send_in_turn(
    engine: Engine, service: TurnService, user: str | None, events: list[Event], at: datetime
) -> list[Outcome]:
    """One user's claimed messages, one after another."""
    outcomes = []
    for event in events:
        decided = await _decide(engine, event, user, at)
        if isinstance(decided, tuple):
            decided = await _send(engine, service, *decided)
        outcomes.append(decided)
    return outcomes


async def _decide(
    engine: Engine, event: Event, user: str | None, at: datetime
) -> Outcome | tuple[Due, str]:
    """What becomes of a claimed message of ``user`` (``None``: its conversation is gone):
    dropped or waiting (its outcome, recorded), or sent (its due message and user: the
    caller runs its turn)."""
    due = Due.of(event)
    db = engine.db
    if user is None:
        return await _drop(engine, due, "its conversation is gone")
    settings = engine.settings.proactive
    if not (await db.run(switches, db, user)).get(due.kind, True):
        return await _drop(engine, due, f"{due.kind} messages are off (novaberg proactive on)")
    if due.kind == "event" and not await db.run(_event_current, engine, user, due.sources):
        return await _drop(
            engine, due, "its event is no longer on the timeline (retracted, or replaced)"
        )
    if due.kind == "checkin" and not await db.run(_concern_current, engine, user, due.text):
        return await _drop(engine, due, "the concern is no longer in the adaptive profile")
    late = at - datetime.fromisoformat(str(event.due_at))
    if late > timedelta(hours=settings.max_late_h):
        hours = late.total_seconds() / 3600
        limit = f"proactive.max_late_h ({settings.max_late_h:g})"
        return await _drop(engine, due, f"{hours:.1f} h late, more than {limit}")
    if await db.run(_turn_running, engine, user):
        return await _wait(engine, due, None, "a turn of the user is running; it goes first")
    where = zone(engine.settings)
    if due.kind != "reminder":
        quiet_end = _quiet_end(settings.quiet_hours, at, where)
        if quiet_end is not None:
            return await _wait(engine, due, quiet_end, "inside quiet hours")
        sent = await db.run(_sent_today, engine, user, at, where)
        if sent >= settings.max_per_day:
            return await _drop(engine, due, f"{sent} sent today already (proactive.max_per_day)")
    return due, user


async def _send(engine: Engine, service: TurnService, due: Due, user: str) -> Outcome:
    from novaberg.engine.service import Failed, Stored, TurnAsk

    db = engine.db
    conversation = await db.run(_latest, engine, user)
    task = due.task(engine.settings.language)
    try:
        turn = service.admit(TurnAsk(user, task, conversation, proactive=due))
    except (ConversationBusy, QueueFull) as exc:
        return await _wait(engine, due, None, f"not admitted now ({error_kind(exc)})")
    async for step in turn.events():
        if isinstance(step, Stored):
            found = await db.run(_status, engine, due.event_id)
            status: Literal["sent", "dropped"] = "sent" if found[0] == "sent" else "dropped"
            log.info("proactive message %d %s (turn %d)", due.event_id, status, step.result.turn_id)
            return Outcome(due.event_id, status, found[1], step.result.turn_id)
        if isinstance(step, Failed):
            turn.leave()
            return await _failed(engine, due, step.error)
    return await _failed(engine, due, NovabergError("the turn ended without a result"))


async def _failed(engine: Engine, due: Due, error: BaseException) -> Outcome:
    kind = error_kind(error)
    if due.attempts + 1 >= ATTEMPTS:
        return await _drop(engine, due, f"its turn failed {ATTEMPTS} times (last: {kind})")
    log.warning("proactive message %d: its turn failed (%s); tried again later", due.event_id, kind)
    await engine.db.run(_release, engine, due.event_id, None, due.attempts + 1)
    return Outcome(due.event_id, "waiting", f"its turn failed ({kind})")


async def _drop(engine: Engine, due: Due, reason: str) -> Outcome:
    def write() -> None:
        with engine.db.transaction() as c:
            due_module.record(c, due, "dropped", reason)

    await engine.db.run(write)
    log.info("proactive message %d dropped: %s", due.event_id, reason)
    return Outcome(due.event_id, "dropped", reason)


async def _wait(engine: Engine, due: Due, until: datetime | None, reason: str) -> Outcome:
    """Not now: moved to ``until`` (pending again), or, without one, held for
    :data:`HOLD_S` (its claim kept that long), so that this sweep claims the next message
    instead of this one again, and a later sweep tries it anew."""
    if until is None:
        await engine.db.run(_hold, engine, due.event_id)
    else:
        await engine.db.run(_release, engine, due.event_id, until)
    log.info("proactive message %d waits: %s", due.event_id, reason)
    return Outcome(due.event_id, "waiting", reason)


def _hold(engine: Engine, event_id: int) -> None:
    """Blocking: the claim of this process kept for :data:`HOLD_S` more seconds."""
    until = datetime.now(UTC) + timedelta(seconds=HOLD_S)
    with engine.db.transaction() as c:
        store.hold(c, event_id, stamp(until))


def _release(
    engine: Engine, event_id: int, until: datetime | None, attempts: int | None = None
) -> None:
    """Blocking: pending again (claimable at the next sweep), moved to ``until`` if given."""
    with engine.db.transaction() as c:
        if attempts is not None:
            payload = store.payload_of(c, event_id)
            payload["attempts"] = attempts
            store.set_payload(c, event_id, payload)
        store.release(c, event_id, None if until is None else stamp(until))


def _status(engine: Engine, event_id: int) -> tuple[str, str]:
    row = store.status_of(engine.db, event_id)
    return ("", "") if row is None else (row.status, row.result)


def _latest(engine: Engine, user: str) -> int:
    with engine.db.transaction() as c:
        return latest_conversation(c, user)


def _concern_current(engine: Engine, user: str, concern: str) -> bool:
    """Whether the adaptive profile still holds ``concern`` (up to case and spacing)."""
    from novaberg.memory.store import MemoryStore
    from novaberg.text import same_text

    adaptive = MemoryStore(engine.db).profile(user).get("adaptive")
    wanted = same_text(concern)
    return adaptive is not None and any(same_text(s.text) == wanted for s in adaptive.statements)


def _event_current(engine: Engine, user: str, sources: tuple[int, ...]) -> bool:
    """Whether the timeline entries an event's message rests on are all still current (one
    corrected or told again has moved its messages to its new version already)."""
    if not sources:
        return True
    current = store.current_memories(engine.db, user, sources)
    return len(current) == len(set(sources))


def _turn_running(engine: Engine, user: str) -> bool:
    return store.turn_running(engine.db, user)


def _sent_today(engine: Engine, user: str, at: datetime, where: ZoneInfo) -> int:
    """Messages other than reminders sent to ``user`` since their local midnight."""
    local = at.astimezone(where)
    midnight = datetime.combine(local.date(), time(0, 0), tzinfo=where)
    kinds = store.kinds_sent_since(engine.db, user, stamp(midnight))
    return sum(kind != "reminder" for kind in kinds)


def _quiet_end(quiet: str, at: datetime, where: ZoneInfo) -> datetime | None:
    """When the quiet hours ``HH:MM-HH:MM`` that ``at`` falls in end; ``None`` outside."""
    if not quiet:
        return None
    start_text, _, end_text = quiet.partition("-")
    start, end = time.fromisoformat(start_text), time.fromisoformat(end_text)
    local = at.astimezone(where)
    clock = local.time().replace(tzinfo=None)
    if start == end:
        return None
    inside = start <= clock < end if start < end else clock >= start or clock < end
    if not inside:
        return None
    day = local.date() if clock < end else local.date() + timedelta(days=1)
    return wall_time(day, end, where)
