"""Memory write: decide what of this turn becomes a short-term memory.

The item is stored by the engine in the same transaction as the turn's messages, together
with its background jobs (:mod:`novaberg.memory.jobs`), so a turn that fails or is aborted
afterwards leaves no memory behind. ``salience.stored`` in the trace is set only once that
transaction committed. A summary that repeats, up to case and spacing, a current short-term
memory of the user (one the enricher found for the turn, else one looked up by its words) is
not stored again (a notice in the trace says which it repeats).
"""

from __future__ import annotations

from novaberg.graph.channels import MemoryPlan
from novaberg.graph.state import TurnState
from novaberg.memory.store import MemoryStore
from novaberg.nodes.context import TurnContext
from novaberg.text import same_text


async def memory_write(state: TurnState, ctx: TurnContext) -> TurnState:
    scored = state.get("salience")
    score = scored.score if scored is not None else None
    summary = scored.summary if scored is not None else ""
    if score is None or score < ctx.settings.salience_threshold or not summary:
        return {"memory_item": None}
    kept = _kept_already(state, summary)
    if kept is None:  # one the enricher did not bring: looked up by its words
        store = MemoryStore(ctx.db)
        kept = await ctx.db.run(store.current_saying, state["user_id"], "short_term", summary)
    if kept is not None:
        ctx.trace.notices.append(f"memory_write: kept already as memory {kept}; not stored twice")
        return {"memory_item": None}
    return {"memory_item": MemoryPlan(text=summary, score=float(score))}


def _kept_already(state: TurnState, summary: str) -> int | None:
    """The id of a short-term memory the enricher found for this turn that says exactly
    ``summary`` (an exact repeat is found by its own words), else ``None``. A durable fact
    saying the same does not count: consolidation links the new item to it as its source."""
    wanted = same_text(summary)
    context = state.get("context")
    for memory in context.memories if context is not None else ():
        if memory.kind != "short_term" or memory.id is None:
            continue
        if same_text(memory.text) == wanted:
            return memory.id
    return None
