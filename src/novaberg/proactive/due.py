"""A proactive message that came due, as its turn sees it, and what its turn's transaction
records: sent (with the next one of a repeating reminder), or withheld and why.

The turn is one of origin ``proactive``: its "message" is the task below (never stored as a
user message, never shown), the responder gets a rule of its own, the judges check the
answer like any other, salience and the memory write do nothing. Its answer is withheld —
the turn is stored, but no message — when the model said there is nothing worth saying
(:data:`NOTHING`, which therefore never reaches a user) or a judge still asked for a revision
after the corrector: a message the user did not ask for must not intrude. A repeating
reminder's next one is scheduled in the same transaction that ends this one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from zoneinfo import ZoneInfo

from novaberg.graph.state import TurnState
from novaberg.jobs.events import Event
from novaberg.proactive.schedule import schedule
from novaberg.proactive.when import When, next_after
from novaberg.storage import proactive as store
from novaberg.storage.sql import Connection

NOTHING = "NOTHING"
"""What the responder answers when a message has nothing worth saying: never sent."""

TASK = {
    "en": {
        "reminder": "Write to the user now, unasked: they asked you to remind them, for {when}, "
        "of: {text}",
        "event": "Write to the user now, unasked: today is the day of something they told you "
        "about: {text}",
        "event_ahead": "Write to the user now, unasked: tomorrow is the day of something they "
        "told you about: {text}",
        "checkin": "Write to the user now, unasked: a few days ago this was on their mind: "
        "{text}. Ask gently how it is going.",
    },
    "de": {
        "reminder": "Schreib der Person jetzt von dir aus: Sie hat dich gebeten, sie für {when} "
        "an Folgendes zu erinnern: {text}",
        "event": "Schreib der Person jetzt von dir aus: Heute ist der Tag von etwas, das sie dir "
        "erzählt hat: {text}",
        "event_ahead": "Schreib der Person jetzt von dir aus: Morgen ist der Tag von etwas, das "
        "sie dir erzählt hat: {text}",
        "checkin": "Schreib der Person jetzt von dir aus: Vor ein paar Tagen beschäftigte sie "
        "das: {text}. Frag behutsam, wie es steht.",
    },
}
RULE = {
    "en": "This turn's message is not from the user: you write first, unasked. Write one short, "
    "warm message in your own voice about what the task names, without repeating the task. If "
    f"there is nothing worth saying, answer only {NOTHING}.",
    "de": "Die Nachricht dieses Zugs ist nicht von der Person: Du schreibst zuerst, ungefragt. "
    "Schreib eine kurze, warme Nachricht in deiner eigenen Stimme über das, was die Aufgabe "
    f"nennt, ohne die Aufgabe zu wiederholen. Gibt es nichts Sinnvolles zu sagen, antworte nur "
    f"{NOTHING}.",
}


@dataclass(frozen=True)
class Due:
    event_id: int
    kind: str
    text: str
    local: str
    """The wall time it was due at (ISO, with its offset)."""
    zone: str
    repeat: str | None
    asked_in: int | None
    """The turn that asked for it, if a turn did."""
    attempts: int = 0
    ahead: int = 0
    """For an event: the message the day before it (1), or on the day (0)."""
    sources: tuple[int, ...] = ()
    """The memories it rests on: an event's timeline entry, a check-in's concern's sources."""

    @classmethod
    def of(cls, event: Event) -> Due:
        p = event.payload
        return cls(
            event.id,
            str(p.get("kind", "reminder")),
            str(p.get("text", "")),
            str(p.get("local", "")),
            str(p.get("zone", "UTC")),
            p.get("repeat"),
            event.turn_id,
            int(p.get("attempts", 0)),
            int(p.get("ahead", 0)),
            tuple(int(i) for i in p.get("sources") or ()),
        )

    def task(self, language: str) -> str:
        """The turn's message: what to write about (data in quotes, never instructions)."""
        shapes = TASK.get(language, TASK["en"])
        when = self.local.replace("T", " ")[:16]
        shape = "event_ahead" if self.kind == "event" and self.ahead else self.kind
        return shapes.get(shape, shapes["reminder"]).format(
            when=when, text=json.dumps(self.text, ensure_ascii=False)
        )


def withheld(final: TurnState) -> str | None:
    """Why a proactive turn's answer is not sent, or ``None`` (it is)."""
    reply = str(final.get("reply") or "").strip()
    if not reply or reply.strip(" .!").upper() == NOTHING:
        return "the model found nothing worth saying"
    court = final.get("tribunal")
    if court is not None and any(v.vote == "revise" for v in court.votes):
        return "a judge still asked for a revision after the corrector"
    return None


def record(c: Connection, due: Due, status: str, result: str) -> int | None:
    """In one transaction with what caused it (the proactive turn's, or the sender's when it
    drops one unsent): the event ``sent`` or ``dropped`` with ``result`` and, for a
    repeating reminder, the next one scheduled at the same wall time; its id."""
    store.settle(c, due.event_id, status, result)
    if due.repeat is None:
        return None
    zone = ZoneInfo(due.zone)
    local = datetime.fromisoformat(due.local)
    upcoming = next_after(When(local, local, due.repeat), zone)
    if upcoming is None:
        return None
    row = store.owner_of(c, due.event_id)
    assert row is not None
    cause = str(row.payload.get("cause", ""))
    return schedule(
        c,
        row.user_id,
        due.text,
        upcoming,
        cause=cause,
        cause_key=f"repeat:{due.event_id}",
        kind=due.kind,
        turn_id=due.asked_in,
        conversation=row.conversation_id,
    )
