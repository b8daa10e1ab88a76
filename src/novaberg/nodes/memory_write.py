"""Memory write: decide what of this turn becomes a short-term memory.

The item is stored by the engine in the same transaction as the turn's messages, together
with its background jobs (:mod:`novaberg.memory.jobs`), so a turn that fails or is aborted
afterwards leaves no memory behind. ``salience.stored`` in the trace is set only once that
transaction committed.
"""

from __future__ import annotations

from typing import Any

from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext


async def memory_write(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    scored = state.get("salience") or {}
    score = scored.get("score")
    summary = scored.get("summary") or ""
    if score is None or score < ctx.settings.salience_threshold or not summary:
        return {"memory_item": None}
    return {"memory_item": {"text": summary, "score": float(score)}}
