"""Salience: how much the USER's message matters for remembering them (0..1).

The subject is the user's message ALONE and it comes LAST; Nova's answer opens the situation
block, so a long calm answer cannot dilute a short stressed message (../shared/seeds/002).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.prompts.budget import judging_prompt
from novaberg.prompts.evaluation import Instruction, Situation, Subject
from novaberg.structured import ask_structured, schema_of

ROLE = {
    "en": "You rate how much the USER's message matters for remembering them later: 0 = nothing "
    "worth keeping (greetings, small talk, general knowledge questions), 0.5 = a minor personal "
    "detail, 0.7 or more = strong feelings (stress, overwhelm, grief, joy), plans, dates, "
    "relationships, health, important facts about their life.",
    "de": "Du bewertest, wie wichtig die Nachricht der PERSON ist, um sich später an sie zu "
    "erinnern: 0 = nichts Behaltenswertes (Gruß, Smalltalk, allgemeine Wissensfragen), 0.5 = ein "
    "kleines persönliches Detail, 0.7 oder mehr = starke Gefühle (Stress, Überforderung, Trauer, "
    "Freude), Pläne, Termine, Beziehungen, Gesundheit, wichtige Tatsachen über ihr Leben.",
}
OUTPUT = {
    "en": 'Reply with ONE JSON object: {"score": number between 0 and 1, "summary": one sentence '
    'about the user in third person, or ""}.',
    "de": 'Antworte mit GENAU EINEM JSON-Objekt: {"score": Zahl zwischen 0 und 1, "summary": ein '
    'Satz über die Person in der dritten Person, oder ""}.',
}


class SalienceOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    score: float = Field(ge=0.0, le=1.0)
    summary: str = Field(default="", max_length=500)


def salience_messages(state: TurnState, ctx: TurnContext) -> list[dict[str, Any]]:
    language = ctx.settings.language
    instruction = Instruction(
        role=ROLE.get(language, ROLE["en"]), output=OUTPUT.get(language, OUTPUT["en"])
    )
    situation = Situation.from_state(state, with_answer=True)
    subject = Subject(state["user_text"])
    schema = schema_of(SalienceOutput)
    return judging_prompt(
        ctx, "salience", instruction, situation, subject, doubt=False, json_schema=schema
    )


async def salience(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    if state.get("origin") == "self_trigger":
        return {}  # Nova's own second look: the user's message was weighed in its first turn
    parsed = await ask_structured(ctx, "salience", salience_messages(state, ctx), SalienceOutput)
    if parsed is None:
        # Unknown importance is not "unimportant": nothing is stored, and the trace says why.
        return {"salience": {"score": None, "summary": "", "malformed": True}}
    return {"salience": {"score": parsed.score, "summary": parsed.summary.strip()}}


def _unscored(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    return {"salience": {"score": None, "summary": "", "failed": True}}


FALLBACK = Fallback(_unscored, "nothing from this turn is remembered")
"""A failed salience call: unknown importance, so nothing is stored."""
