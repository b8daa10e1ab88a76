"""Salience: how much the USER's message matters (0..1).

The subject is the user's message alone and it comes LAST; Nova's answer sits in the
situation block, so it explains the message without being scored.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.nodes.structured import ask_structured


class SalienceOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    score: float = Field(ge=0.0, le=1.0)
    summary: str = Field(default="", max_length=500)


def build_prompt(state: TurnState, ctx: TurnContext) -> str:
    p = ctx.prompts
    route = state.get("router") or {}
    return "\n".join(
        [
            p.situation_header,
            p.intent_line.format(intent=route.get("intent", "?"), tone=route.get("tone", "?")),
            f"Nova: {state.get('reply', '')}",
            "",
            p.subject_header,
            f"User: {state['user_text']}",
        ]
    )


async def salience(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": ctx.prompts.salience},
        {"role": "user", "content": build_prompt(state, ctx)},
    ]
    parsed = await ask_structured(ctx, "salience", messages, SalienceOutput)
    if parsed is None:
        # Unknown importance is not "unimportant": nothing is stored, and the trace says why.
        return {"salience": {"score": None, "summary": "", "malformed": True}}
    return {"salience": {"score": parsed.score, "summary": parsed.summary.strip()}}
