"""Enricher (no LLM): loads what the responder should know — history and memory.

First version: the conversation's recent completed exchanges and the user's most recent
salient memories. Retrieval by relevance, the profile and the timeline come with the memory
issue; their channels are already part of ``context``.
"""

from __future__ import annotations

from typing import Any

from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext

MEMORY_LIMIT = 8


async def enricher(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    history = ctx.db.history(state["conversation_id"], ctx.settings.history_turns)
    memories = ctx.db.recent_memories(state["user_id"], MEMORY_LIMIT)
    return {
        "context": {
            "history": [{"role": m.role, "content": m.content} for m in history],
            "memories": [
                {"id": m.id, "text": m.text, "reason": "recent salient item"} for m in memories
            ],
            "profile": None,
            "timeline": [],
        }
    }
