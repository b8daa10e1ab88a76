"""Salience: how much the USER's message matters for remembering them (0..1), with Nova's
answer as the situation (the prompt: :mod:`novaberg.prompts.salience`)."""

from __future__ import annotations

from novaberg.backends.base import ChatMessage
from novaberg.graph.channels import Salience
from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.prompts.evaluation import Situation
from novaberg.prompts.salience import SalienceOutput, salience_prompt
from novaberg.structured import ask_structured


def salience_messages(state: TurnState, ctx: TurnContext) -> list[ChatMessage]:
    situation = Situation.from_state(state, with_answer=True)
    return salience_prompt(ctx, situation, state["user_text"])


async def salience(state: TurnState, ctx: TurnContext) -> TurnState:
    if state.get("origin") in ("self_trigger", "proactive"):
        # Nova's own second look (the user's message was weighed in its first turn), or a
        # message she writes first: there is no user message to weigh
        return {}
    parsed = await ask_structured(ctx, "salience", salience_messages(state, ctx), SalienceOutput)
    if parsed is None:
        # Unknown importance is not "unimportant": nothing is stored, and the trace says why.
        return {"salience": Salience(score=None, summary="", malformed=True)}
    return {"salience": Salience(score=parsed.score, summary=parsed.summary.strip())}


def _unscored(state: TurnState, ctx: TurnContext) -> TurnState:
    return {"salience": Salience(score=None, summary="", failed=True)}


FALLBACK = Fallback(_unscored, "nothing from this turn is remembered")
"""A failed salience call: unknown importance, so nothing is stored."""
