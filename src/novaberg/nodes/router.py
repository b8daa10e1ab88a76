"""Router: reads ONLY the raw user message; returns intent, desired tone, needs_check, and
whether the message corrects or retracts something said before (``correction``: the words that
were wrong and, for a correction, the right ones; :mod:`novaberg.memory.corrections` finds the
memory they are about), and whether it asks to be reminded (``reminder``: of what, and the
words that say when; :mod:`novaberg.proactive.when` reads them).

It never sees memory, profile or timeline: what it classifies is the message alone. It is not
essential: unusable output or a failed call gives the safe default route (:data:`FALLBACK`).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.structured import ask_structured

SAFE_DEFAULT = {"intent": "smalltalk", "tone": "warm", "needs_check": False}


# The message corrects or retracts something the user said before ("no, Munich, not Berlin":
# ``correct``, wrong "Berlin", right "Munich"; "I don't have the dog any more": ``retract``,
# wrong "dog"). No docstring: it would be the schema's description, sent with every request.
class Correction(BaseModel):
    model_config = ConfigDict(extra="ignore")
    kind: Literal["correct", "retract"]
    wrong: str = Field(min_length=1, max_length=200)
    right: str | None = Field(None, max_length=200)


# The message asks to be reminded ("remind me tomorrow at 9 to call my mother": what "call my
# mother", when "tomorrow at 9"); novaberg.proactive.when reads ``when``. No docstring: it
# would be the schema's description, sent with every router request.
class Reminder(BaseModel):
    model_config = ConfigDict(extra="ignore")
    what: str = Field(min_length=1, max_length=300)
    when: str = Field(min_length=1, max_length=100)


class RouterOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    intent: str = Field(min_length=1, max_length=60)
    tone: str = Field(min_length=1, max_length=60)
    needs_check: bool
    correction: Correction | None = None


# The router's output while Nova can send reminders (proactive.enabled; off on the embedded
# model, whose small model fills the field from the prompt's own words). No docstring: see above.
class RouterWithReminder(RouterOutput):
    reminder: Reminder | None = None


async def router(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    reminders = ctx.settings.proactive.enabled
    system = ctx.prompts.router
    if reminders:
        system = f"{system} {ctx.prompts.router_reminder}"
    messages = [
        {"role": "system", "content": system},
        {"role": "user", "content": state["user_text"]},
    ]
    shape = RouterWithReminder if reminders else RouterOutput
    parsed = await ask_structured(ctx, "router", messages, shape)
    if parsed is None:
        return _default_route(state, ctx)
    route = parsed.model_dump()
    if not _heard(route.get("correction"), state["user_text"]):
        route.pop("correction", None)
    if not _asked(route.get("reminder"), state["user_text"]):
        route.pop("reminder", None)
    return {"router": {**route, "default": False}}


def _heard(correction: dict[str, Any] | None, message: str) -> bool:
    """A correction the message really makes: its wrong words, and for a correction its right
    ones, are in the message itself (a small model that invents one must not change a memory:
    the router reads nothing else)."""
    if correction is None:
        return False
    said = message.casefold()
    wrong, right = correction["wrong"].strip(), (correction.get("right") or "").strip()
    if not wrong or wrong.casefold() not in said:
        return False
    return correction["kind"] == "retract" or bool(right and right.casefold() in said)


def _asked(reminder: dict[str, Any] | None, message: str) -> bool:
    """A reminder the message really asks for: the words that say when are in it (a model
    that invents a time must not schedule anything)."""
    if reminder is None:
        return False
    when = reminder["when"].strip().casefold()
    return bool(when and reminder["what"].strip()) and when in message.casefold()


def _default_route(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    return {"router": {**SAFE_DEFAULT, "default": True}}


FALLBACK = Fallback(_default_route, "the default route is used")
