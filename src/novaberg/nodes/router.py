"""Router: reads ONLY the raw user message; returns intent, desired tone, needs_check, and
whether the message corrects or retracts something said before (``correction``: the words that
were wrong and, for a correction, the right ones; :mod:`novaberg.memory.corrections` finds the
memory they are about), and whether it asks to be reminded (``reminder``: of what, and the
words that say when; :mod:`novaberg.proactive.when` reads them).

It never sees memory, profile or timeline: what it classifies is the message alone. It is not
essential: unusable output or a failed call gives the safe default route (:data:`FALLBACK`).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from novaberg.backends.base import ChatMessage
from novaberg.graph.channels import Correction, Reminder, Route
from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.structured import ask_structured

SAFE_DEFAULT = Route(intent="smalltalk", tone="warm", needs_check=False, default=True)


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


async def router(state: TurnState, ctx: TurnContext) -> TurnState:
    reminders = ctx.settings.proactive.enabled
    system = ctx.prompts.router
    if reminders:
        system = f"{system} {ctx.prompts.router_reminder}"
    messages: list[ChatMessage] = [
        {"role": "system", "content": system},
        {"role": "user", "content": state["user_text"]},
    ]
    shape = RouterWithReminder if reminders else RouterOutput
    parsed = await ask_structured(ctx, "router", messages, shape)
    if parsed is None:
        return _default_route(state, ctx)
    message = state["user_text"]
    correction = parsed.correction if _heard(parsed.correction, message) else None
    asked = parsed.reminder if isinstance(parsed, RouterWithReminder) else None
    route = Route(
        intent=parsed.intent,
        tone=parsed.tone,
        needs_check=parsed.needs_check,
        default=False,
        correction=correction,
        reminder=asked if _asked(asked, message) else None,
    )
    return {"router": route}


def _heard(correction: Correction | None, message: str) -> bool:
    """A correction the message really makes: its wrong words, and for a correction its right
    ones, are in the message itself (a small model that invents one must not change a memory:
    the router reads nothing else)."""
    if correction is None:
        return False
    said = message.casefold()
    wrong, right = correction.wrong.strip(), (correction.right or "").strip()
    if not wrong or wrong.casefold() not in said:
        return False
    return correction.kind == "retract" or bool(right and right.casefold() in said)


def _asked(reminder: Reminder | None, message: str) -> bool:
    """A reminder the message really asks for: the words that say when are in it (a model
    that invents a time must not schedule anything)."""
    if reminder is None:
        return False
    when = reminder.when.strip().casefold()
    return bool(when and reminder.what.strip()) and when in message.casefold()


def _default_route(state: TurnState, ctx: TurnContext) -> TurnState:
    return {"router": SAFE_DEFAULT}


FALLBACK = Fallback(_default_route, "the default route is used")
