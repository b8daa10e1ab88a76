"""Corrector: rewrites the answer from the reasons of the judges that voted ``revise``.

Same separation as the judges: the situation explains, the reviewers' reasons say what to fix,
the subject (message + answer) comes last, and the rule is explicit that the correction
concerns only the subject — a worry from the profile must not wander into an answer about
pancakes (../shared/seeds/002, "drift"). The judges then vote again.

A corrector whose call fails after its retries keeps the answer (:data:`FALLBACK`); the
tribunal then ends the corrections instead of voting again on an unchanged answer.
"""

from __future__ import annotations

from novaberg.backends.base import ChatMessage, ChatRequest
from novaberg.graph.channels import Correcting
from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.prompts.budget import bounded_reply, judging_prompt
from novaberg.prompts.evaluation import Instruction, Situation, Subject

ROLE = {
    "en": "You are Nova's corrector. Rewrite the answer in the subject so that it fixes what "
    "the reviewers' reasons name. The correction concerns ONLY the subject: do not bring in "
    "topics from the situation that the user's message does not ask about. Keep Nova's voice "
    "and the user's language.",
    "de": "Du bist Novas Korrektor. Schreibe die Antwort im Bewertungsobjekt so um, dass sie "
    "behebt, was die Begründungen der Prüfer nennen. Die Korrektur bezieht sich NUR auf das "
    "Bewertungsobjekt: Bring keine Themen aus dem Lagebild ein, nach denen die Nachricht nicht "
    "fragt. Behalte Novas Stimme und die Sprache der Person.",
}
OUTPUT = {
    "en": "Reply with the corrected answer only, as Nova would say it.",
    "de": "Antworte nur mit der korrigierten Antwort, so wie Nova sie sagen würde.",
}


def corrector_messages(state: TurnState, ctx: TurnContext, reasons: list[str]) -> list[ChatMessage]:
    language = ctx.settings.language
    instruction = Instruction(
        role=ROLE.get(language, ROLE["en"]), output=OUTPUT.get(language, OUTPUT["en"])
    )
    situation = Situation.from_state(state)
    subject = Subject(state["user_text"], state["reply"])
    return judging_prompt(
        ctx, "corrector", instruction, situation, subject, review=reasons, doubt=False
    )


def revise_reasons(state: TurnState) -> list[str]:
    """The reasons of the judges that voted ``revise`` in the last round."""
    court = state.get("tribunal")
    votes = court.votes if court is not None else ()
    return [f"{v.judge}: {v.reason or 'revise'}" for v in votes if v.vote == "revise"]


async def corrector(state: TurnState, ctx: TurnContext) -> TurnState:
    reasons = revise_reasons(state)
    request = ChatRequest(
        caller="corrector", messages=corrector_messages(state, ctx, reasons), think=False
    )
    result = await ctx.llm(request)
    rounds = _rounds_before(state) + 1
    text = result.response.content.strip()
    if not text:
        # Nothing usable: the answer stays as it was, and the trace says the round failed.
        return {"corrector": Correcting(rounds, tuple(reasons), applied=False)}
    text = bounded_reply(ctx, "corrector", text)
    return {"reply": text, "corrector": Correcting(rounds, tuple(reasons), applied=True)}


def _rounds_before(state: TurnState) -> int:
    previous = state.get("corrector")
    return previous.rounds if previous is not None else 0


def _answer_kept(state: TurnState, ctx: TurnContext) -> TurnState:
    rounds = _rounds_before(state) + 1
    reasons = tuple(revise_reasons(state))
    return {"corrector": Correcting(rounds, reasons, applied=False, failed=True)}


FALLBACK = Fallback(_answer_kept, "the answer stays as it was")
