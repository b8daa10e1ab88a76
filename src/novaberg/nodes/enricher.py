"""Enricher (no LLM, except the message's embedding when ``memory.embed_model`` is set):
loads what the responder should know.

- the conversation's recent completed exchanges;
- memories chosen by :class:`~novaberg.memory.retrieval.Retriever` (recency + importance +
  relevance, in a token budget), each with the reason it was chosen;
- the latest user profile (core + adaptive);
- timeline events from yesterday to two weeks ahead.

The reasons go into the turn's trace as ``retrieval`` (ids and reasons only: the trace of a
later turn must not keep a copy of a memory's text that the user may forget).

Every read runs in one hop to the database's worker threads (``ctx.db.run``), off the loop.
"""

from __future__ import annotations

import logging
from datetime import date, timedelta
from typing import Any

from novaberg.errors import BackendError, error_kind
from novaberg.graph.state import TurnState
from novaberg.memory.retrieval import Retrieved, Retriever
from novaberg.memory.store import MemoryItem, MemoryStore
from novaberg.nodes.context import TurnContext
from novaberg.queue import FOREGROUND
from novaberg.storage.db import Message

log = logging.getLogger("novaberg")
TIMELINE_BACK = timedelta(days=1)
TIMELINE_AHEAD = timedelta(days=14)


async def enricher(state: TurnState, ctx: TurnContext) -> dict[str, Any]:
    user = state["user_id"]
    store = MemoryStore(ctx.db)
    settings = ctx.settings.memory
    retriever = Retriever(
        store,
        budget_tokens=settings.budget_tokens,
        max_items=settings.max_items,
        half_life_days=settings.half_life_days,
        fact_half_life_days=settings.fact_half_life_days,
    )
    vector = await _message_vector(state["user_text"], ctx)
    today = date.today()

    def load() -> tuple[list[Message], list[Retrieved], list[MemoryItem], dict[str, str]]:
        history = ctx.db.history(state["conversation_id"], ctx.settings.history_turns)
        chosen = retriever.retrieve(
            user, state["user_text"], query_vector=vector, vector_model=settings.embed_model
        )
        events = store.events_between(
            user, (today - TIMELINE_BACK).isoformat(), (today + TIMELINE_AHEAD).isoformat()
        )
        profile = {part: p.text for part, p in store.profile(user).items() if p.text}
        return history, chosen, events, profile

    history, chosen, events, profile = await ctx.db.run(load)
    return {
        "context": {
            "history": [{"role": m.role, "content": m.content} for m in history],
            "memories": [
                {"id": r.item.id, "text": r.item.text, "reason": r.reason} for r in chosen
            ],
            "retrieval": [
                {
                    "id": r.item.id,
                    "score": round(r.score, 3),
                    "tokens": r.tokens,
                    "reason": r.reason,
                }
                for r in chosen
            ],
            "profile": profile or None,
            "timeline": [{"date": e.happens_on, "text": e.text} for e in events],
        }
    }


async def _message_vector(text: str, ctx: TurnContext) -> list[float] | None:
    model = ctx.settings.memory.embed_model
    if not model:
        return None
    try:
        vectors = await ctx.queue.embed(
            [text], model, caller="embed", trace=ctx.trace, priority=FOREGROUND
        )
    except BackendError as exc:
        log.warning(
            "no embedding for this turn (%s); retrieval uses full-text only", error_kind(exc)
        )
        return None
    return None if vectors is None else vectors[0]
