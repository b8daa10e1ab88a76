"""Router: reads ONLY the raw user message; returns intent, desired tone, needs_check.

It never sees memory, profile or timeline: what it classifies is the message alone. It is not
essential: unusable output or a failed call gives the safe default route (:data:`FALLBACK`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from novaberg.graph.failure import Fallback
from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.structured import ask_structured

SAFE_DEFAULT = {"intent": "smalltalk", "tone": "warm", "needs_check": False}


class RouterOutput(BaseModel):
    model_config = ConfigDict(extra="ignore")
    intent: str = Field(min_length=1, max_length=60)
    tone: str = Field(min_length=1, max_length=60)
    needs_check: bool


async def router(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    messages = [
        {"role": "system", "content": ctx.prompts.router},
        {"role": "user", "content": state["user_text"]},
    ]
    parsed = await ask_structured(ctx, "router", messages, RouterOutput)
    if parsed is None:
        return _default_route(state, ctx)
    return {"router": {**parsed.model_dump(), "default": False}}


def _default_route(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    return {"router": {**SAFE_DEFAULT, "default": True}}


FALLBACK = Fallback(_default_route, "the default route is used")
