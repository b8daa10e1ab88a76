"""A reminder asked for in conversation ("remind me tomorrow at 9 to call my mother"): the
router names what and the words that say when; :func:`plan` (the enricher's) resolves the
time in the user's zone; the responder confirms it with the resolved time
(:func:`confirmation`), so the user sees at once what was understood; the turn's own
transaction schedules it (``engine/turn_store.py``), once per turn.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, time
from typing import Any

from novaberg.config import Settings
from novaberg.proactive.schedule import stamp, zone
from novaberg.proactive.when import resolve, spoken

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
    asked: dict[str, Any], settings: Settings, *, can_send: bool, at: datetime | None = None
) -> dict[str, Any]:
    """What the turn will do with the router's ``reminder``: ``outcome`` scheduled (with
    ``due_at``, ``local`` and ``repeat``), unresolved, or off."""
    what, when = str(asked["what"]).strip(), str(asked["when"]).strip()
    if not can_send:
        return {"outcome": "off", "what": what, "when": when}
    morning = time.fromisoformat(settings.proactive.morning)
    found = resolve(when, at or datetime.now(UTC), zone(settings), morning=morning)
    if found is None:
        return {"outcome": "unresolved", "what": what, "when": when}
    return {
        "outcome": "scheduled",
        "what": what,
        "when": when,
        "due_at": stamp(found.due),
        "local": found.local.isoformat(timespec="minutes"),
        "repeat": found.repeat,
    }


def confirmation(planned: dict[str, Any], language: str) -> str:
    """The responder's rule for the turn's reminder (the user's words quoted as data)."""
    lang = "de" if language == "de" else "en"
    what = json.dumps(planned.get("what", ""), ensure_ascii=False)
    if planned["outcome"] == "off":
        return OFF[lang]
    if planned["outcome"] == "unresolved":
        return UNREAD[lang].format(when=json.dumps(planned.get("when", ""), ensure_ascii=False))
    repeat = planned.get("repeat") or ""
    again = REPEATS[lang].get(repeat.split(":")[0], "") if repeat else ""
    local = datetime.fromisoformat(planned["local"])
    return SCHEDULED[lang].format(when=spoken(local, lang), what=what, repeat=again)


def trace(planned: dict[str, Any] | None) -> dict[str, Any] | None:
    """For the turn's trace: no words of the user's (they may be forgotten)."""
    if planned is None:
        return None
    return {k: planned.get(k) for k in ("outcome", "due_at", "repeat", "event_id")}
