"""Router: reads ONLY the raw user message; returns intent, desired tone, needs_check.

It never sees memory, profile or timeline: what it classifies is the message alone.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext
from novaberg.nodes.structured import ask_structured

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
        return {"router": {**SAFE_DEFAULT, "default": True}}
    return {"router": {**parsed.model_dump(), "default": False}}
