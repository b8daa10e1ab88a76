"""Enricher (no LLM): loads what the responder should know.

First version: the conversation's recent completed exchanges, the user's most recent salient
memories, the latest user profile (core + adaptive) and timeline entries from yesterday to two
weeks ahead. Retrieval by relevance comes with the memory issue.
"""

from __future__ import annotations

from datetime import date, timedelta
from typing import Any

from novaberg.graph.state import TurnState
from novaberg.nodes.context import TurnContext

MEMORY_LIMIT = 8
TIMELINE_BACK = timedelta(days=1)
TIMELINE_AHEAD = timedelta(days=14)


async def enricher(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    history = ctx.db.history(state["conversation_id"], ctx.settings.history_turns)
    memories = ctx.db.recent_memories(state["user_id"], MEMORY_LIMIT)
    today = date.today()
    timeline = ctx.db.timeline_between(
        state["user_id"],
        (today - TIMELINE_BACK).isoformat(),
        (today + TIMELINE_AHEAD).isoformat(),
    )
    return {
        "context": {
            "history": [{"role": m.role, "content": m.content} for m in history],
            "memories": [
                {"id": m.id, "text": m.text, "reason": "recent salient item"} for m in memories
            ],
            "profile": ctx.db.profile(state["user_id"]) or None,
            "timeline": [{"date": t["happens_on"], "text": t["text"]} for t in timeline],
        }
    }
