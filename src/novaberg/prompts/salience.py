"""Salience's prompt: how much the USER's message matters for remembering them (0..1).

One door for the turn's salience node and for the import's ``weigh`` job
(:mod:`novaberg.memory.jobs`): the subject is the user's message ALONE and it comes LAST;
Nova's answer, when there is one, opens the situation block, so a long calm answer cannot
dilute a short stressed message (../shared/seeds/002).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from novaberg.backends.base import ChatMessage
from novaberg.context import CallContext
from novaberg.prompts.budget import judging_prompt
from novaberg.prompts.evaluation import Instruction, Situation, Subject
from novaberg.structured import schema_of

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


def salience_prompt(ctx: CallContext, situation: Situation, user_text: str) -> list[ChatMessage]:
    """The salience call's messages for ``user_text`` in ``situation``, within the budget."""
    language = ctx.settings.language
    instruction = Instruction(
        role=ROLE.get(language, ROLE["en"]), output=OUTPUT.get(language, OUTPUT["en"])
    )
    schema = schema_of(SalienceOutput)
    return judging_prompt(
        ctx, "salience", instruction, situation, Subject(user_text), doubt=False, json_schema=schema
    )
