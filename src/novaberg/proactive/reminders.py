"""A reminder asked for in conversation ("remind me tomorrow at 9 to call my mother"): the
router names what and the words that say when; :func:`plan` (the enricher's) resolves the
time in the user's zone; the responder confirms it with the resolved time
(:func:`confirmation`), so the user sees at once what was understood; the turn's own
transaction schedules it (``engine/turn_store.py``), once per turn.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, time

from novaberg.config import Settings
from novaberg.graph.channels import Reminder, ReminderPlan
from novaberg.proactive.schedule import stamp, zone
from novaberg.proactive.when import resolve, spoken
from novaberg.trace_document import ReminderTrace

SCHEDULED = {
    "en": "You will remind the user on {when} of {what}{repeat}: it is scheduled. Confirm it "
    "with exactly that day and time.",
    "de": "Du wirst die Person am {when} an {what} erinnern{repeat}: das ist eingeplant. "
    "Bestätige es mit genau diesem Tag und dieser Uhrzeit.",
}
REPEATS = {
    "en": {"daily": ", and every day after", "weekly": ", and every week after"},
    "de": {"daily": ", und danach jeden Tag", "weekly": ", und danach jede Woche"},
}
UNREAD = {
    "en": "The user asked for a reminder, but you could not tell when from {when}: nothing is "
    "scheduled. Ask them for the day and the time.",
    "de": "Die Person möchte erinnert werden, aber aus {when} geht nicht hervor, wann: nichts "
    "ist eingeplant. Frag nach Tag und Uhrzeit.",
}
OFF = {
    "en": "The user asked for a reminder, but you cannot send messages of your own in this "
    "setup (proactive messages are off, or the model is the small embedded one): nothing is "
    "scheduled. Tell them so.",
    "de": "Die Person möchte erinnert werden, aber du kannst in dieser Einrichtung nicht von "
    "dir aus schreiben (proaktive Nachrichten sind aus, oder das Modell ist das kleine "
    "eingebettete): nichts ist eingeplant. Sag es ihr.",
}


def plan(
    asked: Reminder, settings: Settings, *, can_send: bool, at: datetime | None = None
) -> ReminderPlan:
    """What the turn will do with the router's ``reminder``: scheduled (with when it is due),
    unresolved, or off."""
    what, when = asked.what.strip(), asked.when.strip()
    if not can_send:
        return ReminderPlan("off", what, when)
    morning = time.fromisoformat(settings.proactive.morning)
    found = resolve(when, at or datetime.now(UTC), zone(settings), morning=morning)
    if found is None:
        return ReminderPlan("unresolved", what, when)
    return ReminderPlan("scheduled", what, when, found)


def confirmation(planned: ReminderPlan, language: str) -> str:
    """The responder's rule for the turn's reminder (the user's words quoted as data)."""
    lang = "de" if language == "de" else "en"
    what = json.dumps(planned.what, ensure_ascii=False)
    if planned.outcome == "off":
        return OFF[lang]
    if planned.at is None:
        return UNREAD[lang].format(when=json.dumps(planned.when, ensure_ascii=False))
    repeat = planned.at.repeat or ""
    again = REPEATS[lang].get(repeat.split(":")[0], "") if repeat else ""
    return SCHEDULED[lang].format(when=spoken(planned.at.local, lang), what=what, repeat=again)


def trace(planned: ReminderPlan) -> ReminderTrace:
    """For the turn's trace: no words of the user's (they may be forgotten); the event's id
    is added once it is scheduled."""
    at = planned.at
    return ReminderTrace(
        outcome=planned.outcome,
        due_at=stamp(at.due) if at is not None else None,
        repeat=at.repeat if at is not None else None,
        event_id=None,
    )
